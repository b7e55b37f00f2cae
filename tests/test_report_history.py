"""A thread's report counts what happened to its current history only, whatever else its thread id once named.

Thread ids are the caller's: the same script run twice with `InMemorySaver` makes two threads of one id, recorded in
one `trace.sqlite`. The second is new and its report starts from zero; a checkpointed thread resumed by another agent
(another process) keeps its whole record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deepagents import create_deep_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import acontext_report, context_middleware, context_report, create_context_agent
from ctxwarden.replay import scripted_model

CONFIG = {"configurable": {"thread_id": "reused"}}


def build(target: str) -> str:
    """Build a target and return its log."""
    return "\n".join(f"compiled {target}/module_{i}.py" for i in range(5_000))


def _run_in_memory(state_dir: Path) -> object:
    call = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}])
    model = scripted_model([call, "The build passed."], window=200_000)
    agent = create_deep_agent(
        model, [build], middleware=[context_middleware(state_dir=state_dir)], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [("user", "build the app")]}, CONFIG)
    return agent


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_new_in_memory_thread_with_a_reused_id_starts_from_zero(tmp_path: Path, mode: str) -> None:
    for _ in range(3):  # the same script, run three times: three threads named "reused", one trace
        agent = _run_in_memory(tmp_path)
    report = context_report(agent, CONFIG) if mode == "sync" else await acontext_report(agent, CONFIG)
    assert report.lifecycle["eviction"]["count"] == 1
    assert report.spend["main"]["calls"] == 2


def test_another_thread_of_the_same_id_in_the_state_dir_counts_only_its_own(tmp_path: Path) -> None:
    """The README's order: an in-memory thread records to ./.ctxwarden, then the embedded default reuses its id."""
    _run_in_memory(tmp_path)
    agent = create_context_agent(scripted_model(["Hi."], window=32_000), state_dir=tmp_path)
    agent.invoke({"messages": [("user", "hello")]}, CONFIG)
    agent.checkpointer.conn.close()
    report = context_report(tmp_path, CONFIG)
    assert report.lifecycle == {}
    assert report.spend["main"]["calls"] == 1


def test_a_resumed_checkpointed_thread_keeps_its_whole_record(tmp_path: Path) -> None:
    for reply in ("First.", "Second.", "Third."):  # three agents (as three processes would) on one thread
        agent = create_context_agent(scripted_model([reply], window=32_000), state_dir=tmp_path)
        agent.invoke({"messages": [("user", "go on")]}, CONFIG)
        agent.checkpointer.conn.close()
    assert context_report(tmp_path, CONFIG).spend["main"]["calls"] == 3
