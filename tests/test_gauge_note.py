"""The gauge, told to the model: a note when the window fills past warn and critical, never costing the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.core import gauge_note
from ctxwarden.core.gauge_note import NOTE_SOURCE, RANK, GaugeNote
from ctxwarden.replay import scripted_model
from ctxwarden.report import context_report
from spies import note_calls
from views import Views

WINDOW = 6_000
SENTENCE = "Let me think about the parser carefully. "
THOUGHT = SENTENCE * 41  # ~400 tokens of assistant text per step, kept in view by clear_call_text=False below
# keeps each step's text in view, so the window fills, and folds only past critical: the gauge goes ok, warn, critical
POLICY = ContextPolicy(window=WINDOW, summarize_at=0.95, clear_call_text=False)


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 20


def _run(
    tmp_path: Path, policy: ContextPolicy, steps: int = 30, thought: str = THOUGHT
) -> tuple[Any, Views, dict[str, Any]]:
    replies = [
        AIMessage(thought, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(steps)
    ]
    views = Views()
    middleware = context_middleware(state_dir=tmp_path, summarizer="deterministic", policy=policy)
    model = scripted_model([*replies, AIMessage("done")], window=WINDOW)
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "gauge"}}
    agent.invoke({"messages": [HumanMessage("Fix the parser.")]}, config)
    return agent, views, config


def _notes(view: list[Any]) -> list[str]:
    return [m.content for m in view if m.additional_kwargs.get("lc_source") == NOTE_SOURCE]


def _bytes(view: list[Any]) -> list[str]:
    return [json.dumps(m.model_dump(), sort_keys=True, default=str) for m in view]


@pytest.mark.parametrize("sentences", range(36, 46))
def test_a_note_appears_exactly_where_the_gauge_rises(tmp_path: Path, sentences: int) -> None:
    """Wherever the calls fall, the stamp and the note agree: a note that itself tips the call past `critical_at` says
    `critical`, as the stamp does, and one that does not says what the stamp says."""
    agent, views, config = _run(tmp_path, POLICY, thought=SENTENCE * sentences)
    messages = agent.get_state(config).values["messages"]
    stamps = [m.response_metadata["ctxwarden"] for m in messages if isinstance(m, AIMessage)]
    levels = [s["gauge"] for s in stamps]
    # where a step takes the call from warn past `summarize_at`, its notes included, the fold comes first and the
    # gauge shows no critical: every scenario reaches warn, and most critical too
    assert "warn" in set(levels)
    assert "context_compaction" in {e for s in stamps for e in s["events"]}

    seen: set[str] = set()
    new_per_call = []
    for view in views.views:
        new = [n for n in _notes(view) if n not in seen]
        seen.update(new)
        new_per_call.append(new)
    rises = [i for i in range(len(levels)) if RANK[levels[i]] > RANK[levels[i - 1] if i else "ok"]]
    assert [i for i, new in enumerate(new_per_call) if new] == rises
    assert all(len(new_per_call[i]) == 1 for i in rises)
    assert len(rises) >= (3 if "critical" in levels else 2)  # up to warn, critical, and again after the fold
    for i in rises:
        (note,) = new_per_call[i]
        assert views.views[i][-1].content == note  # after the newest message
        assert f"gauge {levels[i]}" in note
        assert "recall(query=...)" in note
        assert "compact_conversation(focus=...)" in note
        assert stamps[i]["gauge_note"] == note  # recorded on the call that carried it
    warn_note = new_per_call[rises[0]][0]
    assert "folds older turns into a summary at 95%" in warn_note
    # the notes ride on the calls only: the checkpointed thread never holds one
    assert not any(m.additional_kwargs.get("lc_source") == NOTE_SOURCE for m in messages)


def test_the_note_never_changes_the_bytes_an_earlier_call_sent(tmp_path: Path) -> None:
    agent, views, config = _run(tmp_path, POLICY)
    messages = agent.get_state(config).values["messages"]
    stamps = [m.response_metadata["ctxwarden"] for m in messages if isinstance(m, AIMessage)]
    kept = 0
    for i in range(1, len(views.views)):
        if {"context_clear", "context_compaction"} & set(stamps[i]["events"]):
            continue  # clearing and folding move the cached prefix by design, in batches
        before, after = _bytes(views.views[i - 1]), _bytes(views.views[i])
        assert after[: len(before)] == before, f"call {i} does not begin with what call {i - 1} sent"
        kept += bool(_notes(views.views[i - 1]))
    assert kept >= 3  # calls that followed a call with a note still began with it, byte for byte
    # a fold takes the notes with the turns they followed; the gauge that fell does not keep stale ones
    fold = next(i for i, s in enumerate(stamps) if "context_compaction" in s["events"])
    assert not _notes(views.views[fold])


def test_no_notes_when_the_policy_says_so(tmp_path: Path) -> None:
    _agent, views, _config = _run(tmp_path, POLICY.replace(gauge_notes=False))
    assert not any(_notes(view) for view in views.views)


def test_the_context_report_shows_the_notes_the_agent_received(tmp_path: Path) -> None:
    agent, views, config = _run(tmp_path, POLICY)
    report = context_report(agent, config, trace=tmp_path / "trace.sqlite", policy=POLICY)
    received = {n for view in views.views for n in _notes(view)}
    assert {n["note"] for n in report.gauge_notes} == received
    assert [n["gauge"] for n in report.gauge_notes][:2] == ["warn", "critical"]
    text = report.to_text()
    assert "gauge notes the model received: call " in text
    assert report.to_dict()["gauge_notes"] == [dict(n) for n in report.gauge_notes]


@pytest.mark.parametrize("value", [1, "yes", None])
def test_a_bad_gauge_notes_value_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="gauge_notes"):
        ContextPolicy(gauge_notes=value)


def test_notes_are_placed_again_only_when_the_thread_did_not_just_grow(monkeypatch: pytest.MonkeyPatch) -> None:
    original = gauge_note.placed
    searched = note_calls(monkeypatch, gauge_note, "placed", lambda messages, _notes: len(messages))
    note = GaugeNote(POLICY)
    thread: list[Any] = [HumanMessage("Fix the parser.", id="h0")]
    thread += [AIMessage(f"step {i}", id=f"a{i}") for i in range(50)]
    notes = [{"after": "a10", "gauge": "warn", "text": "warn note"}, {"after": "a40", "gauge": "critical", "text": "c"}]
    for grown in range(5):  # one call per step: the thread only grew
        thread.append(AIMessage(f"more {grown}", id=f"m{grown}"))
        shown = note._place(thread, notes)
        assert shown == original(thread, notes)
    assert searched == [52]  # the anchors were searched for once
    folded = thread[20:]  # a fold took the first anchor: the placement is made anew, and says so
    assert note._place(folded, notes) is None
    assert searched == [52, len(folded)]
