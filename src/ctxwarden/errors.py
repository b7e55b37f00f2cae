"""The errors ctxwarden raises.

One small hierarchy, so a caller can catch everything ctxwarden raises with one
`except CtxwardenError` and still tell the cases apart. Every message names the
bad value and says how to fix it; each class also derives from the builtin a
caller would already expect (`ValueError`, `LookupError`), so generic handlers
keep working.
"""

from __future__ import annotations


class CtxwardenError(Exception):
    """Base class of every error ctxwarden raises on purpose."""


class PolicyError(CtxwardenError, ValueError):
    """A `ContextPolicy` field holds a value that cannot work."""


class WindowUnknownError(CtxwardenError, LookupError):
    """The context window of the model being called cannot be determined."""


class TrajectoryFormatError(CtxwardenError, ValueError):
    """A recorded session file cannot be read as a trajectory."""


class ReplayMismatchError(CtxwardenError, RuntimeError):
    """A replayed model or tool was called in a way the recording does not contain."""


__all__ = [
    "CtxwardenError",
    "PolicyError",
    "ReplayMismatchError",
    "TrajectoryFormatError",
    "WindowUnknownError",
]
