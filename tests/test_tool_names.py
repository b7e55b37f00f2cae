"""A tool of the agent's own may not take the name of one of ctxwarden's tools (`recall`, `compact_conversation`).

langchain finds tools by name, the last of a name winning: a user's `recall` replaced
ctxwarden's without a word, so every placeholder's way back called a tool that takes no
`call_id`, and that tool's own outputs were never evicted. Such a tool is refused, naming
it and the fix: at build time, or at the first model call of an agent built another way,
before the model or any tool runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import BuildArgumentError, context_middleware, create_context_agent
from ctxwarden.replay import scripted_model

RAN: list[str] = []


@tool
def recall(topic: str) -> str:
    """Recall the team wiki's notes about `topic`."""
    RAN.append(topic)
    return "\n".join(f"wiki line {i}: notes about {topic}" for i in range(3_000))


def compact_conversation(note: str) -> str:
    """Compact my own notes."""
    return note


SCHEMA = {"type": "function", "function": {"name": "recall", "description": "A provider's tool.", "parameters": {}}}
FIX = r'Fix: give yours another name, e.g. @tool\("wiki_{name}"\)'


def _calling_recall() -> Any:
    return scripted_model(
        [AIMessage("", tool_calls=[{"name": "recall", "args": {"topic": "x"}, "id": "c1"}]), AIMessage("ok")],
        window=32_000,
    )


@pytest.mark.parametrize(
    ("given", "name"), [(recall, "recall"), (compact_conversation, "compact_conversation"), (SCHEMA, "recall")]
)
def test_create_context_agent_refuses_a_tool_named_like_ctxwardens(tmp_path: Path, given: Any, name: str) -> None:
    with pytest.raises(
        BuildArgumentError, match=rf"create_context_agent hold a tool named '{name}'.*{FIX.format(name=name)}"
    ):
        create_context_agent(_calling_recall(), [given], state_dir=tmp_path)


def test_a_subagent_with_such_a_tool_is_refused_by_its_name(tmp_path: Path) -> None:
    spec = {"name": "librarian", "description": "Reads the wiki.", "system_prompt": "Read.", "tools": [recall]}
    with pytest.raises(BuildArgumentError, match=r"the tools of subagent 'librarian' hold a tool named 'recall'"):
        create_context_agent(_calling_recall(), [], state_dir=tmp_path, subagents=[spec])


@pytest.mark.parametrize("build", [create_deep_agent, create_agent], ids=["create_deep_agent", "create_agent"])
def test_an_agent_built_around_the_middleware_fails_at_its_first_call_before_any_tool_runs(
    tmp_path: Path, build: Any
) -> None:
    RAN.clear()
    model = _calling_recall()
    agent = build(model, [recall], middleware=context_middleware(state_dir=tmp_path), checkpointer=InMemorySaver())
    with pytest.raises(BuildArgumentError, match=r"the agent's tools hold a tool named 'recall'"):
        agent.invoke({"messages": [("user", "look it up")]}, {"configurable": {"thread_id": "t"}})
    assert RAN == []  # the wiki tool never ran, and the model was never asked
    assert next(model.messages).tool_calls[0]["id"] == "c1"  # its first reply still unsent


def test_ctxwardens_own_tools_and_other_names_pass(tmp_path: Path) -> None:
    @tool("wiki_recall")
    def renamed(topic: str) -> str:
        """Recall the team wiki's notes about `topic`."""
        return "\n".join(f"wiki line {i}: notes about {topic}" for i in range(3_000))

    call = {"name": "wiki_recall", "args": {"topic": "x"}, "id": "c1"}
    model = scripted_model([AIMessage("", tool_calls=[call]), AIMessage("ok")], window=32_000)
    agent = create_context_agent(model, [renamed], state_dir=tmp_path)
    out = agent.invoke({"messages": [("user", "look it up")]}, {"configurable": {"thread_id": "t"}})
    (result,) = [m for m in out["messages"] if m.type == "tool"]
    assert "[ctxwarden: evicted wiki_recall output" in str(result.content)  # evicted like any other tool's
    agent.checkpointer.conn.close()
