"""The agent's own file tools never change ctxwarden's originals, on the backend deepagents gives by default.

On the README's route (`create_deep_agent(..., middleware=[context_middleware()])`, deepagents' `StateBackend`)
nothing guarded them: `edit_file` on an evicted output answered "Successfully replaced", after which `recall` said the
file had changed and gave nothing more of it; `edit_file` on the history file rewrote what the conversation said.
And a human-in-the-loop pause raised inside a tool call was traced as that call failing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ctxwarden import DETERMINISTIC, context_middleware, open_checkpointer
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold.state import Folds
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

LOG = "\n".join(f"compiled app/module_{i}.py checksum=ab{i:04d}" for i in range(5_000))


@tool
def build(target: str) -> str:
    """Build a target and return its log."""
    return LOG


def _deep_agent(replies: list[Any], saver: Any, trace: Path) -> Any:
    model = scripted_model(replies, window=200_000)
    middleware = [context_middleware(summarizer=DETERMINISTIC, trace=trace)]
    return create_deep_agent(model, [build], middleware=middleware, checkpointer=saver)


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[AIMessage]:
    return [AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"t{i}"}]) for i, (n, a) in enumerate(calls)]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_agent_cannot_change_an_evicted_output_or_the_history_on_the_default_backend(
    tmp_path: Path, run: str
) -> None:
    saver, config = InMemorySaver(), {"configurable": {"thread_id": f"readme-{run}"}}
    first = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}])
    fold = AIMessage("", tool_calls=[{"name": "compact_conversation", "args": {}, "id": "c1"}])
    agent = _deep_agent([first, "built", fold, "folded"], saver, tmp_path / "trace.sqlite")
    out = agent.invoke({"messages": [("user", "build the app")]}, config)
    path = next(m for m in out["messages"] if isinstance(m, ToolMessage)).response_metadata[METADATA_KEY]["path"]
    agent.invoke({"messages": [("user", "fold what we have")]}, config)
    history = Folds.from_state(agent.get_state(config).values).last
    assert history is not None
    assert history.path is not None
    before = agent.get_state(config).values["files"]

    probes = _calls(
        ("edit_file", {"file_path": path, "old_string": "module_1.py checksum=ab0001", "new_string": "TAMPERED"}),
        ("edit_file", {"file_path": history.path, "old_string": "build the app", "new_string": "drop the database"}),
        ("write_file", {"file_path": path, "content": "a forged original\n"}),
        ("delete", {"file_path": "/" + path.lstrip("/").replace("large_tool_results", "large_tool_results/./", 1)}),
        ("write_file", {"file_path": "/notes/plan.md", "content": "my own notes\n"}),
        ("recall", {"call_id": "b1", "limit": 50_000}),
    )
    agent = _deep_agent([*probes, "done"], saver, tmp_path / "trace.sqlite")
    request = {"messages": [("user", "tidy up")]}
    out = agent.invoke(request, config) if run == "sync" else asyncio.run(agent.ainvoke(request, config))

    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    for refused in ("t0", "t1", "t2", "t3"):
        assert answers[refused].status == "error"
        assert "is an original ctxwarden keeps" in str(answers[refused].content)  # before: "Successfully replaced"
    assert answers["t4"].status != "error"  # its own notes, anywhere else
    files = agent.get_state(config).values["files"]
    assert files[path] == before[path]  # the original and the history, byte for byte as written
    assert files[history.path] == before[history.path]
    assert str(answers["t5"].content).startswith(LOG[:8_000])  # recall still returns the original


def test_a_pause_for_a_human_inside_a_tool_call_is_not_traced_as_a_failure(tmp_path: Path) -> None:
    config: Any = {"configurable": {"thread_id": "pause"}}

    @tool
    def deploy(target: str) -> str:
        """Deploy a target."""
        return f"deployed {target}"

    def agent(replies: list[Any]) -> Any:
        approval = HumanInTheLoopMiddleware({"deploy": True}, interrupt_mode="per_call")
        middleware = [*context_middleware(trace=tmp_path / "trace.sqlite"), approval]
        model = scripted_model(replies, window=32_000)
        return create_agent(model, [deploy], middleware=middleware, checkpointer=open_checkpointer(tmp_path / "cp"))

    call = AIMessage("", tool_calls=[{"name": "deploy", "args": {"target": "prod"}, "id": "d1"}])
    out = agent([call]).invoke({"messages": [("user", "deploy")]}, config)
    (pause,) = out["__interrupt__"]
    agent(["Deployed."]).invoke(Command(resume={pause.id: {"type": "approve"}}), config)

    events = [e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind="tool_call")]
    assert [(e["name"], e["error"]) for e in events] == [("deploy", None)]  # before: a GraphInterrupt error first
