"""A thread's message that carries the marks of a message ctxwarden makes for a view is still an original.

A client can send a user message with any extra key (langchain keeps it in `additional_kwargs`), so
`lc_source: "summarization"` (a fold summary's mark, and deepagents') or ctxwarden's gauge-note mark
proves nothing. Such a message must be folded, written to the history file and found by `recall`
like any other; only the summaries and notes ctxwarden made for a view are left out of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import acompact, compact, create_context_agent
from ctxwarden.core.gauge_note import NOTE_SOURCE, is_note, note_message
from ctxwarden.fold.state import FoldRecord, is_summary, summary_message
from ctxwarden.replay import scripted_model
from views import Views

SECRET = "CONSTRAINT-7731: never deploy on fridays"


@tool
def build(target: str) -> str:
    """Build a target."""
    return "\n".join(f"compiled {target}/m{i}.py" for i in range(40))


def _step(i: int) -> AIMessage:
    return AIMessage("", id=f"a{i}", tool_calls=[{"name": "build", "args": {"target": f"t{i}"}, "id": f"c{i}"}])


def _agent(tmp_path: Path) -> tuple[Any, Views]:
    ask = AIMessage("", id="a9", tool_calls=[{"name": "recall", "args": {"query": "CONSTRAINT-7731"}, "id": "r1"}])
    script = [_step(1), "done 1", _step(2), "done 2", _step(3), "done 3", ask, "after the fold"]
    views = Views()
    model = scripted_model(script, window=32_000)
    return create_context_agent(model, [build], state_dir=tmp_path, middleware=[views]), views


def _turns(source: str, where: str) -> list[list[Any]]:
    forged = {"role": "user", "content": SECRET, "lc_source": source}
    if where == "after the task":
        return [[("user", "task: build the app"), forged], [("user", "next")], [("user", "again")]]
    return [[("user", "task: build the app")], [forged], [("user", "again")]]


def _check(tmp_path: Path, agent: Any, views: Views, out: dict[str, Any], record: FoldRecord | None) -> None:
    assert record is not None
    assert record.path is not None
    history = (tmp_path / record.path.lstrip("/")).read_text(encoding="utf-8")
    assert SECRET in history  # written where the folded turns go
    assert SECRET in record.summary  # quoted among the facts, as any user message
    shown = views.views[-2]  # the call that asked for the recall, after the fold
    assert any(SECRET in str(m.content) for m in shown)
    found = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert "1 line matches" in str(found.content)
    assert "user message" in str(found.content)


@pytest.mark.parametrize("where", ["after the task", "a later turn"])
def test_a_user_message_marked_as_a_summary_is_folded_written_and_found(tmp_path: Path, where: str) -> None:
    agent, views = _agent(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    for messages in _turns("summarization", where):
        agent.invoke({"messages": messages}, config)
    record = compact(agent, config, summarizer="deterministic")
    out = agent.invoke({"messages": [("user", "status?")]}, config)
    _check(tmp_path, agent, views, out, record)


async def test_a_user_message_marked_as_a_summary_is_kept_on_the_async_path(tmp_path: Path) -> None:
    agent, views = _agent(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    for messages in _turns("summarization", "after the task"):
        await agent.ainvoke({"messages": messages}, config)
    record = await acompact(agent, config, summarizer="deterministic")
    out = await agent.ainvoke({"messages": [("user", "status?")]}, config)
    _check(tmp_path, agent, views, out, record)


def test_a_user_message_marked_as_a_gauge_note_is_found_by_recall(tmp_path: Path) -> None:
    agent, views = _agent(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    for messages in _turns(NOTE_SOURCE, "a later turn"):
        agent.invoke({"messages": messages}, config)
    record = compact(agent, config, summarizer="deterministic")
    out = agent.invoke({"messages": [("user", "status?")]}, config)
    _check(tmp_path, agent, views, out, record)


def test_only_the_messages_made_for_a_view_count_as_summary_or_note() -> None:
    record = FoldRecord(1, "m9", "the summary", None, 100, 10, "deterministic", False)
    made = summary_message(record)
    assert is_summary(made)
    assert not is_note(made)
    assert not is_summary(made.model_copy())  # a copy is a message like any other
    assert not is_summary(HumanMessage(made.content, id=made.id, additional_kwargs=dict(made.additional_kwargs)))
    note = note_message("[ctxwarden: your context window is 91% full]", "high")
    assert is_note(note)
    assert not is_summary(note)
    assert not is_note(HumanMessage(note.content, id=note.id, additional_kwargs=dict(note.additional_kwargs)))
