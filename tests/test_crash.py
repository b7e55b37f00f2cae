"""A process killed (SIGKILL) in the middle of a fold or an eviction: the thread resumes, nothing is doubled or lost.

Each test runs `crash_worker.py` in a subprocess that kills itself at one exact point —
while an evicted result is being written, while the summarizer writes a fold's summary
(the fold's history section already on disk), while it prepares the next fold's summary
in the background, while the history file or its staged copy is rewritten — then
reopens the same state dir here, resumes the interrupted step from the checkpoint,
finishes the conversation and takes one more turn. Afterwards:

- the checkpointed thread holds every message of the script exactly once, in order,
  and every tool result comes back byte for byte (an evicted one from its file);
- the evicted file exists once, with the exact original bytes (a half-written file stays beside
  it: it may be another branch's whole output, see `ctxwarden.clip.names.variant_path`);
- the history file holds each fold's section exactly once, whole, and nothing else;
- the trace verifies; with a checkpoint at every step it records each tool call once,
  one successful eviction per evicted call and one successful compaction per fold.

Two more tests lose checkpoints on top of the kill (LangGraph's background and at-exit
durability): steps run again, and still nothing is doubled or lost but trace lines.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from crash_worker import EVICTION_SCRIPT, HISTORY, LOG, QUESTION, SCENARIOS, THREAD, Scenario, build, fetch
from ctxwarden import Session, TraceStore
from ctxwarden.clip.names import call_key, result_path, variant_path
from ctxwarden.clip.recall import original_result
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import Folds
from ctxwarden.fold.transcript import history_section
from ctxwarden.replay import scripted_model

WORKER = Path(__file__).with_name("crash_worker.py")
FOLLOW_UP, LAST_REPLY = "And the legacy tests?", "left untouched"
TOOLS = {"fetch": fetch, "build": build}


@dataclass(frozen=True)
class Traced:
    """What the trace says happened on the thread."""

    folds: list[int]
    """Fold numbers of the successful compactions, in order."""
    tool_calls: list[str]
    """Call ids of the recorded tool calls, in order."""


def _kill_midway(state_dir: Path, name: str, durability: str = "sync", api: str = "invoke") -> None:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(state_dir), name, durability, api],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == -signal.SIGKILL, f"exit {done.returncode}: {done.stdout}{done.stderr[-3000:]}"


def _reopen(state_dir: Path, scenario: Scenario) -> Session:
    """The state dir opened again, with a model giving the replies the killed run had not given yet."""
    session = Session(
        scripted_model([], window=scenario.window),
        list(TOOLS.values()),
        state_dir=state_dir,
        thread_id=THREAD,
        policy=scenario.policy,
        summarizer=scenario.resumed_summarizer,
    )
    answered = sum(isinstance(m, AIMessage) for m in session.messages)
    session.switch_model(scripted_model([*scenario.script[answered:], AIMessage(LAST_REPLY)], window=scenario.window))
    return session


def _resume_and_go_on(session: Session) -> None:
    """Run the interrupted step again and finish the turn, then take one more turn."""
    session.resume()
    assert not session.interrupted
    assert session.invoke(FOLLOW_UP)["messages"][-1].content == LAST_REPLY
    assert session.resume()["messages"][-1].content == LAST_REPLY  # nothing left to run


async def _aresume_and_go_on(session: Session) -> None:
    await session.aresume()
    assert not session.interrupted
    assert (await session.ainvoke(FOLLOW_UP))["messages"][-1].content == LAST_REPLY
    assert (await session.aresume())["messages"][-1].content == LAST_REPLY


def _expected_thread(script: list[AIMessage]) -> list[tuple[Any, ...]]:
    """The thread an uninterrupted run leaves: each message once, tool results as the tools return them."""
    rows: list[tuple[Any, ...]] = [("human", QUESTION)]
    for reply in script:
        rows.append(("ai", reply.content, tuple(call["id"] for call in reply.tool_calls)))
        rows.extend(("tool", call["id"], TOOLS[call["name"]].invoke(call["args"])) for call in reply.tool_calls)
    return [*rows, ("human", FOLLOW_UP), ("ai", LAST_REPLY, ())]


def _expected_calls(script: list[AIMessage]) -> list[str]:
    return [call["id"] for reply in script for call in reply.tool_calls]


def _thread(messages: list[BaseMessage], backend: Any) -> list[tuple[Any, ...]]:
    """The checkpointed thread, each tool result as `recall` gives it back (from its file when evicted)."""
    rows: list[tuple[Any, ...]] = []
    for m in messages:
        if isinstance(m, HumanMessage):
            rows.append(("human", m.content))
        elif isinstance(m, AIMessage):
            rows.append(("ai", m.content, tuple(call["id"] for call in m.tool_calls)))
        elif isinstance(m, ToolMessage):
            rows.append(("tool", m.tool_call_id, original_result(messages, m.tool_call_id, backend)))
        else:
            rows.append((m.type, m.content))
    return rows


def _expected_history(messages: list[BaseMessage], folds: Folds) -> str:
    """One section per fold, each holding exactly the messages after the previous fold up to its own last one (after
    the user's first message, when the folds keep it in view)."""
    position = {m.id: i for i, m in enumerate(messages)}
    sections, start = [], 1 if folds.records and folds.records[0].pinned == messages[0].id else 0
    for record in folds.records:
        end = position[record.upto] + 1
        sections.append(history_section(record.number, THREAD, messages[start:end]))
        start = end
    return "".join(sections)


def _files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


FOLDS_CHECKPOINTED_AT_THE_KILL = {
    "evicted-file-truncated": 0,
    "evicted-file-half-written": 0,
    "summarizer-call": 0,
    "summarizer-preparing": 0,
    "first-history-write-half-done": 0,
    "second-history-write-truncated": 1,
    "second-staged-copy-half-written": 1,
}


EVICTED = result_path(THREAD, "", "big1", call_key("step-big1", 0))


def _check_the_kill_left_damage(state_dir: Path, name: str) -> None:
    """Right after the kill, the half-done write is on disk."""
    evicted = state_dir / EVICTED.lstrip("/")
    history = state_dir / HISTORY.lstrip("/")
    text = history.read_text(encoding="utf-8") if history.exists() else ""
    if name == "evicted-file-truncated":
        assert evicted.read_bytes() == b""
    elif name == "evicted-file-half-written":
        data = LOG.encode("utf-8")
        assert evicted.read_bytes() == data[: len(data) // 2]
    elif name == "summarizer-call":  # the summary comes before the history write: nothing written, nothing folded
        assert text == ""
    elif name == "summarizer-preparing":  # a preparation writes nothing: no history, no staged copy
        assert _files_under(state_dir / "conversation_history") == []
    elif name == "first-history-write-half-done":  # fold 1's heading is there, the end of its section is not
        assert text.count("\n## fold ") == text.count("\n## fold 1\n") == 1
        assert not text.endswith("\n")
    elif name == "second-history-write-truncated":  # fold 1's section is gone from the file
        assert text == ""
    elif name == "second-staged-copy-half-written":  # the file still holds fold 1 only; fold 2 is half staged
        assert text.count("\n## fold ") == text.count("\n## fold 1\n") == 1
        assert len(_files_under(history.parent)) == 2
    else:
        raise AssertionError(f"no damage described for {name}")


def _folds_checkpointed(session: Session) -> int:
    return len(Folds.from_state(session.agent.get_state(session.config).values).records)


def _check_nothing_doubled_or_lost(state_dir: Path, session: Session, scenario: Scenario) -> tuple[Folds, Traced]:
    """The thread, the evicted file, the history file and the trace, against the uninterrupted conversation."""
    values = session.agent.get_state(session.config).values
    messages = list(values["messages"])
    assert len({m.id for m in messages}) == len(messages), "a message is in the thread twice"
    assert _thread(messages, session.backend) == _expected_thread(scenario.script)

    evicting = scenario.script is EVICTION_SCRIPT
    evicted = [m for m in messages if isinstance(m, ToolMessage) and m.response_metadata.get(METADATA_KEY)]
    assert [m.tool_call_id for m in evicted] == (["big1"] if evicting else [])
    # half a file may be another branch's whole output (a log that grew since): it stays, and the output goes beside
    # it; an empty one is a write cut short (no evicted output is empty), and the run writes the file again
    beside = evicting and scenario.share == 0.5
    expected = variant_path(EVICTED, LOG.encode("utf-8")) if beside else EVICTED
    for message in evicted:
        path = message.response_metadata[METADATA_KEY]["path"]
        assert path == expected  # its name comes from the call (and the output's beside it), not chance
        assert path in str(message.content)  # the placeholder names the file
        assert (state_dir / path.lstrip("/")).read_bytes() == LOG.encode("utf-8")
    files = [expected, *([EVICTED] if beside else [])] if evicted else []
    assert _files_under(state_dir / "large_tool_results") == sorted(
        p.removeprefix("/large_tool_results/") for p in files
    )

    folds = Folds.from_state(values)
    assert [r.number for r in folds.records] == list(range(1, len(folds.records) + 1))
    if evicting:
        assert not folds.records
        assert _files_under(state_dir / "conversation_history") == []
    else:
        assert len(folds.records) >= 2
        path = folds.records[-1].path
        assert path is not None
        assert {r.path for r in folds.records} <= {HISTORY, path}  # a branch file goes on from the thread's file
        assert (state_dir / path.lstrip("/")).read_text(encoding="utf-8") == _expected_history(messages, folds)
        kept = {HISTORY, path}  # the thread's file, and the branch file a lost run's whole folds sent it to
        assert _files_under(state_dir / "conversation_history") == sorted(  # no staged copy left behind
            p.removeprefix("/conversation_history/") for p in kept
        )

    trace = TraceStore(state_dir / "trace.sqlite")
    try:
        assert trace.verify() == []
        evictions = [(e.payload["call_id"], e.payload["ok"]) for e in trace.events(thread_id=THREAD, kind="eviction")]
        assert evictions == [(m.tool_call_id, True) for m in evicted]
        compactions = [e.payload for e in trace.events(thread_id=THREAD, kind="context_compaction")]
        assert all(c["ok"] for c in compactions)
        calls = [e.payload["call_id"] for e in trace.events(thread_id=THREAD, kind="tool_call")]
        return folds, Traced([c["fold"] for c in compactions], calls)
    finally:
        trace.close()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_kill_midway_resumes_from_the_checkpoint_and_nothing_is_doubled_or_lost(state_dir: Path, name: str) -> None:
    """Checkpoints written at every step (durability="sync"): only the killed step runs again."""
    scenario = SCENARIOS[name]
    _kill_midway(state_dir, name)
    with _reopen(state_dir, scenario) as session:
        assert session.interrupted
        assert session.agent.get_state(session.config).next == (scenario.interrupted,)
        assert _folds_checkpointed(session) == FOLDS_CHECKPOINTED_AT_THE_KILL[name]
        _check_the_kill_left_damage(state_dir, name)
        _resume_and_go_on(session)
        folds, traced = _check_nothing_doubled_or_lost(state_dir, session, scenario)
    assert traced.folds == [r.number for r in folds.records]
    assert traced.tool_calls == _expected_calls(scenario.script)


@pytest.mark.parametrize("name", ["evicted-file-half-written", "second-history-write-truncated"])
async def test_the_async_api_is_killed_and_resumed_the_same_way(state_dir: Path, name: str) -> None:
    """`ainvoke` goes through the async twins of eviction and of the history write."""
    scenario = SCENARIOS[name]
    _kill_midway(state_dir, name, api="ainvoke")
    with _reopen(state_dir, scenario) as session:
        assert session.interrupted
        assert session.agent.get_state(session.config).next == (scenario.interrupted,)
        assert _folds_checkpointed(session) == FOLDS_CHECKPOINTED_AT_THE_KILL[name]
        _check_the_kill_left_damage(state_dir, name)
        await _aresume_and_go_on(session)
        folds, traced = _check_nothing_doubled_or_lost(state_dir, session, scenario)
    assert traced.folds == [r.number for r in folds.records]
    assert traced.tool_calls == _expected_calls(scenario.script)


@pytest.mark.parametrize("name", ["evicted-file-half-written", "second-history-write-truncated"])
def test_with_background_checkpoints_the_lost_steps_are_redone_without_doubling(state_dir: Path, name: str) -> None:
    """LangGraph's default durability ("async") writes checkpoints in the background, so a kill can also cost the
    last few steps, which then run again. The thread, the files and the history still hold everything exactly
    once; the append-only trace may record a redone step twice, but no fold or eviction the thread lacks."""
    scenario = SCENARIOS[name]
    _kill_midway(state_dir, name, durability="async")
    with _reopen(state_dir, scenario) as session:
        assert _folds_checkpointed(session) <= FOLDS_CHECKPOINTED_AT_THE_KILL[name]  # it may lag behind
        assert session.interrupted  # even when the lost checkpoint took the pending step's name with it
        _check_the_kill_left_damage(state_dir, name)
        _resume_and_go_on(session)
        folds, traced = _check_nothing_doubled_or_lost(state_dir, session, scenario)
    assert set(traced.folds) == {r.number for r in folds.records}
    assert set(traced.tool_calls) == set(_expected_calls(scenario.script))


def test_a_run_whose_checkpoints_were_all_lost_keeps_its_history_apart(state_dir: Path) -> None:
    """With durability="exit" a kill loses every checkpoint of the run, so the thread starts over. The history the
    lost run wrote holds messages the thread no longer has: the new run's folds neither skip it as theirs nor write
    over it (nothing tells it from another branch's, which a checkpoint still names); they go to a file of their own,
    and the lost run's folds are made whole again from the staged copy its kill left."""
    scenario = SCENARIOS["second-history-write-truncated"]
    _kill_midway(state_dir, "second-history-write-truncated", durability="exit")
    assert _files_under(state_dir / "conversation_history")  # what the lost run left
    with _reopen(state_dir, scenario) as session:
        assert session.messages == []
        session.invoke(QUESTION)
        assert session.invoke(FOLLOW_UP)["messages"][-1].content == LAST_REPLY
        folds, traced = _check_nothing_doubled_or_lost(state_dir, session, scenario)
    assert folds.records[0].path != HISTORY
    lost = (state_dir / HISTORY.lstrip("/")).read_text(encoding="utf-8")
    assert lost.count("\n## fold 1\n") == lost.count("\n## fold 2\n") == 1  # the lost run's two folds, whole
    assert lost != (state_dir / str(folds.records[0].path).lstrip("/")).read_text(encoding="utf-8")
    assert set(traced.folds) == {r.number for r in folds.records}
    assert set(traced.tool_calls) == set(_expected_calls(scenario.script))
