"""Deprecation aliases: a public name that moved keeps working for a while, with a `DeprecationWarning`.

A package that lost a name declares where it went; its module `__getattr__` imports the
new home by name on first use, warns, and returns the object. The import happens by
name and only when an old path is used, so an alias never makes a low layer import a
higher one when the package loads.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def moved_names(old_module: str, new_homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `old_module` serving each name in `new_homes` from its new module, with a warning."""

    def __getattr__(name: str) -> Any:
        home = new_homes.get(name)
        if home is None:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(
            f"{old_module}.{name} has moved: import it from {home} (or from ctxwarden) instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        found = getattr(import_module(home), name)
        vars(sys.modules[old_module])[name] = found  # warned once: later uses find it in place
        return found

    return __getattr__


def warn_moved_module(old_module: str, new_module: str) -> None:
    """Warn that `old_module` is now `new_module` (called once, at the old module's import)."""
    warnings.warn(
        f"{old_module} has moved to {new_module}: import from there (or from ctxwarden) instead.",
        DeprecationWarning,
        stacklevel=3,
    )


__all__ = ["moved_names", "warn_moved_module"]
