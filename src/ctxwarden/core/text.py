"""The text a model reads in a message, and how long text is cut: in one place for every layer that looks at it.

Clip, fold, the report and the benchmark all read message text and cut long lines; they
share these helpers rather than borrow them from one another, so no layer imports a
sibling just to read a message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import BaseMessage

TOKEN_DEFINITION = r"[A-Za-z_][A-Za-z0-9_]{5,}|\b\d{3,}\b|[\w.-]+/[\w./-]+"
"""Distinctive tokens — identifiers of 6+ characters, numbers of 3+ digits, paths — the details an agent reuses."""

TOKEN = re.compile(r"(?=[\w./-]{3})(?:[A-Za-z_][A-Za-z0-9_]{5,}+|\b\d{3,}+\b|[\w.-]++/[\w./-]+)")
"""`TOKEN_DEFINITION`, the same matches found about 1.5 times faster: a position without three word, dot, slash or
dash characters ahead starts no token, and a run the pattern has read is never read again from its middle (the
possessive `+`, as no shorter run could be followed by what the longer one was not)."""

FAILURE = re.compile(
    r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$"
    r"|^E\s{2,}\S"
    r"|\b(?:error|fatal)(?:\[\w+\])?:"
    r"|^FAILED\b|^FAIL:|^ERROR:?\s"
    r"|: command not found$|: No such file or directory$",
)
"""A line that says something failed: an exception line, pytest's `E`, a compiler's `error:`, a failed test."""


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


def text_of(message: BaseMessage) -> str:
    """The text of a message's content (a tool result, a reply); text blocks joined, other blocks left out."""
    return content_text(message.content)


def value_text(value: Any) -> str:
    """An argument value as the model reads it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def encode(text: str) -> bytes:
    """The exact bytes of a text (lone surrogates from undecodable output survive the round trip)."""
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    """The text of bytes written by `encode`."""
    return data.decode("utf-8", "surrogatepass")


def error_line(text: str) -> str | None:
    """The line that best says why an output failed (the last failure line), stripped; `None` if it did not.

    One definition for every layer: a fold's facts quote this line for a failing command, and a
    cleared result's gist keeps it, so the line that says why a command failed stays in view.
    """
    found = None
    for line in text.splitlines():
        if FAILURE.search(line):
            found = line
    return found.strip() if found is not None and found.strip() else None


def one_line(text: str, limit: int) -> str:
    """`text` on one line (white space folded), cut to `limit` characters with a closing `…`."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut_middle(text: str, max_chars: int) -> str:
    """`text` cut in the middle to about `max_chars` characters, saying how many were cut."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n… [{len(text) - max_chars:,} chars cut] …\n{text[-half:]}"


__all__ = [
    "FAILURE",
    "TOKEN",
    "TOKEN_DEFINITION",
    "content_text",
    "cut_middle",
    "decode",
    "encode",
    "error_line",
    "message_text",
    "one_line",
    "text_of",
    "value_text",
]
