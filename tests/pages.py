"""A tool that returns a page, and the assistant steps that call it: the smallest thread that fills a small window."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

THOUGHT = "Reasoning about the next step in some detail. " * 40
"""About 400 tokens of assistant text per step; where a test sets clear_call_text=False it stays in view."""


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


def steps(count: int, start: int = 0) -> list[AIMessage]:
    """`count` replies, each calling `fetch` for the next page from `start` (call ids `f<page>`)."""
    return [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}])
        for i in range(start, start + count)
    ]
