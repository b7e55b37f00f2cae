"""ctxwarden's own tool names, which no other tool of the agent may take.

langchain finds a tool by its name, the last tool of a name winning, and an agent's own
tools come after its middleware's. A tool of the user's named `recall` replaced
ctxwarden's without a word: every placeholder's way back (`recall(call_id=...)`) then
called a tool that takes no `call_id`, and that tool's outputs, taken for ctxwarden's own
bounded recall, were never evicted (a 29,000-token output entered whole at a 32k window).
So such a tool is refused: at build time by `create_context_agent`, and at the first
model call of an agent built another way, before any tool runs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ctxwarden.clip.evict import RECALL_TOOL
from ctxwarden.errors import BuildArgumentError
from ctxwarden.fold.tool import COMPACT_TOOL

RESERVED = frozenset({RECALL_TOOL, COMPACT_TOOL})
"""The names of ctxwarden's own tools."""


def tool_name(tool: Any) -> str | None:
    """The name the model calls `tool` by: a tool's, a provider schema's, or a plain function's."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = tool.get("name") or (function.get("name") if isinstance(function, Mapping) else None)
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
    return name if isinstance(name, str) else None


def refuse_reserved(tools: Iterable[Any], where: str, ours: Collection[Any] = ()) -> None:
    """Raise `BuildArgumentError` for the first tool in `tools` that takes a name of ctxwarden's own tools and is
    not one of `ours` (by the function it runs: a copy of ours is ours)."""
    own = {id(getattr(tool, "func", tool)) for tool in ours}
    for tool in tools:
        name = tool_name(tool)
        if name in RESERVED and id(getattr(tool, "func", tool)) not in own:
            raise BuildArgumentError(
                f"{where} hold a tool named {name!r}, the name of ctxwarden's own {name} tool, which it would replace: "
                f"the model could no longer use ctxwarden's. Fix: give yours another name, e.g. "
                f'@tool("wiki_{name}") on its function, or its_tool.name = "wiki_{name}"; if another middleware '
                "brings it, leave that middleware out."
            )


def refuse_reserved_in_subagents(subagents: Iterable[Any]) -> None:
    """`refuse_reserved` for the tools of every declarative subagent spec."""
    for spec in subagents:
        if isinstance(spec, Mapping) and spec.get("tools"):
            refuse_reserved(spec["tools"], f"the tools of subagent {spec.get('name')!r}")


__all__ = ["RESERVED", "refuse_reserved", "refuse_reserved_in_subagents", "tool_name"]
