"""The calls no layer can save, and the one that is not sent as it stands.

A window too small for what every call sends, and a call refused as too long even after the forced round of clearing
and folding: each error names the sizes and the fix. A call measured past a window the model declares itself goes
through the forced round before it is sent (`refused_ahead`). A refused call is shaped again for the window the
refusal states, when it states a smaller one (`core.stated_window`), then forced (`Refusals`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from ctxwarden.clip.media_files import media_count
from ctxwarden.core.layers import CallBudget
from ctxwarden.core.media import media_of
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stated_window import learned
from ctxwarden.core.window import Window
from ctxwarden.errors import ContextStillTooLargeError, WindowTooSmallError
from ctxwarden.stack.shaped import ShapedCall


def with_room(budget: CallBudget) -> CallBudget:
    """`budget`, unless its window cannot hold what every call sends before any message: no layer can make room there,
    and a run would go on with every call over the window."""
    measured = budget.measurement
    fixed = round((measured.system + measured.tools) * measured.factor)
    window = budget.window
    if fixed < window.tokens:
        return budget
    if window.source == "refusal":  # the model that answers takes this much, whatever the request named
        said = ", as the provider said refusing a call of the thread as too long,"
        fix = "use a model with a larger window"
    else:
        said = ""
        fix = f"pass the model's real window (ContextPolicy(window=...) well above {fixed:,}, e.g. "
        fix += f"{max(4 * fixed, 8_000):,})"
    raise WindowTooSmallError(
        f"the window of {window.model} is {window.tokens:,} tokens{said} but the system prompt "
        f"({measured.system:,} tokens) and the tool schemas ({measured.tools:,} tokens) alone take {fixed:,}: no "
        f"message would fit. Fix: {fix}, or give the agent a shorter system prompt or fewer tools.",
        window=window.tokens,
        fixed=fixed,
    )


MEASURE_SLACK = 0.10
"""How far past a provider's declared window a call is measured before it goes through the forced round unsent: the
calibrated count is an estimate, a few percent off, and a provider that refuses says so (the forced round follows)."""


def refused_ahead(budget: CallBudget) -> bool:
    """Whether a call measured past the window goes through the forced round before it is sent: when the window is one
    the model declares. A local server (Ollama at its `num_ctx`) cuts a longer prompt from its start without a word,
    and the model answers without its system prompt: any call measured past it. A provider (its profile) refuses, after
    taking the whole request in: a call measured past it by more than `MEASURE_SLACK`. A window passed in the policy
    may be a budget below what the provider takes: a call measured past it is sent, forced only after a refusal."""
    if budget.force or not budget.overflow:
        return False
    source, window = budget.window.source, budget.window.tokens
    declared = source in ("profile", "refusal") and budget.used > window * (1 + MEASURE_SLACK)
    return source == "loaded_context" or declared


@dataclass(frozen=True, slots=True)
class Retry:
    """How a call the provider refused as too long is shaped next."""

    window: Window
    force: bool


def forced(budget: CallBudget) -> Retry:
    """The forced round, for the window `budget` was measured against."""
    return Retry(budget.window, True)


class Refusals:
    """The refusals of one model call: how the call is shaped after each, and the window one of them stated.

    After the first refusal the call is shaped for the window it states, when it states a smaller one (as usual for
    that window, so the call keeps what it holds, and every later call of the thread to the model is too); after a
    refusal of a call shaped as usual, it is forced; after a forced one, the error says what was tried."""

    def __init__(self, state: Mapping[str, Any] | None, meter: TokenMeter) -> None:
        self.state = state
        self.meter = meter
        self.count = 0
        self.stated: dict[str, Any] = {}
        """The state update that keeps a window a refusal stated, for the thread's later calls."""

    def retry(self, error: Exception, refused: ShapedCall, first: ShapedCall | None) -> Retry:
        """How the call is shaped next; raises `ContextStillTooLargeError` when it was forced already."""
        self.count += 1
        if first is None:
            window, self.stated = learned(refused.budget.window, error, self.state)
            if self.stated:
                return Retry(window, False)
        if not refused.budget.force:
            return forced(refused.budget)
        assert first is not None  # a forced call followed one shaped as usual
        raise still_too_large(
            first.budget, refused.budget, refused.applied, error, refused.messages, self.meter, self.count
        ) from error

    def keep(self, shaped: ShapedCall) -> None:
        """Keep the stated window in the state update of the call that is sent."""
        shaped.state.update(self.stated)


def still_too_large(
    first: CallBudget,
    retry: CallBudget,
    applied: Sequence[str],
    error: Exception,
    messages: Sequence[BaseMessage] = (),
    meter: TokenMeter | None = None,
    refusals: int = 2,
) -> ContextStillTooLargeError:
    """The error for a call refused again after the forced round; it names the largest message the call still held,
    and when that one alone takes half the window (forty screenshots in one user message), says to send it in parts:
    the forced round shows a user message in part by its text only (`core.task`, `core.pasted`), no layer takes an
    image out of view, and a smaller window would not help."""
    window = retry.window
    tried = ", ".join(applied) or "nothing left to clear or fold"
    fix = (
        "Fix: use a model with a larger window, or pass ContextPolicy(window=...) below what the provider accepts "
        "so ctxwarden keeps every call smaller."
    )
    largest = max(enumerate(messages), key=lambda m: meter.message_tokens(m[1]), default=None) if meter else None
    held = ""
    if largest is not None and meter is not None:
        index, message = largest
        tokens, media = meter.message_tokens(message), media_of(message)
        kind = {"human": "user message", "ai": "assistant message", "tool": "tool result"}.get(message.type, "message")
        which = f"{kind} {index + 1} of {len(messages)}, {tokens:,} tokens"
        held = f" The largest message it still held: {which}{f', {media_count(media)}' if media else ''}."
        if tokens * 2 > window.tokens:
            parts = "smaller parts (fewer images at a time)" if media else "smaller parts"
            images = ", and no layer takes an image out of view" if media else ""
            fix = (
                f"Fix: that message alone takes {tokens / window.tokens:.0%} of the window{images}: send it in "
                f"{parts}, or use a model with a larger window."
            )
    if refused_ahead(first):  # the first was never sent
        told = f"ctxwarden measured the call at about {first.used:,} tokens, past the window of {window.tokens:,}"
        told += f" {window.model} declares, cleared and folded as far as it could ({tried}) down to about "
        told += f"{retry.used:,} tokens, and {window.model} refused it as too long ({error})."
    else:
        times = {2: "twice", 3: "three times"}.get(refusals, f"{refusals} times")
        told = f"{window.model} refused the call as too long {times}: first at about {first.used:,} tokens (window "
        told += f"{first.window.tokens:,}"
        if first.window.tokens != window.tokens:  # the refusal stated a smaller one, and the call was shaped for it
            told += f", then shaped for the {window.tokens:,} the provider stated"
        told += f"); ctxwarden then cleared and folded as far as it could ({tried}) down to about {retry.used:,} "
        told += f"tokens and retried{' once' if refusals == 2 else ''}, and the provider refused again ({error})."
    return ContextStillTooLargeError(f"{told}{held} {fix}")


__all__ = ["MEASURE_SLACK", "Refusals", "Retry", "forced", "refused_ahead", "still_too_large", "with_room"]
