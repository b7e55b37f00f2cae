"""A thread wiped by its client (`RemoveMessage(id=REMOVE_ALL_MESSAGES)`, a chat's "clear") and used again.

The fold records outlive the messages they summarize. The next fold extended the last one: its facts quoted the
wiped conversation's lines (a key the user had just cleared away) in every summary after it. Now a fold whose
predecessor's messages are gone from the thread starts afresh: numbered after it, in the same history file, which
keeps what was folded before the wipe.

A folded message the client edits (a redaction with `update_state`) is shown as edited from the next call: a fold's
summary stands for the thread only while its messages say what they said when folded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ctxwarden import DETERMINISTIC, ContextPolicy, create_context_agent
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import Folds
from ctxwarden.replay import scripted_model
from views import Views

SECRET = "api_key=SECRET-TOKEN-abc123XYZ"
THOUGHT = "Let me read the next page carefully before going on. " * 30


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    lines = [f"page {page} line {i}: data /src/mod_{page}_{i}.py" for i in range(30)]
    if page == 0:
        lines.insert(3, f"ERROR: auth failed with {SECRET} at /etc/creds.cfg")
    return "\n".join(lines)


def _pages(first: int, count: int) -> list[AIMessage]:
    return [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": p}, "id": f"p{p}"}])
        for p in range(first, first + count)
    ]


def test_a_fold_after_the_thread_was_wiped_quotes_nothing_of_the_wiped_conversation(tmp_path: Path) -> None:
    replies = [*_pages(0, 24), AIMessage("paused"), *_pages(100, 24), AIMessage("done")]
    model = scripted_model(replies, window=6_000)
    agent = create_context_agent(model, [fetch], state_dir=tmp_path, summarizer=DETERMINISTIC)
    config = {"configurable": {"thread_id": "wiped"}, "recursion_limit": 200}
    agent.invoke({"messages": [HumanMessage("Fix the parser.")]}, config)
    before = Folds.from_state(agent.get_state(config).values).records
    assert before
    assert SECRET in before[-1].summary  # the failing line, quoted in the facts

    agent.update_state(config, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})
    agent.invoke({"messages": [HumanMessage("New task: write docs for the lexer.")]}, config)
    records = Folds.from_state(agent.get_state(config).values).records
    agent.checkpointer.conn.close()

    after = records[len(before) :]
    assert after  # the new conversation folded too
    assert [r.number for r in records] == list(range(1, len(records) + 1))
    assert all(SECRET not in r.summary for r in after)  # before: quoted in every summary after the wipe
    history = (tmp_path / after[-1].path.lstrip("/")).read_text(encoding="utf-8")  # type: ignore[union-attr]
    assert "## fold 1" in history  # what was folded before the wipe stays in the history file
    assert SECRET in history


def test_a_folded_message_redacted_by_the_client_is_shown_redacted_from_the_next_call(tmp_path: Path) -> None:
    """A client takes a secret out of folded messages with `update_state` (same ids). The summary quoted them as they
    were, so every later call showed it: now a fold stands for the thread only while its messages say what they said
    when folded; an earlier one that still does, or none, is shown, and the next fold summarizes the redacted thread."""
    password = "PW-LATER-555"
    replies = [*_pages(0, 4), AIMessage("paused"), *_pages(4, 8), AIMessage("paused again")]
    replies += [*_pages(30, 8), AIMessage("done")]
    views = Views()
    model = scripted_model(replies, window=6_000)
    policy = ContextPolicy(clear_call_text=False)  # the thoughts stay: folds do the work
    agent = create_context_agent(
        model, [fetch], state_dir=tmp_path, summarizer=DETERMINISTIC, policy=policy, middleware=[views]
    )
    config = {"configurable": {"thread_id": "redacted"}, "recursion_limit": 200}
    agent.invoke({"messages": [HumanMessage("Fix the parser.")]}, config)
    agent.invoke({"messages": [HumanMessage(f"Use the staging password {password} when you test.")]}, config)
    values = agent.get_state(config).values
    assert any(SECRET in r.summary or password in r.summary for r in Folds.from_state(values).records)

    def redacted(text: str) -> str:
        return text.replace(SECRET, "[gone]").replace(password, "[gone]")

    edits = [
        m.model_copy(update={"content": redacted(str(m.content))})
        for m in values["messages"]
        if SECRET in str(m.content) or password in str(m.content)
    ]
    assert len(edits) == 2
    agent.update_state(config, {"messages": edits})
    seen = len(views.views)
    agent.invoke({"messages": [HumanMessage("Go on.")]}, config)
    records = Folds.from_state(agent.get_state(config).values).records
    agent.checkpointer.conn.close()

    later = views.views[seen:]
    assert later
    for view in later:  # before: the summary quoted both in every call
        assert not [m for m in view if SECRET in str(m.content) or password in str(m.content)]
    assert records[-1].number > 2  # the redacted thread folded again, numbered after the folds before
    assert SECRET not in records[-1].summary
    assert password not in records[-1].summary


@tool
def dump(kind: str) -> str:
    """Dump the store's records, or its log as a terminal shows it."""
    if kind == "log":
        return "".join(f"\rstep {i}/50 token: {SECRET}" for i in range(50)) + "\n" + "log line\n" * 400
    return "\n".join([f"token: {SECRET}", *(f"row {i}" for i in range(2_000))])


@pytest.mark.parametrize("kind", ["records", "log"])
def test_an_evicted_or_rendered_result_redacted_by_the_client_is_recalled_as_redacted(
    tmp_path: Path, kind: str
) -> None:
    """The client redacts a result that ctxwarden evicted to a file (or rendered, keeping the raw) with
    `update_state`, copying it with its metadata. Before, `recall` of the call, `part="raw"` and the search still
    returned the file's text with the secret in it."""
    calls = [{"name": "dump", "args": {"kind": kind}, "id": "d1"}]
    asks = [
        {"name": "recall", "args": {"call_id": "d1"}, "id": "r1"},
        {"name": "recall", "args": {"call_id": "d1", "part": "raw"}, "id": "r2"},
        {"name": "recall", "args": {"query": SECRET}, "id": "r3"},
    ]
    replies = [AIMessage("", tool_calls=calls), AIMessage("ok"), AIMessage("", tool_calls=asks), AIMessage("done")]
    agent = create_context_agent(scripted_model(replies, window=16_000), [dump], state_dir=tmp_path)
    config = {"configurable": {"thread_id": "redacted-output"}}
    agent.invoke({"messages": [HumanMessage("dump it")]}, config)
    (result,) = [m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage)]
    record = result.response_metadata[METADATA_KEY]
    assert record.get("evicted") or record.get("rendered")
    agent.update_state(config, {"messages": [result.model_copy(update={"content": "[redacted by the client]"})]})
    out = agent.invoke({"messages": [HumanMessage("what was the token?")]}, config)
    agent.checkpointer.conn.close()
    answers = {m.tool_call_id: str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers["r1"] == answers["r2"] == "[redacted by the client]"
    assert answers["r3"].startswith("[ctxwarden: no line of this conversation matches")  # the query, quoted alone
