"""A tool a middleware copies on every call reaches the model as one instance, with the same schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxwarden import create_context_agent
from ctxwarden.replay import scripted_model
from ctxwarden.stack.tool_copies import ToolInstances

CONFIG = {"configurable": {"thread_id": "t"}}


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


class Tools(AgentMiddleware):
    """Keeps the tool objects of every model call it is handed (placed after ctxwarden's)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[Any]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.calls.append(list(request.tools))
        return handler(request)


def test_deepagents_copied_grep_is_handed_over_as_its_first_copy(state_dir: Path) -> None:
    seen = Tools()
    replies = [AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": "q"}, "id": "c1"}]), AIMessage("done")]
    model = scripted_model(replies, window=8_000)
    agent = create_context_agent(model, [lookup], state_dir=state_dir, middleware=[seen])
    agent.invoke({"messages": [HumanMessage("find it")]}, CONFIG)
    agent.checkpointer.conn.close()

    first, second = ({getattr(t, "name", None): t for t in call} for call in seen.calls)
    assert first.keys() == second.keys()
    assert all(second[name] is first[name] for name in first)  # grep too, which deepagents copies on every call


def test_only_a_copy_with_the_same_schema_and_function_is_swapped() -> None:
    instances = ToolInstances()
    tools = [lookup.model_copy(update={"description": "Look it up."}), lookup, {"name": "server_tool"}]
    assert instances.reused(tools) is tools  # nothing seen before: the list itself

    again = [lookup.model_copy(update={"description": "Look it up."}), lookup, {"name": "server_tool"}]
    reused = instances.reused(again)
    assert reused[0] is tools[0]  # the copy, swapped for the first copy seen
    assert reused[1] is lookup
    assert reused[2] is again[2]  # a dict tool is left as it is
    assert [convert_to_openai_tool(t) for t in reused] == [convert_to_openai_tool(t) for t in again]

    other = lookup.model_copy(update={"description": "Another description."})
    assert instances.reused([other])[0] is other
