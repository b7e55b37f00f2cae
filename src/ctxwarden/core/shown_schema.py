"""Tools whose schema, as the model is shown it, is written out rather than derived from the function.

Every model call carries the schema of every tool, so a tool ctxwarden adds costs its schema's tokens on every call,
even in a session that never needs it. The schema langchain derives from a function states each argument's default
(`"default": ""`), every value a `Literal` allows and every argument the function takes; the descriptions and the
placeholders already say what the model needs of those. `ShownSchemaTool` shows the model `shown` instead: argument
names and types only. The function's own signature still validates every call, so a bad value fails with its name,
and an argument left out of `shown` (a page size, say) is still accepted from code.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool


def bare_schema(**types: str) -> dict[str, Any]:
    """A JSON schema of optional arguments, each given by name and JSON type only."""
    return {"type": "object", "properties": {name: {"type": kind} for name, kind in types.items()}}


class ShownSchemaTool(StructuredTool):
    """A structured tool whose schema shown to the model is `shown` (see the module)."""

    shown: dict[str, Any]
    """The JSON schema the model is shown; the tool's description is added to it."""

    @property
    def tool_call_schema(self) -> dict[str, Any]:
        return {**self.shown, "description": self.description}


__all__ = ["ShownSchemaTool", "bare_schema"]
