"""What the result of one call may keep in view: its share of the room the reply that made it leaves.

A reply's calls return together, and their results are the newest messages, which clearing never takes: together
they must fit the window. Each result was weighed alone, so twenty parallel calls of 3,000 tokens each (every one
under the eviction threshold), or eight parallel `recall` pages of 2,000, made a call no clearing or fold could bring
under the window, and the run ended with `ContextStillTooLargeError`. The results of one reply now share
`STEP_WINDOW_SHARE` of the window: eviction weighs each against its share (`clip.evict`), and each of several
`recall`s shows as much of its page as fits its share, saying where the rest is.

The share is of the room the system prompt and the tool schemas leave, not of the whole window: beside a deep agent's
tools and a 2,700-token system prompt, an 8k window leaves 2,600 tokens, and a lone `recall` page of 8,000 characters
(2,300 tokens of logs) with the summary put the call past the window whatever a fold did. A lone `recall` answers in
pages that fit its share (`page_room`), so the page after it is still the rest of the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.core.counters import sampled_count
from ctxwarden.core.stamp import RECENT, last_stamped

STEP_WINDOW_SHARE = 0.5
"""The share of the window the results of one reply's calls keep in view together, text and images alike. One
result's text keeps its 10% (`evict_window_share`) up to five calls a reply; an image or a PDF, seen whole or not at
all, may take a single call's whole share (one the model asked for must fit)."""

DENSITY_SAMPLE_CHARS = 65_536
"""A text up to this long is counted whole to size its pages; a longer one from samples (`sampled_count`)."""

MIN_PAGE_CHARS = 400
"""A page never shrinks below this: a handful of lines, whatever the share."""


def share(window: int, calls: int, fixed: int = 0) -> int:
    """Tokens one of `calls` results of a reply may keep in view on `window`, of which the system prompt and the tool
    schemas take `fixed`."""
    return max(1, int(max(0, window - fixed) * STEP_WINDOW_SHARE) // max(1, calls))


def fixed_tokens(messages: Sequence[BaseMessage]) -> int:
    """The system prompt and tool schemas of the thread's latest call, as its stamp counted them (0 without one)."""
    stamped = last_stamped(messages, limit=RECENT)
    if stamped is None:
        return 0
    parts = (stamped[1].get("system_tokens"), stamped[1].get("tool_schema_tokens"))
    return sum(int(p) for p in parts if isinstance(p, int | float) and not isinstance(p, bool) and p > 0)


def calls_of_reply(messages: Sequence[BaseMessage], call_id: Any) -> int:
    """How many calls the reply that made `call_id` made (1 when it is not found)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(call.get("id") == call_id for call in message.tool_calls):
            return len(message.tool_calls)
    return 1


def answer_share(messages: Sequence[BaseMessage]) -> int | None:
    """Tokens a tool's answer may take beside the other calls of the newest reply (whose calls are running), on the
    window it was made for; `None` for a reply's only call (its pages fit alone, `page_room`), or when no call has
    said its window."""
    stamped = last_stamped(messages, limit=RECENT)
    reply = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if stamped is None or reply is None or len(reply.tool_calls) < 2:
        return None
    return share(int(stamped[1]["window"]), len(reply.tool_calls), fixed_tokens(messages))


def page_room(messages: Sequence[BaseMessage]) -> int | None:
    """Tokens a page of a tool's answer may take when it is its reply's only call: the whole share of the newest
    step; `None` when no call has said its window."""
    stamped = last_stamped(messages, limit=RECENT)
    return None if stamped is None else share(int(stamped[1]["window"]), 1, fixed_tokens(messages))


def page_chars(text: str, limit: int, tokens: int | None, counter: Callable[[str], int]) -> int:
    """Characters of a page of `text` that fit `tokens` tokens (`limit` at most), from the density of the whole text."""
    if tokens is None or not text:
        return limit
    counted, _exact = sampled_count(counter, text, exact_up_to=DENSITY_SAMPLE_CHARS)
    chars_per_token = len(text) / max(1, counted)
    return max(MIN_PAGE_CHARS, min(limit, int(tokens * chars_per_token * 0.9)))  # a tenth for the page's note


__all__ = ["STEP_WINDOW_SHARE", "answer_share", "calls_of_reply", "fixed_tokens", "page_chars", "page_room", "share"]
