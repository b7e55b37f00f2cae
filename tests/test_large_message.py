"""A later user message larger than the window: a user pastes a whole log into a thread under way.

No fold helps (a fold keeps the newest turn), so the provider refused the call, the forced
retry sent the paste whole again, and the run ended with `ContextStillTooLargeError`. Now the
forced round shows the message in part, under a note naming `recall(call_id=<its id>,
part="message")`, which pages through it; the thread keeps it exact. The call is measured past
the window the model declares, so the forced round runs before it is sent: the provider never
sees the paste whole (`test_refused_ahead.py`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import ContextStillTooLargeError, TraceStore, create_context_agent
from ctxwarden.clip.boundary import Boundary
from ctxwarden.core.identity import identified
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.pasted import MESSAGE_NOTE, message_cuts, message_text_by_id
from refusing import Refusing

LOG = "\n".join(
    f"2026-11-27 12:{i // 60:02d}:{i % 60:02d} worker_{i % 7} processed batch_{i} in {i % 97} ms" for i in range(9_000)
)
"""A pasted log of about 220,000 tokens: over twenty-five times an 8k window."""

NOTE_START = MESSAGE_NOTE.split("{", 1)[0]
NAMED = re.compile(r'recall\(call_id=("(?:[^"\\]|\\.)*"), part="message"\)')


def shown_part(messages: list[BaseMessage]) -> HumanMessage | None:
    """The user message a call showed in part, if any."""
    return next(
        (m for m in messages if isinstance(m, HumanMessage) and str(m.content).startswith(NOTE_START)),
        None,
    )


def reading(model: Refusing, pages: int, done: str = "read it") -> Iterator[AIMessage]:
    """A model that does what the note says: it recalls the message by the id the note names, page by page."""
    named = None
    for number in range(1, pages + 1):
        notes = (NAMED.search(str(m.content)) for m in model._seen[-1])  # the message shown in part, or a summary
        found = next((note for note in notes if note is not None), None)
        named = json.loads(found.group(1)) if found is not None else named
        assert named is not None, "no call showed a message in part"
        call = {"name": "recall", "args": {"call_id": named, "part": "message", "page": number}}
        yield AIMessage("", tool_calls=[{**call, "id": f"r{number}"}])
    yield AIMessage(done)


def agent_for(tmp_path: Path, replies: Iterator[AIMessage] | None = None) -> tuple[Any, Refusing]:
    model = Refusing(messages=iter([]))
    model.messages = replies if replies is not None else reading(model, 2)
    model.profile = {"max_input_tokens": 8_000}
    return create_context_agent(model, state_dir=tmp_path), model


def opened(agent: Any, model: Refusing, config: dict[str, Any]) -> None:
    """A thread under way: one small exchange."""
    model.messages = itertools.chain([AIMessage("hello")], model.messages)
    agent.invoke({"messages": [("user", "hi")]}, config)


SENT = {
    "tuple": lambda text: ("user", text),  # as the README sends it: no id of its own
    "blocks": lambda text: HumanMessage([{"type": "text", "text": text}]),  # as a chat front end sends it
    "own id": lambda text: HumanMessage(text, id='paste "ß"\n../1'),  # a client that names its messages oddly
}


@pytest.mark.parametrize(
    ("run", "shape"), [("sync", "tuple"), ("async", "tuple"), ("sync", "blocks"), ("async", "own id")]
)
def test_a_later_message_larger_than_the_window_is_shown_in_part_and_read_by_pages(
    tmp_path: Path, run: str, shape: str
) -> None:
    agent, model = agent_for(tmp_path)
    config = {"configurable": {"thread_id": "pasted"}}
    opened(agent, model, config)
    given = {"messages": [SENT[shape](LOG)]}
    out = agent.invoke(given, config) if run == "sync" else asyncio.run(agent.ainvoke(given, config))

    assert out["messages"][-1].content == "read it"  # before: ContextStillTooLargeError
    assert all(size <= model.limit for size in model._sizes)  # no call held the whole paste: none was refused
    # the call after it showed it in part, its first and last lines under the note that says how to get the rest
    # (measured past the window the model declares, it went through the forced round before it was sent)
    shown = shown_part(model._seen[1])
    assert shown is not None
    text = str(shown.content)
    lines = LOG.splitlines()
    assert lines[0] in text
    assert lines[-1] in text
    assert all(line == "…" or line in LOG for line in text.splitlines()[1:])  # whole lines of the paste, never edited
    assert any(m.content == "hi" for m in model._seen[1])  # the other user message is shown whole
    # pages of recall(part="message") give the paste back in order, exactly
    pages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [p.tool_call_id for p in pages] == ["r1", "r2"]
    first, second = (str(p.content) for p in pages)
    assert LOG.startswith(first.split("\n[ctxwarden", 1)[0])
    assert len(first) > 1_000
    assert LOG.index(second.split("\n[ctxwarden", 1)[0]) > 0  # the next page, from further on
    # the thread keeps it exact, and the trace says the forced batch cut it
    kept = [m for m in out["messages"] if isinstance(m, HumanMessage)][-1].content
    assert kept == (LOG if shape != "blocks" else [{"type": "text", "text": LOG}])
    clears = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert any(e.payload["messages_cut"] == 1 and e.payload["forced"] for e in clears)
    assert [e.payload["stage"] for e in TraceStore(tmp_path / "trace.sqlite").events(kind="context_overflow")] == [
        "measured"
    ]
    # later calls show the same bytes (the cut is kept in the boundary): the provider's cache keeps it
    assert shown_part(model._seen[2]).content == text == shown_part(model._seen[3]).content
    agent.checkpointer.conn.close()


def test_a_resumed_thread_shows_the_same_part_and_recalls_it(tmp_path: Path) -> None:
    """A new process (a new agent on the same checkpoint) shows the message cut as before, from the stored boundary."""
    agent, model = agent_for(tmp_path, iter([]))
    config = {"configurable": {"thread_id": "resumed"}}
    model.messages = reading(model, 1, done="noted")
    opened(agent, model, config)
    agent.invoke({"messages": [("user", LOG)]}, config)
    before = shown_part(model._seen[-1])
    agent.checkpointer.conn.close()

    again, fresh = agent_for(tmp_path, iter([]))
    fresh.messages = reading(fresh, 1, done="still here")
    out = again.invoke({"messages": [("user", "what was the last batch?")]}, config)

    assert out["messages"][-1].content == "still here"
    assert max(fresh._sizes) <= fresh.limit  # no refusal: the stored boundary cut it before the first call
    assert before is not None
    assert shown_part(fresh._seen[0]).content == before.content
    page = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert LOG.startswith(str(page.content).split("\n[ctxwarden", 1)[0])
    again.checkpointer.conn.close()


def test_threads_that_name_their_pastes_alike_each_recall_their_own(tmp_path: Path) -> None:
    """Two threads in one state dir, each with a paste the client named `same`: each recall reads its own thread."""
    other = LOG.replace("worker_", "node_")
    read: dict[str, str] = {}
    for thread, text in (("a", LOG), ("b", other)):
        agent, model = agent_for(tmp_path, iter([]))
        model.messages = reading(model, 1)
        config = {"configurable": {"thread_id": thread}}
        opened(agent, model, config)
        out = agent.invoke({"messages": [HumanMessage(text, id="same")]}, config)
        read[thread] = str([m for m in out["messages"] if isinstance(m, ToolMessage)][-1].content)
        assert agent.get_state(config).values["messages"][2].content == text
        agent.checkpointer.conn.close()
    assert LOG.startswith(read["a"].split("\n[ctxwarden", 1)[0])
    assert other.startswith(read["b"].split("\n[ctxwarden", 1)[0])
    assert "node_" in read["b"]
    assert "node_" not in read["a"]


def test_a_later_message_with_an_image_still_fails_clearly_and_is_kept(tmp_path: Path) -> None:
    """Only text is shown in part: a message holding an image stays whole, and the error says to send it in parts."""
    agent, model = agent_for(tmp_path, iter([]))
    config = {"configurable": {"thread_id": "pictured"}}
    opened(agent, model, config)
    pictured = HumanMessage([{"type": "text", "text": LOG}, {"type": "image", "url": "https://example.com/screen.png"}])
    fix = r"user message 3 of \d, [\d,]+ tokens.*Fix: that message alone takes \d+% of the window.*smaller parts"
    with pytest.raises(ContextStillTooLargeError, match=fix):
        agent.invoke({"messages": [pictured]}, config)
    kept = agent.get_state(config).values["messages"]
    assert kept[-1].content == pictured.content  # the input is in the checkpoint, not lost
    overflow = TraceStore(tmp_path / "trace.sqlite").events(kind="context_overflow")
    assert {e.payload["stage"] for e in overflow} == {"measured", "provider"}
    agent.checkpointer.conn.close()


def test_the_boundary_keeps_the_cut_messages_through_its_state() -> None:
    cut = Boundary(results=("c1",), cut_messages={"m1": (0, 1, 9)})
    assert Boundary.from_state({"ctxwarden_clip": cut.to_state()}).cut_messages == {"m1": (0, 1, 9)}
    assert "cut_messages" not in Boundary().to_state()
    forged = {"ctxwarden_clip": {"cut_messages": {"a": "0 1", "b": [0, "1", 2], 3: [4]}}}
    assert Boundary.from_state(forged).cut_messages == {"b": (0, 2), "3": (4,)}  # what is not a list of lines: none
    assert Boundary.from_state({"ctxwarden_clip": {"cut_messages": ["m1"]}}).cut_messages == {}


def test_folds_after_the_paste_quote_its_shown_part(tmp_path: Path) -> None:
    """The agent reads the paste page by page until folds take the turns. The facts quote the message as the calls
    showed it: quoted whole (the latest user message folded is), every fold after it planned a view as large as the
    paste, and was held, so the thread never folded again."""
    agent, model = agent_for(tmp_path, iter([]))
    model.messages = reading(model, 12)
    config = {"configurable": {"thread_id": "long"}}
    opened(agent, model, config)
    agent.invoke({"messages": [("user", LOG)]}, config)
    model.messages = reading(model, 4, done="done")
    out = agent.invoke({"messages": [("user", "and the rest?")]}, config)

    assert out["messages"][-1].content == "done"
    assert all(size <= model.limit for size in model._sizes)  # none refused
    trace = TraceStore(tmp_path / "trace.sqlite")
    assert sum(bool(e.payload.get("ok")) for e in trace.events(kind="context_compaction")) >= 3
    held = trace.events(kind="fold_held")
    assert all(e.payload["tokens_after"] < e.payload["tokens_before"] + model.limit for e in held)  # before: 230,755
    summaries = [m for call in model._seen for m in call if "## Facts" in str(m.content)]
    assert all(len(str(m.content)) < 4 * model.limit for m in summaries)
    assert any(NOTE_START in str(m.content) for m in summaries)  # the paste, quoted as the calls showed it
    kept = [m.content for m in agent.get_state(config).values["messages"] if isinstance(m, HumanMessage)]
    assert kept == ["hi", LOG, "and the rest?"]
    agent.checkpointer.conn.close()


@tool
def fetch_page(number: int) -> str:
    """Return page `number` of the service's log."""
    return "\n".join(f"page {number} line {i}: worker_{i % 5} took {i * number % 89} ms" for i in range(90))


def test_a_long_message_a_fold_takes_is_quoted_in_part_with_the_way_back(tmp_path: Path) -> None:
    """A paste of a third of the window is read whole (no refusal, nothing cut), until a fold takes it as the latest
    user message: its facts quote it within the facts cap, under the note naming its id, not whole."""
    pasted = "\n".join(LOG.splitlines()[:160])
    model = Refusing(messages=iter([]))
    model.profile = {"max_input_tokens": 8_000}
    pages = [AIMessage("", tool_calls=[{"name": "fetch_page", "args": {"number": n}, "id": f"p{n}"}]) for n in range(9)]
    model.messages = iter([AIMessage("hello"), *pages, AIMessage("done")])
    agent = create_context_agent(model, [fetch_page], state_dir=tmp_path)
    config = {"configurable": {"thread_id": "third"}}
    agent.invoke({"messages": [("user", "hi")]}, config)
    out = agent.invoke({"messages": [("user", pasted)]}, config)

    assert out["messages"][-1].content == "done"
    assert not any(size > model.limit for size in model._sizes)
    assert shown_part(model._seen[1]) is None  # read whole while it is in view
    summaries = [str(m.content) for call in model._seen for m in call if "## Facts" in str(m.content)]
    assert summaries  # a fold took it
    assert all(pasted not in summary for summary in summaries)  # before: quoted whole in every summary
    quoted = next(NAMED.search(summary) for summary in summaries if NOTE_START in summary)
    assert quoted is not None
    messages = identified(agent.get_state(config).values["messages"])
    assert message_text_by_id(messages, json.loads(quoted.group(1))) == pasted  # the note's id finds it whole
    agent.checkpointer.conn.close()


def test_the_forced_round_cuts_every_later_text_message_past_half_the_window_and_nothing_else() -> None:
    meter = TokenMeter()
    big = "\n".join(LOG.splitlines()[:2_000])  # about 49,000 tokens
    pictured = HumanMessage([{"type": "text", "text": big}, {"type": "image", "url": "https://example.com/a.png"}])
    thread = [
        HumanMessage(big, id="task"),  # the task: `core.task` cuts it, never this
        AIMessage("ok", id="a1"),
        HumanMessage(big, id="one"),
        HumanMessage("a small one", id="small"),
        HumanMessage(big[: len(big) // 4], id="quarter"),  # past the facts cap, under half the window: read whole
        pictured.model_copy(update={"id": "pictured"}),
        HumanMessage([{"type": "text", "text": big}], id="blocks"),
        HumanMessage(big, id="done"),
    ]
    cuts = message_cuts(thread, 40_000, 4_000, meter, {"done": (0,)})
    assert set(cuts) == {"one", "blocks"}
    assert all(0 in lines and len(lines) < 2_000 for lines in cuts.values())  # its first line, and far from all
    assert sum(meter.counter(big.splitlines()[i]) for i in cuts["one"]) <= 4_000


def test_a_search_finds_the_lines_the_part_shown_leaves_out(tmp_path: Path) -> None:
    """`recall(query=...)` quotes a hit from the lines left out, rather than marking it as in view."""
    wanted = next(line for line in LOG.splitlines() if "batch_4321 " in line)
    search = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "batch_4321 "}, "id": "q1"}])
    agent, model = agent_for(tmp_path, iter([search, AIMessage("found")]))
    config = {"configurable": {"thread_id": "searched"}}
    opened(agent, model, config)
    out = agent.invoke({"messages": [("user", LOG)]}, config)

    shown = shown_part(model._seen[1])
    assert shown is not None
    assert wanted not in str(shown.content)
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "q1")
    assert wanted in str(answer.content)
    agent.checkpointer.conn.close()
