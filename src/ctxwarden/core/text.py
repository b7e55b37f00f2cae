"""The text a model reads in a message, in one place for every layer that looks at it."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import BaseMessage

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}|\b\d{3,}\b|[\w.-]+/[\w./-]+")
"""Distinctive tokens — identifiers of 6+ characters, numbers of 3+ digits, paths — the details an agent reuses."""


def content_text(content: str | list[Any]) -> str:
    """Text of a message's content; text blocks are joined with newlines, other blocks left out."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def message_text(message: BaseMessage) -> str:
    """What a model reads in a message: its content, then its tool calls' argument values."""
    parts = [content_text(message.content)]
    for call in getattr(message, "tool_calls", None) or ():
        parts.extend(value_text(value) for value in (call.get("args") or {}).values())
    return "\n".join(parts)


def value_text(value: Any) -> str:
    """An argument value as the model reads it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


__all__ = ["TOKEN", "content_text", "message_text", "value_text"]
