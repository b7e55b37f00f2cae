"""The two calls no layer can save: a window too small for what every call sends, and a provider that refuses the call
as too long even after the forced round of clearing and folding. Each error names the sizes and the fix."""

from __future__ import annotations

from collections.abc import Sequence

from ctxwarden.core.layers import CallBudget
from ctxwarden.errors import ContextStillTooLargeError, WindowTooSmallError


def with_room(budget: CallBudget) -> CallBudget:
    """`budget`, unless its window cannot hold what every call sends before any message: no layer can make room there,
    and a run would go on with every call over the window."""
    measured = budget.measurement
    fixed = round((measured.system + measured.tools) * measured.factor)
    window = budget.window
    if fixed < window.tokens:
        return budget
    raise WindowTooSmallError(
        f"the window of {window.model} is {window.tokens:,} tokens, but the system prompt "
        f"({measured.system:,} tokens) and the tool schemas ({measured.tools:,} tokens) alone take {fixed:,}: no "
        "message would fit. Fix: pass the model's real window (ContextPolicy(window=...) well above "
        f"{fixed:,}, e.g. {max(4 * fixed, 8_000):,}), or give the agent a shorter system prompt or fewer tools.",
        window=window.tokens,
        fixed=fixed,
    )


def still_too_large(
    first: CallBudget, retry: CallBudget, applied: Sequence[str], error: Exception
) -> ContextStillTooLargeError:
    window = retry.window
    tried = ", ".join(applied) or "nothing left to clear or fold"
    return ContextStillTooLargeError(
        f"{window.model} refused the call as too long twice: first at about {first.used:,} tokens "
        f"(window {window.tokens:,}); ctxwarden then cleared and folded as far as it could ({tried}) down to about "
        f"{retry.used:,} tokens and retried once, and the provider refused again ({error}). "
        "Fix: use a model with a larger window, or pass ContextPolicy(window=...) below what the provider accepts "
        "so ctxwarden keeps every call smaller."
    )


__all__ = ["still_too_large", "with_room"]
