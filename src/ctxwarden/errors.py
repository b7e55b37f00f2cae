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


_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "contextwindowexceedederror",
    "maximum context length",
    "exceeds the context window",
    "exceeds the available context size",
    "context window exceeded",
    "context limit exceeded",
    "input tokens exceed the configured limit",
    "prompt is too long",
    "request too large",
)


def is_context_overflow(exc: BaseException) -> bool:
    """Whether a provider error says the input was larger than the model's window.

    `langchain_core.exceptions.ContextOverflowError`, or a 400/413/422 whose message
    carries one of the providers' usual wordings.
    """
    if isinstance(exc, ContextOverflowError):
        return True
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None), "status_code", None)
    if status not in {400, 413, 422}:
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _OVERFLOW_MARKERS)


__all__ = [
    "BuildArgumentError",
    "ContextStillTooLargeError",
    "CtxwardenError",
    "MissingExtraError",
    "PolicyError",
    "ReplayMismatchError",
    "TrajectoryFormatError",
    "WindowUnknownError",
    "is_context_overflow",
]
