"""One instance per tool, so a tool copied on every call keeps langchain's schema memo.

deepagents' filesystem middleware hands the model a fresh `model_copy` of `grep` on every
call (its description depends on the backend). langchain memoizes a tool's call schema
per instance, so each copy builds a pydantic model and its JSON schema again when the
model binds the tools: about 1.6 ms a call, more than the rest of ctxwarden's own work on
a call. (Stock deepagents pays it too, in its summarization's token count.)

A copy that matches a tool seen before in everything its schema is made of (class, name,
description, argument schema class, extras) and in what it runs (its functions) is
swapped for that first instance before the layers see the request: the model is sent the
same schema, and a tool call runs from the agent's tool node, found by name, not from the
request's tool objects.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool

from ctxwarden.core.caches import BoundedDict

MAX_KEPT = 256
"""Tools kept (one per schema); at this many the oldest quarter is dropped."""


class ToolInstances:
    """Swaps each copy of a tool for the first instance seen with the same schema and functions."""

    __slots__ = ("_first",)

    def __init__(self) -> None:
        self._first: BoundedDict[BaseTool] = BoundedDict(MAX_KEPT)

    def reused(self, tools: list[Any]) -> list[Any]:
        """`tools` with known copies swapped; the same list object when none was (so nothing is measured again)."""
        swapped: list[Any] | None = None
        for index, tool in enumerate(tools):
            key = _copy_key(tool)
            try:
                first = self._first.get(key) if key is not None else tool
            except TypeError:  # an unhashable function: never swapped
                continue
            if first is None:
                self._first.put(key, tool)
            elif first is not tool:
                swapped = swapped if swapped is not None else list(tools)
                swapped[index] = first
        return tools if swapped is None else swapped


def _copy_key(tool: Any) -> tuple[Any, ...] | None:
    """What makes two tool objects interchangeable for the model; `None` for a tool not worth swapping (a dict, or
    a tool whose schema is a dict, which langchain does not rebuild)."""
    if not isinstance(tool, BaseTool) or not isinstance(tool.args_schema, type):
        return None
    extras = getattr(tool, "extras", None)
    return (
        type(tool),
        tool.name,
        tool.description,
        tool.args_schema,
        json.dumps(extras, sort_keys=True, default=str) if extras else None,
        getattr(tool, "func", None),
        getattr(tool, "coroutine", None),
    )


__all__ = ["MAX_KEPT", "ToolInstances"]
