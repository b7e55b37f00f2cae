"""Optional dependencies: matplotlib for the plot, rich for the terminal report, each behind an extra.

The context manager itself needs neither, so a server install stays small. A feature that
needs one imports it through `require`, which turns a missing package into an error that
names the extra to install, instead of a bare `ModuleNotFoundError` from deep inside.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ctxwarden.errors import MissingExtraError

EXTRAS = {"matplotlib": "plot", "rich": "rich"}
"""The extra that installs each optional package."""


def require(module: str, feature: str) -> ModuleType:
    """Import `module` (e.g. `"matplotlib.figure"`) for `feature`, or say which extra installs it."""
    package = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra = EXTRAS.get(package, package)
        raise MissingExtraError(
            f"{feature} needs {package}, which is not installed. Fix: pip install 'ctxwarden[{extra}]' "
            f"(or 'ctxwarden[demo]' for everything the demo shows)."
        ) from exc


def available(package: str) -> bool:
    """Whether an optional package can be imported."""
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    return True


__all__ = ["EXTRAS", "available", "require"]
