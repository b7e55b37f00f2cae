"""A thread run again from an earlier checkpoint: each branch keeps its own outputs.

LangGraph resumes a thread from any checkpoint (`invoke(None, config)` with a
`checkpoint_id`; Studio's fork). Resumed between a model's call and its result, the same
call runs again and may return something else. An output evicted at arrival, or made
readable at arrival, has its file as its only copy, and the first branch's messages still
name that file: the second run must not write over it.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import (
    DETERMINISTIC,
    Session,
    ThreadIsolatedBackend,
    TraceStore,
    acontext_report,
    context_report,
    create_context_agent,
)
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import Folds
from ctxwarden.replay import scripted_model

RUNS = itertools.count()
SAME = False
"""Whether every run of the tool returns the same output."""


def _log(run: int) -> str:
    return "\n".join(f"run {run}, line {i}: compiled module_{i}" for i in range(800))


def _progress(run: int) -> str:
    frames = "".join(f"\rrun {run} downloading {i}%" for i in range(100))
    return frames + "\n" + "\n".join(f"\x1b[32mrun {run} ok\x1b[0m test_{i}" for i in range(40))


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return _log(0 if SAME else next(RUNS))


@tool
def fetch(target: str) -> str:
    """Download `target`, with a progress bar."""
    return _progress(0 if SAME else next(RUNS))


def _agent(state_dir: Path, name: str) -> Any:
    call = {"name": name, "args": {"target": "all"}, "id": "call_0"}
    replies = [AIMessage("", id="ai-1", tool_calls=[call]), AIMessage("done"), AIMessage("done again")]
    return create_context_agent(scripted_model(replies, window=32_000), [build, fetch], state_dir=state_dir)


def _branches(agent: Any, asynchronous: bool) -> tuple[list[Any], list[Any]]:
    """The thread's messages as its first run left them, and as a second run from before the call's result did."""
    config = {"configurable": {"thread_id": "travel"}}
    if asynchronous:
        first = asyncio.run(agent.ainvoke({"messages": [("user", "build it")]}, config))["messages"]
    else:
        first = agent.invoke({"messages": [("user", "build it")]}, config)["messages"]
    before = next(s for s in agent.get_state_history(config) if s.next == ("tools",))
    if asynchronous:
        second = asyncio.run(agent.ainvoke(None, before.config))["messages"]
    else:
        second = agent.invoke(None, before.config)["messages"]
    return first, second


def _result(messages: list[Any]) -> ToolMessage:
    (result,) = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_0"]
    return result


def _recalled(agent: Any, messages: list[Any], part: str) -> str:
    result = _result(messages)
    (reference,) = set(re.findall(r'recall\(call_id="([^"]+)"', str(result.content)))
    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    return str(recall.invoke({"call_id": reference, "part": part, "state": {"messages": messages}, "limit": 500_000}))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_evicted_output_run_again_from_an_earlier_checkpoint_keeps_both(state_dir: Path, asynchronous: bool) -> None:
    global RUNS
    RUNS = itertools.count()
    agent = _agent(state_dir, "build")
    first, second = _branches(agent, asynchronous)
    assert _result(first).response_metadata[METADATA_KEY]["evicted"]
    assert _result(second).response_metadata[METADATA_KEY]["evicted"]
    paths = [_result(m).response_metadata[METADATA_KEY]["path"] for m in (first, second)]
    assert paths[0] != paths[1]
    assert [(state_dir / p.lstrip("/")).read_text(encoding="utf-8") for p in paths] == [_log(0), _log(1)]
    assert _recalled(agent, first, "result") == _log(0)  # the first branch still gets its own output back
    assert _recalled(agent, second, "result") == _log(1)
    agent.checkpointer.conn.close()


def test_a_raw_output_run_again_from_an_earlier_checkpoint_keeps_both(state_dir: Path) -> None:
    """Each branch's `.raw` also stays its own to search: a frame only the raw bytes hold is found in branch 2's, and
    branch 1's, beside it in the thread's folder, is not searched from branch 2."""
    global RUNS
    RUNS = itertools.count()
    call = {"name": "fetch", "args": {"target": "all"}, "id": "call_0"}
    searches = [
        {"name": "recall", "args": {"query": f"run {run} downloading 42%"}, "id": f"search-{run}"} for run in (0, 1)
    ]
    replies = [AIMessage("", id="ai-1", tool_calls=[call]), AIMessage("done"), AIMessage("", tool_calls=searches)]
    agent = create_context_agent(
        scripted_model([*replies, AIMessage("searched")], window=32_000), [fetch], state_dir=state_dir
    )
    first, second = _branches(agent, asynchronous=False)
    found = {m.tool_call_id: str(m.content) for m in second if isinstance(m, ToolMessage) and m.name == "recall"}
    assert "run 1 downloading 42%" in found["search-1"]  # in branch 2's raw bytes only: the view shows 99%
    assert found["search-0"].startswith("[ctxwarden: no line of this conversation matches")
    records = [_result(m).response_metadata[METADATA_KEY] for m in (first, second)]
    assert all(r["rendered"] for r in records)
    assert records[0]["raw_path"] != records[1]["raw_path"]
    assert _recalled(agent, first, "raw") == _progress(0)
    assert _recalled(agent, second, "raw") == _progress(1)
    assert "run 0 downloading 99%" in str(_result(first).content)
    assert "run 1 downloading 99%" in str(_result(second).content)
    agent.checkpointer.conn.close()


def test_the_same_output_run_again_keeps_its_one_file(state_dir: Path) -> None:
    global SAME
    SAME = True
    try:
        agent = _agent(state_dir, "build")
        first, second = _branches(agent, asynchronous=False)
    finally:
        SAME = False
    paths = [_result(m).response_metadata[METADATA_KEY]["path"] for m in (first, second)]
    assert paths[0] == paths[1]  # a step run again after a crash writes no second file
    assert [p.name for p in (state_dir / "large_tool_results" / "travel").iterdir()] == [Path(paths[0]).name]
    assert _recalled(agent, first, "result") == _recalled(agent, second, "result") == _log(0)
    agent.checkpointer.conn.close()


STEPS = 40


@tool
def step(target: str) -> str:
    """Build `target` and return its log."""
    run = next(RUNS)
    return "\n".join(f"run {run} {target} line {i}: compiled module_{i}" for i in range(60))


def _steps(prefix: str) -> list[AIMessage]:
    return [
        AIMessage("", id=f"{prefix}-{k}", tool_calls=[{"name": "step", "args": {"target": f"t{k}"}, "id": f"c{k}"}])
        for k in range(STEPS)
    ]


def _history_files(state_dir: Path) -> dict[str, str]:
    root = state_dir / "conversation_history"
    return {f"/{p.relative_to(state_dir)}": p.read_text(encoding="utf-8") for p in root.rglob("*.md")}


def _runs(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\brun (\d+) ", text)}


def test_a_fold_run_again_from_an_earlier_checkpoint_keeps_each_branch_history_its_own(state_dir: Path) -> None:
    """Resumed after its first fold, branch 2 folds other turns as fold 2: branch 1's history file stays as it was,
    and branch 2's folds go to a branch file of the thread (fold 1 as the thread's file has it, then its own), which
    its summaries name and the thread can read. A fork of branch 2 carries that file."""
    global RUNS
    RUNS = itertools.count()
    search = {"name": "recall", "args": {"query": f"run {STEPS} t"}, "id": "search"}
    replies = [
        *_steps("one"),
        AIMessage("done"),
        *_steps("two"),
        AIMessage("done again"),
        AIMessage("", tool_calls=[search]),
        AIMessage("searched"),
    ]
    model = scripted_model(replies, window=6_000)
    agent = create_context_agent(model, [step], state_dir=state_dir, summarizer=DETERMINISTIC)
    config = {"configurable": {"thread_id": "travel"}}
    agent.invoke({"messages": [("user", "build every target")]}, config)
    head = agent.get_state(config)
    first = Folds.from_state(head.values).records
    assert len(first) >= 2
    assert {r.path for r in first} == {"/conversation_history/travel.md"}
    before = _history_files(state_dir)
    history = list(agent.get_state_history(config))[::-1]  # the oldest first
    rewind = next(s for s in history if s.next == ("tools",) and len(Folds.from_state(s.values).records) == 1)
    shared = _runs("\n".join(str(m.content) for m in rewind.values["messages"] if isinstance(m, ToolMessage)))
    agent.invoke(None, rewind.config)  # every output from here on is another run's: runs from STEPS on

    after = _history_files(state_dir)
    assert after["/conversation_history/travel.md"] == before["/conversation_history/travel.md"]
    second = Folds.from_state(agent.get_state(config).values).records
    assert second[0] == first[0]
    branch = second[-1].path
    assert branch is not None
    assert re.fullmatch(r"/conversation_history/travel/branch-[0-9a-f]{12}\.md", branch)
    assert {r.path for r in second[1:]} == {branch}
    text = after[branch]
    assert text.count("\n## fold ") == len(second)
    assert text.startswith(before["/conversation_history/travel.md"].partition("\n\n## fold 2\n")[0])  # fold 1
    assert _runs(text) - shared  # branch 2's own outputs
    assert all(n in shared or n >= STEPS for n in _runs(text))  # and none of branch 1's after the rewind
    isolated = ThreadIsolatedBackend(
        FilesystemBackend(root_dir=state_dir, virtual_mode=True), current_thread=lambda: "travel"
    )
    (read,) = isolated.download_files([branch])
    assert read.content is not None
    assert read.content.decode("utf-8") == text

    with Session(scripted_model([], window=6_000), [step], state_dir=state_dir, thread_id="travel") as session:
        folds = [u.index for u in session.units() if u.kind == "fold"]
        child = session.fork(folds[-1:], thread_id="child")  # the latest fold: branch 2's
        seeded = str(child.messages[1].content)
        child.close()
    copy = f"/conversation_history/child/fork-of-travel-{branch.rpartition('/')[2]}"
    assert copy in seeded
    assert branch not in seeded
    assert _history_files(state_dir)[copy].count("\n## fold ") == len(second)

    # branch 1 goes on: its search finds nothing of branch 2's, whose branch file is in the thread's folder
    went_on = agent.invoke({"messages": [("user", "find the first run of branch 2")]}, head.config)["messages"]
    found = next(m for m in went_on if isinstance(m, ToolMessage) and m.tool_call_id == "search")
    assert str(found.content).startswith("[ctxwarden: no line of this conversation matches")
    agent.checkpointer.conn.close()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_report_of_a_branch_counts_what_that_branch_did(state_dir: Path, asynchronous: bool) -> None:
    """The trace holds both branches' events under the one thread id; the /context report of the thread counts those
    of the branch it stands on, and a report of the first branch's checkpoint those of the first branch."""
    global RUNS
    RUNS = itertools.count()
    agent = _agent(state_dir, "build")
    first, second = _branches(agent, asynchronous)
    config = {"configurable": {"thread_id": "travel"}}
    trace = TraceStore(state_dir / "trace.sqlite")
    assert len(trace.events(thread_id="travel", kind="model_usage")) == 3  # each branch's calls
    assert len(trace.events(thread_id="travel", kind="eviction")) == 2  # each branch's run of the tool
    reports = {}
    for name, at in (("second", config), ("first", _newest_of(agent, config, first))):
        reports[name] = asyncio.run(acontext_report(agent, at)) if asynchronous else context_report(agent, at)
    for name, messages in (("first", first), ("second", second)):
        report = reports[name]
        calls = sum(isinstance(m, AIMessage) for m in messages)
        assert report.calls == calls == 2
        assert report.spend["main"]["calls"] == calls, name  # not 3: the other branch's call is not this one's
        assert report.lifecycle["eviction"]["count"] == 1, name
    agent.checkpointer.conn.close()


def _newest_of(agent: Any, config: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    """The config of the newest checkpoint whose messages are `messages` (a branch's end)."""
    ids = [m.id for m in messages]
    return next(s.config for s in agent.get_state_history(config) if [m.id for m in s.values["messages"]] == ids)
