"""The tools ctxwarden adds show the model argument names and types only; their signatures still check every call."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.clip.recall import make_recall_tool
from ctxwarden.fold.tool import make_compact_tool
from ctxwarden.replay import scripted_model


@tool
def build(target: str) -> str:
    """Build a target."""
    return f"built {target}: " + "ok " * 50


def test_the_model_is_shown_names_and_types_and_no_defaults_or_value_lists() -> None:
    recall = convert_to_openai_tool(make_recall_tool(None))["function"]
    assert recall["parameters"] == {
        "type": "object",
        "properties": {
            "call_id": {"type": "string"},
            "query": {"type": "string"},
            "regex": {"type": "boolean"},
            "page": {"type": "integer"},
            "part": {"type": "string"},
        },
    }
    assert "part='args'" in recall["description"]
    assert "page=2" in recall["description"]
    compact = convert_to_openai_tool(make_compact_tool())["function"]
    assert compact["parameters"] == {"type": "object", "properties": {"focus": {"type": "string"}}}


def test_a_value_the_signature_refuses_comes_back_to_the_model_naming_the_values_it_takes() -> None:
    calls = [
        AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "b1", "part": "whole"}, "id": "r1"}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "b1", "limit": 20}, "id": "r2"}]),
        AIMessage("done"),
    ]
    agent = create_agent(
        scripted_model(calls, window=16_000),
        [build],
        middleware=context_middleware(policy=ContextPolicy(window=16_000)),
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke({"messages": [HumanMessage("Build it.")]}, {"configurable": {"thread_id": "schema"}})
    answers = {m.tool_call_id: str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)}
    assert "'result', 'raw', 'args', 'text', 'task' or 'message'" in answers["r1"]  # refused, with what it takes
    assert answers["r2"].startswith("built app: ok")  # `limit`, not shown, is still taken: 20 characters a page
    assert "page=2 for the rest" in answers["r2"]
    assert out["messages"][-1].content == "done"  # the run went on
