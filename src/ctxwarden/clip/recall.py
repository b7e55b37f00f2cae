"""`recall`: the way back for anything clearing or eviction took out of the model's view.

Every placeholder names a call id; `recall(call_id)` returns that call's original
result — read from the checkpointed thread, or, for a result evicted at arrival,
from its file, byte for byte — and `recall(call_id, part="args")` returns the call's
original arguments. Output is paged (`offset`, `limit`) so a recall never floods the
window it is meant to spare.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import InjectedState

from ctxwarden.clip.evict import RECALL_TOOL, decode, text_of
from ctxwarden.core.stamp import METADATA_KEY

DEFAULT_LIMIT = 8_000
MAX_LIMIT = 50_000

DESCRIPTION = (
    "Get back the original result (or, with part='args', the original arguments) of an earlier tool call whose "
    "content was cleared or clipped from the conversation to save context. Pass the call id the placeholder names. "
    "Long text is paged: pass offset (in characters) to continue where the previous page ended."
)


def original_result(messages: list[BaseMessage], call_id: str, backend: Any) -> str | None:
    """The exact original result of `call_id`, from its evicted file when it was evicted, else the thread."""
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            record = message.response_metadata.get(METADATA_KEY) or {}
            if record.get("evicted") and backend is not None:
                (response,) = backend.download_files([record["path"]])
                if response.error is None and response.content is not None:
                    return decode(response.content)
            return text_of(message)
    return None


def original_args(messages: list[BaseMessage], call_id: str) -> str | None:
    """The original arguments of `call_id`, as JSON."""
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == call_id:
                    return json.dumps(call.get("args", {}), ensure_ascii=False, indent=1)
    return None


def page(text: str, offset: int, limit: int) -> str:
    """`text[offset:offset + limit]`, with a note saying where the rest is."""
    offset = max(0, offset)
    limit = max(1, min(limit, MAX_LIMIT))
    chunk = text[offset : offset + limit]
    end = offset + len(chunk)
    if offset == 0 and end >= len(text):
        return chunk
    more = f"; call again with offset={end} for the rest" if end < len(text) else ""
    return f"{chunk}\n[ctxwarden: characters {offset:,}-{end:,} of {len(text):,}{more}]"


def make_recall_tool(backend: Any) -> BaseTool:
    """The `recall` tool, reading evicted files from `backend`."""

    def recall(
        call_id: str,
        state: Annotated[dict[str, Any], InjectedState],
        part: Literal["result", "args"] = "result",
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> str:
        messages = list(state.get("messages", []))
        text = original_args(messages, call_id) if part == "args" else original_result(messages, call_id, backend)
        if text is None:
            known = "a tool call" if part == "args" else "a tool result"
            return f"[ctxwarden: this thread has no {known} with call id {call_id!r}; check the id in the placeholder.]"
        return page(text, offset, limit)

    return StructuredTool.from_function(func=recall, name=RECALL_TOOL, description=DESCRIPTION)


__all__ = ["DEFAULT_LIMIT", "make_recall_tool", "original_args", "original_result", "page"]
