"""The per-call record stamped on each AI message, and how to read it back.

Every model call's budget is written into the reply's `response_metadata["ctxwarden"]`,
so the checkpointed thread itself says, call by call, which model and window were used
and what was sent. The report, the plot and the demo read it from there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

METADATA_KEY = "ctxwarden"
"""Key under which each AI message's `response_metadata` records its call's budget."""


def stamp_of(message: BaseMessage) -> dict[str, Any] | None:
    """The ctxwarden record of an AI message, or `None` when it has none."""
    if not isinstance(message, AIMessage):
        return None
    stamp = message.response_metadata.get(METADATA_KEY)
    return stamp if isinstance(stamp, dict) else None


RECENT = 500
"""How far back the per-call paths look for the previous call's stamp (it is almost always a few messages back)."""


def last_stamped(messages: Sequence[BaseMessage], *, limit: int | None = None) -> tuple[int, dict[str, Any]] | None:
    """Index and record of the last stamped AI message (among the last `limit` messages, when given)."""
    stop = -1 if limit is None else max(-1, len(messages) - 1 - limit)
    for index in range(len(messages) - 1, stop, -1):
        stamp = stamp_of(messages[index])
        if stamp is not None:
            return index, stamp
    return None


def stamps(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    """Records of every stamped AI message, in order."""
    return [s for s in (stamp_of(m) for m in messages) if s is not None]


STOCK_EVICTION_PREFIX = "Tool result too large, the result of this tool call"
"""How deepagents' own eviction (FilesystemMiddleware) begins the message it leaves behind."""


def is_evicted(message: BaseMessage) -> bool:
    """Whether a tool result was replaced at arrival by a pointer to a file (by ctxwarden or deepagents)."""
    if not isinstance(message, ToolMessage):
        return False
    record = message.response_metadata.get(METADATA_KEY)
    if isinstance(record, dict) and record.get("evicted"):
        return True
    return isinstance(message.content, str) and message.content.startswith(STOCK_EVICTION_PREFIX)


__all__ = ["METADATA_KEY", "RECENT", "STOCK_EVICTION_PREFIX", "is_evicted", "last_stamped", "stamp_of", "stamps"]
