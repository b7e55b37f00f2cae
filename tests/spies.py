"""Spies for tests that assert how often a function runs: the function still runs, each call is noted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def note_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, note: Callable[..., Any]) -> list[Any]:
    """Replace `owner.name` for the test by a wrapper that appends `note(*args)` to the returned list, then calls it.

    On a class, `args` starts with the instance.
    """
    noted: list[Any] = []
    original = getattr(owner, name)

    def spied(*args: Any, **kwargs: Any) -> Any:
        noted.append(note(*args))
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, spied)
    return noted
