"""The task pinned ahead of every summary, and what it leaves the summary's facts.

A fold keeps the thread's first user message (the task) verbatim ahead of its summary: it
opens every call unchanged, so the provider's cache keeps it across folds, and neither the
summary nor the summarizer's prompt carries it again. Folded instead, it would come back
anyway, quoted whole in the facts (the latest user message always is), and be billed
uncached with every new summary — a task a third of the window long, as SWE-agent's
demonstration-in-the-task makes it, cost more than stock summarization that way.

A task pinned within the facts cap (`fold_facts_share`) leaves the facts their whole cap,
as it always did. A longer one is pinned too, up to `PINNED_TASK_MAX_SHARE` of the window,
and the facts get what is left of their cap after it: what a folded task quoted in the
facts left them, so the view keeps the same room and only moves the task to where the
cache keeps it. Past that share a fold could free too little behind it: the task is folded,
as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import message_text
from ctxwarden.fold.state import kept_ahead

CHARS_PER_TOKEN = 4
"""The facts cap is set in tokens and applied in characters."""

PINNED_TASK_MAX_SHARE = 0.5
"""The largest task pinned, as a share of the window (see the module)."""


def fold_start(view: Sequence[BaseMessage], window: int, policy: ContextPolicy, meter: TokenMeter) -> int:
    """Index of the first message of `view` a fold may take: after the summary, and after the pinned task."""
    ahead = kept_ahead(view)
    if ahead or not view:
        return ahead
    first = view[0]
    if not isinstance(first, HumanMessage) or not first.id:
        return 0
    return 1 if meter.message_tokens(first) <= int(window * PINNED_TASK_MAX_SHARE) else 0


def facts_cap_tokens(pinned: Sequence[BaseMessage], window: int, policy: ContextPolicy, meter: TokenMeter) -> int:
    """The facts section's cap in tokens beside `pinned`: the whole `fold_facts_share` beside a task within it, what
    is left of it beside a longer one (see the module)."""
    cap = int(window * policy.fold_facts_share)
    task = sum(meter.message_tokens(message) for message in pinned)
    return cap if task <= cap else max(0, cap - task)


def facts_cap_chars(pinned: Sequence[BaseMessage], window: int, policy: ContextPolicy, meter: TokenMeter) -> int:
    """`facts_cap_tokens` in characters, as the section is cut: beside a longer task, the cap less the task's text."""
    cap = int(window * policy.fold_facts_share * CHARS_PER_TOKEN)
    if facts_cap_tokens(pinned, window, policy, meter) == int(window * policy.fold_facts_share):
        return cap
    return max(0, cap - sum(len(message_text(message)) + 1 for message in pinned))


__all__ = ["PINNED_TASK_MAX_SHARE", "facts_cap_chars", "facts_cap_tokens", "fold_start"]
