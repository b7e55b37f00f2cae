"""`compact()`, `acompact()` and the /context report use the backend and trace the agent was built with.

Whatever the checkpointer — here one in memory and an async SQLite one, neither of which
says where the state dir is — `compact()` writes the history to the agent's backend and
traces the fold in the agent's trace, and the report reads that trace. A report that
cannot find a trace says so instead of counting zeros, and right after `compact()` it
measures the view the fold left instead of rescaling the last call's figures.
"""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ctxwarden import DETERMINISTIC, acompact, compact, context_report, create_context_agent
from ctxwarden.cli import main
from ctxwarden.replay import scripted_model
from ctxwarden.report import acontext_report
from ctxwarden.trace import TraceStore

THOUGHT = "Reasoning about the next step in some detail. " * 10
LOG = "\n".join(f"build line {i}: compiled module_{i}" for i in range(1_500))


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 300


@tool
def build(target: str) -> str:
    """Run the build."""
    return LOG


def _replies() -> list[AIMessage]:
    calls = [("build", {"target": "all"}, "b1"), *(("fetch", {"page": i}, f"f{i}") for i in range(6))]
    steps = [AIMessage(THOUGHT, tool_calls=[{"name": n, "args": a, "id": i}]) for n, a, i in calls]
    return [*steps, AIMessage("done"), AIMessage("still here")]


def _agent(state_dir: Path, checkpointer: object) -> object:
    return create_context_agent(
        scripted_model(_replies(), window=32_000), [build, fetch], state_dir=state_dir, checkpointer=checkpointer
    )


def test_compact_and_the_report_find_the_agents_backend_and_trace_with_any_checkpointer(state_dir: Path) -> None:
    agent = _agent(state_dir, InMemorySaver())
    config = {"configurable": {"thread_id": "mem"}}
    agent.invoke({"messages": [("user", "build and read")]}, config)

    before = context_report(agent, config)
    assert before.trace_found
    assert before.lifecycle["eviction"]["count"] == 1
    record = compact(agent, config)
    assert record is not None
    assert record.path == "/conversation_history/mem.md"
    assert (state_dir / "conversation_history" / "mem.md").is_file()  # on the agent's own backend
    (fold,) = TraceStore(state_dir / "trace.sqlite").events(thread_id="mem", kind="context_compaction")
    assert fold.payload["ok"]
    assert fold.payload["forced"]

    after = context_report(agent, config)
    assert after.lifecycle["context_compaction"]["count"] == 1
    assert "· 1 fold" in after.to_text()
    # measured on the view the fold left, not the last call's total rescaled
    assert after.basis == "current view"
    assert after.used < before.used
    assert abs(after.categories["tool schemas"] - before.categories["tool schemas"]) <= 0.02 * before.used
    assert after.categories["summary"] > 0
    assert "measured on the view compact() left" in after.to_text()

    agent.invoke({"messages": [("user", "and now?")]}, config)  # the next call's figures are ground truth again
    assert context_report(agent, config).basis == "last call"


def test_a_report_without_a_trace_says_so(state_dir: Path) -> None:
    agent = _agent(state_dir, InMemorySaver())
    config = {"configurable": {"thread_id": "mem"}}
    agent.invoke({"messages": [("user", "build and read")]}, config)
    report = context_report(agent.checkpointer, config)  # a checkpointer in memory: no trace beside it
    assert not report.trace_found
    text = report.to_text()
    assert "lifecycle: unknown" in text
    assert "spend: unknown" in text
    assert "0 evicted" not in text
    assert report.to_dict()["lifecycle"] is None


async def test_acompact_with_an_async_checkpointer_inside_the_event_loop(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    async with aiosqlite.connect(state_dir / "async-checkpoints.sqlite") as conn:
        saver = AsyncSqliteSaver(conn)
        agent = _agent(state_dir, saver)
        config = {"configurable": {"thread_id": "async"}}
        await agent.ainvoke({"messages": [("user", "build and read")]}, config)
        record = await acompact(agent, config, summarizer=DETERMINISTIC)
        assert record is not None
        state = await agent.aget_state(config)
        assert state.values["ctxwarden_fold"]["records"][0]["number"] == 1
        report = await acontext_report(agent, config)
        assert report.lifecycle["context_compaction"]["count"] == 1
        assert report.basis == "current view"
    assert (state_dir / "conversation_history" / "async.md").is_file()


def test_the_cli_report_says_when_the_state_dir_has_no_trace(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    agent = create_context_agent(scripted_model(_replies(), window=32_000), [build, fetch], state_dir=state_dir)
    agent.invoke({"messages": [("user", "build and read")]}, {"configurable": {"thread_id": "cli"}})
    agent.checkpointer.conn.close()
    assert main(["context", "--state-dir", str(state_dir), "--thread", "cli"]) == 0
    assert "1 evicted" in capsys.readouterr().out
    for leftover in state_dir.glob("trace.sqlite*"):
        leftover.unlink()
    assert main(["context", "--state-dir", str(state_dir), "--thread", "cli"]) == 0
    out = capsys.readouterr().out
    assert "lifecycle: unknown" in out
    assert "0 evicted" not in out
