"""A first message larger than the window: a user opens a thread by pasting a log far past what the model takes.

The task is shown in part once a clearing batch runs (`core.task`), but only after the
model has answered it: an agent reads its task whole at least once. A task larger than the
window can never be read whole, so the provider refused the call, the forced retry kept the
task whole again, and the run ended with `ContextStillTooLargeError`. Now the forced round
shows it in part, with `recall(part="task")` to page through it; the thread keeps it exact.
Measured past the window the model declares, the call goes through that round before it is
sent (`test_refused_ahead.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxwarden import TraceStore, create_context_agent
from ctxwarden.core.task import TASK_NOTE
from refusing import Refusing

LOG = "\n".join(
    f"2026-11-27 12:{i // 60:02d}:{i % 60:02d} worker_{i % 7} processed batch_{i} in {i % 97} ms" for i in range(9_000)
)
"""A pasted log of about 220,000 tokens: over twenty-five times an 8k window."""

NOTE_START = TASK_NOTE.split("{", 1)[0]


def _recall(page: int, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"part": "task", "page": page}, "id": call_id}])


SENT = {
    "tuple": ("user", LOG),  # as the README sends it: no id of its own
    "blocks": HumanMessage([{"type": "text", "text": LOG}]),  # as a chat front end sends it
}


@pytest.mark.parametrize(("run", "shape"), [("sync", "tuple"), ("async", "tuple"), ("sync", "blocks")])
def test_a_first_message_larger_than_the_window_is_shown_in_part_and_read_by_pages(
    tmp_path: Path, run: str, shape: str
) -> None:
    model = Refusing(messages=iter([_recall(1, "r1"), _recall(2, "r2"), AIMessage("read it")]))
    model.profile = {"max_input_tokens": 8_000}
    agent = create_context_agent(model, state_dir=tmp_path)
    config = {"configurable": {"thread_id": "pasted"}}
    given = {"messages": [SENT[shape]]}
    out = agent.invoke(given, config) if run == "sync" else asyncio.run(agent.ainvoke(given, config))

    assert out["messages"][-1].content == "read it"  # before: ContextStillTooLargeError
    assert all(size <= model.limit for size in model._sizes)  # no call held the whole paste: none was refused
    # the first call sent showed the task in part: its first and last lines, under the note that says how to get the
    # rest (measured past the window the model declares, it went through the forced round before it was sent)
    task = model._seen[0][1]
    assert isinstance(task, HumanMessage)
    shown = str(task.content)
    assert shown.startswith(NOTE_START)
    assert 'recall(part="task")' in shown
    lines = LOG.splitlines()
    assert lines[0] in shown
    assert lines[-1] in shown
    assert all(line == "…" or line in LOG for line in shown.splitlines()[1:])  # whole lines of the paste, never edited
    # pages of recall(part="task") give the paste back in order, exactly
    pages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [p.tool_call_id for p in pages] == ["r1", "r2"]
    first, second = (str(p.content) for p in pages)
    assert LOG.startswith(first.split("\n[ctxwarden", 1)[0])
    assert second.split("\n[ctxwarden", 1)[0].splitlines()[0] in lines
    # the thread keeps it exact, and the trace says the forced batch cut it
    kept = out["messages"][0].content
    assert kept == (LOG if shape == "tuple" else [{"type": "text", "text": LOG}])
    clears = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert any(e.payload["task_cut"] and e.payload["forced"] for e in clears)
    overflows = TraceStore(tmp_path / "trace.sqlite").events(kind="context_overflow")
    assert [e.payload["stage"] for e in overflows] == ["measured"]
    # later calls show the same bytes (the cut is kept in the boundary): the provider's cache keeps the task
    assert model._seen[1][1].content == shown == model._seen[2][1].content
    agent.checkpointer.conn.close()


def test_a_paste_of_one_long_line_is_read_by_pages(tmp_path: Path) -> None:
    """Minified JSON: no whole line fits, so the view shows the note alone, and recall returns the text from its
    start."""
    pasted = '{"rows": [' + ", ".join(f'{{"id": {i}, "name": "row_{i}"}}' for i in range(12_000)) + "]}"
    model = Refusing(messages=iter([_recall(1, "r1"), AIMessage("read it")]))
    model.profile = {"max_input_tokens": 8_000}
    agent = create_context_agent(model, state_dir=tmp_path)
    out = agent.invoke({"messages": [HumanMessage(pasted)]}, {"configurable": {"thread_id": "minified"}})

    assert out["messages"][-1].content == "read it"
    assert str(model._seen[1][1].content).startswith(NOTE_START)
    (page,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert pasted.startswith(str(page.content).split("\n[ctxwarden", 1)[0][:1_000])
    assert out["messages"][0].content == pasted
    agent.checkpointer.conn.close()
