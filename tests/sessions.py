"""A recorded session small enough to read at a glance: one tool call and its answer, as an OpenAI message list."""

from __future__ import annotations

from typing import Any

SMALL_SESSION: list[dict[str, Any]] = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
    {"role": "assistant", "content": "Two files."},
]
