"""Where a fold cuts: turn-aligned, keeping the newest turns verbatim.

A cut falls just before a user message or an assistant message, never before a tool
result, so a tool call and its result always stay on the same side. The kept tail is
at most `keep_tokens`, but never less than the last step (the newest assistant
message with its results, or the newest user message).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.fold.state import is_summary


def choose_cut(view: Sequence[BaseMessage], meter: TokenMeter, keep_tokens: int, start: int) -> int | None:
    """Index where the kept tail starts, or `None` when there is nothing before the last step to fold.

    `start` is the first message a fold may take (`Folder.start`: after the summary and the pinned message)."""
    boundaries = [
        i
        for i in range(start + 1, len(view))
        if isinstance(view[i], AIMessage | HumanMessage) and not is_summary(view[i])
    ]
    if not boundaries:
        return None
    tail = 0
    cut = boundaries[-1]
    position = len(view)
    for boundary in reversed(boundaries):
        tail += sum(meter.message_tokens(m) for m in view[boundary:position])
        position = boundary
        if tail > keep_tokens and boundary != boundaries[-1]:
            break
        cut = boundary
    return cut if cut > start else None


__all__ = ["choose_cut"]
