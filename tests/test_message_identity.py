"""Messages without ids, or with another message's id, are never merged: every layer finds each by its own identity.

The README's input form, `{"messages": [("user", q)]}`, reaches a deep agent's thread with
`id=None` (deepagents' messages channel appends what it is given). Four such turns, then a
fold: the history file and the facts must hold all four questions, not the last one four times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxwarden import acompact, compact, create_context_agent
from ctxwarden.core.identity import DERIVED_PREFIX, Identities, identified
from ctxwarden.fold.facts import FACTS_HEADING
from ctxwarden.replay import scripted_model

QUESTIONS = [f"question number {n}: look at module_{n}" for n in ("one", "two", "three", "four", "five", "six")]


def _agent(tmp_path: Path) -> Any:
    # answers long enough that folding them frees room (a fold that would free nothing is not made)
    model = scripted_model([f"answer {i}: " + "checked the module. " * 60 for i in range(8)], window=200_000)
    return create_context_agent(model, state_dir=tmp_path)


def _history(tmp_path: Path) -> str:
    (path,) = (tmp_path / "conversation_history").rglob("*.md")
    return path.read_text(encoding="utf-8")


def _check(tmp_path: Path, record: Any) -> None:
    assert record is not None
    history = _history(tmp_path)
    assert QUESTIONS[0] not in history  # the task stays pinned above the summary, in view
    for question in QUESTIONS[1:]:
        assert history.count(question) == 1, question
    facts = record.summary.split(FACTS_HEADING, 1)[1]
    for question in QUESTIONS[1:]:
        assert question in facts, question


def test_tuple_input_over_many_turns_keeps_every_user_message_in_the_history_and_the_facts(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "tuples"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [("user", question)]}, config)
    assert all(m.id is None for m in agent.get_state(config).values["messages"] if m.type == "human")
    _check(tmp_path, compact(agent, config))


async def test_tuple_input_keeps_every_user_message_on_the_async_path(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "tuples-async"}}
    for question in QUESTIONS:
        await agent.ainvoke({"messages": [("user", question)]}, config)
    assert all(m.id is None for m in (await agent.aget_state(config)).values["messages"] if m.type == "human")
    _check(tmp_path, await acompact(agent, config))


def test_the_same_question_twice_is_two_messages(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "repeat"}}
    for question in ("the task", "continue", "continue", "now stop", "last"):
        agent.invoke({"messages": [("user", question)]}, config)
    assert compact(agent, config) is not None
    history = _history(tmp_path)
    assert history.count("continue") == 2
    assert history.count("now stop") == 1


def test_identified_gives_each_message_its_own_id_and_leaves_the_thread_as_it_was() -> None:
    given = [
        HumanMessage("same"),
        AIMessage("a", id="x"),
        HumanMessage("same"),
        AIMessage("b", id="x"),  # another message's id
        HumanMessage("other", id=f"{DERIVED_PREFIX}human-taken"),
    ]
    out = identified(given)
    ids = [m.id for m in out]
    assert len(set(ids)) == len(ids)
    assert ids[1] == "x"
    assert [m.content for m in out] == [m.content for m in given]
    assert [m.id for m in given] == [None, "x", None, "x", f"{DERIVED_PREFIX}human-taken"]  # copies, never edits
    assert identified(given) == out  # the same ids on every read: a resumed process agrees


def test_a_list_with_unique_ids_is_returned_as_it_is() -> None:
    given = [HumanMessage("q", id="1"), AIMessage("a", id="2")]
    assert identified(given) is given
    assert Identities()(given) is given


@pytest.mark.parametrize("grow", [1, 3])
def test_identities_agree_with_a_full_pass_as_the_thread_grows(grow: int) -> None:
    identities = Identities()
    thread: list[Any] = []
    for step in range(12):
        replies = [AIMessage(f"a{step}", id=f"a{step % 5}") for _ in range(grow)]
        thread = [*thread, HumanMessage(f"q{step % 4}"), *replies]
        assert [m.id for m in identities(thread)] == [m.id for m in identified(thread)]


def test_folds_made_on_the_way_keep_every_tuple_question(tmp_path: Path) -> None:
    """The layers' own folds (not a compaction asked for) over a thread of id-less user messages."""
    questions = [f"turn {i}: inspect file_{i:03d}.py please" for i in range(24)]
    answers = [f"answer {i}: " + "the module looks fine. " * 25 for i in range(24)]
    model = scripted_model(answers, window=6_000)
    agent = create_context_agent(model, state_dir=tmp_path)
    config = {"configurable": {"thread_id": "auto-folds"}}
    for question in questions:
        agent.invoke({"messages": [("user", question)]}, config)
    history = _history(tmp_path)
    folded = [q for q in questions[1:] if q in history]
    assert len(folded) >= 5, history[:500]
    for question in folded:
        assert history.count(question) == 1, question
    assert folded == questions[1 : 1 + len(folded)]  # every question up to the last folded one, none merged
