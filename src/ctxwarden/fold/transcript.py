"""Turning messages into text: the flat transcript a summarizer reads, and the history file's sections.

A separate summarizer model gets one user message holding a flat transcript, never the
replayed chat roles: given a conversation to continue, chat models continue it instead of
summarizing it (the agent's own model is asked in place instead, with an instruction that
says so: `ctxwarden.fold.in_place`). The history file gets the folded turns in full, under a heading
that names the fold, so a retry can tell it already wrote them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxwarden.core.text import cut_middle, text_of

ROLE = {HumanMessage: "USER", AIMessage: "ASSISTANT", ToolMessage: "TOOL RESULT", SystemMessage: "SYSTEM"}


def _text(message: BaseMessage, *, exact: bool) -> str:
    """The message's text; a block with none of its own (an image, a thinking block) as its JSON when `exact` (the
    history file: it dropped them, so an image a user sent, once folded, was in no file and no view), else named."""
    content = message.content
    if isinstance(content, str):
        return content
    if isinstance(message, ToolMessage) and all(not isinstance(b, dict) or "text" in b for b in content):
        return text_of(message)
    return "\n".join(_block(b, exact) for b in content)


def _block(block: Any, exact: bool) -> str:
    if not isinstance(block, dict):
        return str(block)
    if "text" in block or block.get("type") == "tool_use":  # a call is written from its tool call
        return str(block.get("text", ""))
    if exact:
        return json.dumps(block, ensure_ascii=False, default=str)
    return f"[{block.get('type', 'content')} block]"


def render(message: BaseMessage, *, max_chars: int | None = None) -> str:
    """One message as a transcript entry (`max_chars` cuts long content in the middle, and names each block that
    holds no text rather than quoting it)."""
    role = next((name for cls, name in ROLE.items() if isinstance(message, cls)), message.type.upper())
    exact = max_chars is None
    text = _text(message, exact=exact) if max_chars is None else cut_middle(_text(message, exact=exact), max_chars)
    parts = []
    if isinstance(message, ToolMessage):
        role = f"{role} ({message.name or 'tool'}, call {message.tool_call_id})"
    if text:  # whitespace too: the history file keeps the text exactly
        parts.append(text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            args = json.dumps(call.get("args", {}), ensure_ascii=False)
            if max_chars is not None and len(args) > max_chars:
                args = args[: max_chars // 2] + f" … [{len(args) - max_chars // 2:,} chars cut]"
            parts.append(f"-> calls {call.get('name')} (call {call.get('id')}): {args}")
    return f"[{role}]\n" + "\n".join(parts)


def transcript(messages: Sequence[BaseMessage], *, max_chars_per_message: int | None = None) -> str:
    """The messages as one flat text."""
    return "\n\n".join(render(m, max_chars=max_chars_per_message) for m in messages)


def history_section(number: int, thread: str | None, messages: Sequence[BaseMessage]) -> str:
    """The markdown section a fold appends to the thread's history file (full text, nothing cut).

    Its heading states how many characters of body follow it, so the sections are found by walking from one to the
    next (`ctxwarden.fold.history`): a line of content that reads `## fold 2` is never taken for a heading.
    """
    first, last = _one_line(messages[0].id), _one_line(messages[-1].id)
    body = f"\n{transcript(messages)}\n"
    about = f"thread {_one_line(thread)}; messages {first} .. {last}"
    return f"{SECTION_START}{number}\n\n<!-- {len(body)} characters; {about} -->\n{body}"


SECTION_START = "\n\n## fold "
"""How every section begins: the heading, then a comment line stating the length of the body after it."""


def _one_line(value: object) -> str:
    """A heading's value on one line that cannot close its comment (ids and thread ids are the caller's)."""
    return str(value).replace("\r", "\\r").replace("\n", "\\n").replace("-->", "--\\>")


def section_marker(number: int) -> str:
    """The heading of fold `number`, as files written before the headings stated their length began it."""
    return f"\n## fold {number}\n"


__all__ = ["SECTION_START", "history_section", "render", "section_marker", "transcript"]
