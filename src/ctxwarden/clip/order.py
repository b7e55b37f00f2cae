"""What clearing may take, and what first: the results it keeps, and the results a later call made stale.

Clearing ranks its candidates by what would be lost: a result the thread superseded (the
same call made again, a file read and then written) first. These rules read only the
thread's messages, so the clearing layer and the /context report's forecast share them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

T = TypeVar("T")
FILE_WRITERS = frozenset({"write_file", "edit_file"})
FILE_READERS = frozenset({"read_file"})


def newest(items: Sequence[T], count: int) -> Sequence[T]:
    """The last `count` items: all of them when there are fewer, none when `count` is 0."""
    return items[max(0, len(items) - count) :] if count > 0 else ()


def kept_results(messages: Sequence[BaseMessage], results: Sequence[ToolMessage], keep: int) -> set[str]:
    """Call ids of the results clearing never touches: the newest `keep`, and with any kept, every result of the
    newest step (a step of parallel calls is read as one)."""
    if keep <= 0:
        return set()
    ids = {m.tool_call_id for m in newest(results, keep)}
    latest = next((m for m in reversed(messages) if isinstance(m, AIMessage) and m.tool_calls), None)
    return ids | {str(c.get("id")) for c in latest.tool_calls} if latest is not None else ids


def superseded(messages: Sequence[BaseMessage]) -> set[str]:
    """Ids of calls whose result a later call made stale: the same call made again, or a file read then written."""
    later: set[str] = set()
    repeated: set[str] = set()
    for message in reversed(messages):
        for call in getattr(message, "tool_calls", None) or ():
            key = f"{call.get('name')}:{_json(call.get('args', {}))}"
            if key in later:
                repeated.add(str(call.get("id")))
            later.add(key)
    return repeated | _stale_reads(messages)


def _stale_reads(messages: Sequence[BaseMessage]) -> set[str]:
    """Ids of `read_file` calls whose file was written or edited afterwards."""
    last_write: dict[str, int] = {}
    reads: list[tuple[int, str, str]] = []
    for position, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            path = (call.get("args") or {}).get("file_path") or (call.get("args") or {}).get("path")
            if not isinstance(path, str):
                continue
            if call.get("name") in FILE_WRITERS:
                last_write[path] = position
            elif call.get("name") in FILE_READERS:
                reads.append((position, path, str(call.get("id"))))
    return {call_id for position, path, call_id in reads if last_write.get(path, -1) > position}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


__all__ = ["FILE_READERS", "FILE_WRITERS", "kept_results", "newest", "superseded"]
