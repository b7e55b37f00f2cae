"""The errors ctxwarden raises.

One small hierarchy, so a caller can catch everything ctxwarden raises with one
`except CtxwardenError` and still tell the cases apart. Every message names the
bad value and says how to fix it; each class also derives from the builtin a
caller would already expect (`ValueError`, `LookupError`), so generic handlers
keep working.
"""

from __future__ import annotations

from langchain_core.exceptions import ContextOverflowError


class CtxwardenError(Exception):
    """Base class of every error ctxwarden raises on purpose."""


class PolicyError(CtxwardenError, ValueError):
    """A `ContextPolicy` field holds a value that cannot work."""


class WindowUnknownError(CtxwardenError, LookupError):
    """The context window of the model being called cannot be determined."""


class WindowTooSmallError(CtxwardenError, ValueError):
    """The window of the model being called cannot hold even the system prompt and the tool schemas."""

    def __init__(self, message: str, *, window: int, fixed: int) -> None:
        super().__init__(message)
        self.window = window
        """The window, in tokens."""
        self.fixed = fixed
        """What the system prompt and the tool schemas take, in tokens."""


class ContextStillTooLargeError(CtxwardenError, ContextOverflowError):
    """The provider refused a call as too long even after ctxwarden cleared and folded and retried.

    Also a langchain-core `ContextOverflowError`, so handlers written for the provider's error still catch it.
    """


class BuildArgumentError(CtxwardenError, TypeError, ValueError):
    """A build argument cannot work: a policy that is not a `ContextPolicy`, an unknown summarizer.

    Also a `TypeError` and a `ValueError`, whichever a caller's handler expects.
    """


class MissingExtraError(CtxwardenError, ImportError):
    """A feature needs an optional package (matplotlib, rich) that is not installed; the message names the extra."""


class TrajectoryFormatError(CtxwardenError, ValueError):
    """A recorded session file cannot be read as a trajectory."""


class ReplayMismatchError(CtxwardenError, RuntimeError):
    """A replayed model or tool was called in a way the recording does not contain."""


class LayerStateError(CtxwardenError, ValueError):
    """A layer keeps state the agent's schema does not hold (it would be dropped)."""


class TraceError(CtxwardenError):
    """The trace cannot be opened or fails verification."""


class UnknownThreadError(CtxwardenError, LookupError):
    """The thread (or the store it should be in) does not exist."""


class ThreadIdError(CtxwardenError, ValueError):
    """The run's thread id cannot name a thread (an empty string); the message says what to pass."""


class ThreadSourceError(CtxwardenError, TypeError):
    """What was passed to read or write a thread is neither an agent, a checkpointer nor a state dir.

    Also a `TypeError`, what a caller's handler for a wrong argument expects.
    """


class CheckpointWriteError(CtxwardenError, OSError):
    """A checkpoint could not be written; what was saved before it is intact."""


class ThreadDeleteError(CtxwardenError, OSError):
    """A thread's offloaded files could not all be deleted; its checkpoints were kept (see the message)."""


class ForkError(CtxwardenError, ValueError):
    """The chosen units cannot make a valid thread, or the fork's thread already exists."""


class NothingMeasuredError(CtxwardenError, ValueError):
    """A thread has no model call measured by ctxwarden yet, so there is nothing to show."""


class SummarizerError(CtxwardenError, ValueError):
    """The summarizer model answered without a summary (the fold falls back to the deterministic one)."""


class SummarizerTimeoutError(CtxwardenError, TimeoutError):
    """The summarizer model did not answer within `summarizer_timeout` (the fold falls back)."""


__all__ = [
    "BuildArgumentError",
    "CheckpointWriteError",
    "ContextStillTooLargeError",
    "CtxwardenError",
    "ForkError",
    "LayerStateError",
    "MissingExtraError",
    "NothingMeasuredError",
    "PolicyError",
    "ReplayMismatchError",
    "SummarizerError",
    "SummarizerTimeoutError",
    "ThreadDeleteError",
    "ThreadSourceError",
    "TraceError",
    "TrajectoryFormatError",
    "UnknownThreadError",
    "WindowTooSmallError",
    "WindowUnknownError",
]
