"""A long task is shown in part from the first clearing batch, not only from the first fold.

SWE-agent sends its demonstration in the first user message, a third of a 16k window. Until
the first fold, every call carried it whole while clearing took the agent's own results;
the views sat above `clear_at` and cost more than stock summarization, which drops the task
with its first fold. Now the first clearing batch shows the task within the facts cap, the
lines the agent used so far kept, and every later call and fold shows the same bytes. The
original stays in the thread, one `recall(part="task")` away.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxwarden import ContextPolicy, ThreadIsolatedBackend, TokenMeter, context_middleware
from ctxwarden.clip import CLIP_STATE_KEY, ClearLayer
from ctxwarden.clip.boundary import Boundary
from ctxwarden.clip.mask import NO_MASK
from ctxwarden.core.task import TASK_NOTE, shown_lines, shown_task, task_cut
from ctxwarden.fold import DETERMINISTIC, FOLD_STATE_KEY, is_summary
from ctxwarden.replay import scripted_model
from ctxwarden.report.build import build_report
from ctxwarden.thread import acompact, model_view
from ctxwarden.trace import TraceStore
from views import Views

WINDOW = 4_000


def _task(lines: int) -> str:
    return "\n".join(f"Requirement {i}: keep the behaviour of module_{i} unchanged." for i in range(lines))


LONG_TASK = _task(100)  # 1,304 tokens: 904 past its cap (10% of the window), more than a batch's worth (10%)
POLICY = ContextPolicy(fold_prepare_ahead=0, clear_call_text=False)  # each step's text stays: the window fills
NOTE_START = "[ctxwarden: the task is shown in part:"


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


def _steps(first: int, n: int) -> list[AIMessage]:
    return [
        AIMessage(
            f"Reading module_42, page {i}. " + "Let me read on. " * 20,
            tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}],
        )
        for i in range(first, first + n)
    ]


def _agent(tmp_path: Path, connection: sqlite3.Connection, replies: list[AIMessage], views: Views) -> tuple[Any, Any]:
    """An agent on the thread store `connection`, recording its views, and its `recall` tool."""
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path / "files", virtual_mode=True))
    middleware = context_middleware(backend=backend, summarizer=DETERMINISTIC, policy=POLICY, state_dir=tmp_path)
    model = scripted_model(replies, window=WINDOW)
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=SqliteSaver(connection))
    return agent, next(t for t in middleware[0].tools if t.name == "recall")


def _cut_at(views: list[list[BaseMessage]]) -> int:
    return next(i for i, view in enumerate(views) if str(view[0].content).startswith(NOTE_START))


def test_the_first_clearing_batch_shows_the_task_in_part_and_every_later_call_the_same_bytes(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
    config = {"configurable": {"thread_id": "cut"}}
    first = Views()
    agent, recall = _agent(tmp_path, connection, [*_steps(0, 8), AIMessage("paused")], first)
    agent.invoke({"messages": [HumanMessage(LONG_TASK)]}, config)
    values = agent.get_state(config).values
    task = values["messages"][0]
    assert task.content == LONG_TASK  # the thread keeps the original

    cut = _cut_at(first.views)  # before the first fold: clearing alone cut it
    assert FOLD_STATE_KEY not in values or not values[FOLD_STATE_KEY].get("records")
    assert 0 < cut < len(first.views)
    assert all(view[0].content == LONG_TASK for view in first.views[:cut])  # read whole until then
    part = str(first.views[cut][0].content)
    assert {str(view[0].content) for view in first.views[cut:]} == {part}  # the same bytes on every later call
    assert all(view[0].id == task.id for view in first.views)
    assert TokenMeter().counter(part) <= WINDOW * POLICY.fold_facts_share  # within the task's cap
    assert "Requirement 0: keep the behaviour of module_0 unchanged." in part  # its edges
    assert "Requirement 99: keep the behaviour of module_99 unchanged." in part
    assert "Requirement 42: keep the behaviour of module_42 unchanged." in part  # what the agent used
    assert all(line in LONG_TASK.splitlines() for line in part.splitlines()[1:] if line != "…")

    stored = values[CLIP_STATE_KEY]["task"]
    assert stored["id"] == task.id
    events = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert [e.payload["task_cut"] for e in events][:1] == [True]  # the first batch cut it
    assert not any(e.payload["task_cut"] for e in events[1:])

    assert recall.func(values, part="task") == LONG_TASK  # the whole task, one call away
    assert model_view(values["messages"], values)[0].content == part  # what a reader sees is what the model saw

    # a fresh process resumes the thread: the same bytes from the stored lines, and a fold keeps them
    resumed = Views()
    agent, _recall = _agent(tmp_path, connection, [*_steps(8, 40), AIMessage("done")], resumed)
    agent.invoke({"messages": [HumanMessage("Go on.")]}, config)
    values = agent.get_state(config).values
    assert values["messages"][0].content == LONG_TASK
    assert {str(view[0].content) for view in resumed.views} == {part}
    records = values[FOLD_STATE_KEY]["records"]
    assert records, "the resumed run folded"
    assert all(r["pinned"] == task.id and r["task_lines"] == stored["lines"] for r in records)
    assert any(is_summary(view[1]) for view in resumed.views)
    assert model_view(values["messages"], values)[0].content == part
    connection.close()


def test_a_cut_that_frees_less_than_a_batch_waits_for_the_fold(tmp_path: Path) -> None:
    """A task just past its cap (784 tokens, 384 past it) would free less than a batch is worth: reading the part shown
    uncached would cost more than it saves. Clearing leaves it whole; the first fold pins it in part as before."""
    connection = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
    config = {"configurable": {"thread_id": "short"}}
    views = Views()
    agent, _recall = _agent(tmp_path, connection, [*_steps(0, 40), AIMessage("done")], views)
    agent.invoke({"messages": [HumanMessage(_task(60))]}, config)
    values = agent.get_state(config).values
    events = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert events
    assert not any(e.payload["task_cut"] for e in events)
    assert "task" not in values[CLIP_STATE_KEY]
    folded = next(i for i, view in enumerate(views.views) if any(is_summary(m) for m in view[:2]))
    assert all(view[0].content == _task(60) for view in views.views[:folded])
    assert str(views.views[folded][0].content).startswith(NOTE_START)  # the fold pins it in part
    connection.close()


def test_a_task_is_cut_only_once_the_model_has_read_it_whole() -> None:
    meter = TokenMeter()
    task = HumanMessage(LONG_TASK, id="task")
    assert task_cut([task], 400, meter.counter) is None  # not answered yet: the model reads it whole first
    assert task_cut([task, HumanMessage("and this too")], 400, meter.counter) is None
    answered = [task, AIMessage("I will edit module_42.")]
    found = task_cut(answered, 400, meter.counter)
    assert found is not None
    assert found[0] == "task"
    assert 42 in found[1]
    assert task_cut([HumanMessage(LONG_TASK), AIMessage("ok")], 400, meter.counter) is None  # no id to keep it by
    blocks = HumanMessage([{"type": "text", "text": LONG_TASK}], id="blocks")  # as a chat front end sends it
    cut = task_cut([blocks, AIMessage("I will edit module_42.")], 400, meter.counter)
    assert cut is not None  # text blocks are text
    assert cut[1] == found[1]
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    pictured = HumanMessage([{"type": "text", "text": LONG_TASK}, image], id="pictured")
    assert task_cut([pictured, AIMessage("ok")], 400, meter.counter) is None  # with an image: never cut to its text
    assert task_cut([AIMessage("hi"), task], 400, meter.counter) is None  # the thread does not open with a task
    assert task_cut(answered, 10_000, meter.counter) is None  # it fits


def test_a_copy_of_the_task_stands_for_its_original_and_an_imitation_does_not() -> None:
    task = HumanMessage(LONG_TASK, id="task")
    lines = (0, 1, 42, 59)
    shown = shown_task(task, lines)
    assert shown_lines(shown) == lines
    assert shown_task(shown, lines) is shown  # shown again from a view that shows it already: the same object
    assert shown_task(shown, (0, 59)).content != shown.content  # other lines are cut from the original, not the copy
    assert "module_42" not in str(shown_task(shown, (0, 59)).content)
    forged = HumanMessage(TASK_NOTE.format(shown=1, total=60) + "\nRequirement 42", id="task")
    assert shown_lines(forged) is None  # a message that imitates the note is no copy
    assert shown_lines(task) is None
    assert task.content == LONG_TASK


def test_a_damaged_stored_cut_is_ignored_not_trusted() -> None:
    for task in ({"id": 7, "lines": [1]}, {"id": "t", "lines": "1,2"}, "t", {"lines": [1]}):
        boundary = Boundary.from_state({CLIP_STATE_KEY: {"results": ["a"], "task": task}})
        assert boundary.task is None
        assert boundary.results == ("a",)
    kept = Boundary.from_state({CLIP_STATE_KEY: {"task": {"id": "t", "lines": [3, "x", 5]}}})
    assert (kept.task, kept.task_lines) == ("t", (3, 5))
    assert Boundary.from_state({CLIP_STATE_KEY: kept.to_state()}) == kept


async def test_async_runs_and_a_compact_after_the_cut_keep_the_same_bytes(tmp_path: Path) -> None:
    views = Views()
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path / "files", virtual_mode=True))
    middleware = context_middleware(backend=backend, summarizer=DETERMINISTIC, policy=POLICY, state_dir=tmp_path)
    model = scripted_model([*_steps(0, 8), AIMessage("paused"), AIMessage("after the compact")], window=WINDOW)
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "cut-async"}}
    await agent.ainvoke({"messages": [("user", LONG_TASK)]}, config)  # a tuple: the stack gives the task its id
    part = str(views.views[_cut_at(views.views)][0].content)
    record = await acompact(agent, config, backend=backend)
    assert record is not None
    values = (await agent.aget_state(config)).values
    assert values["messages"][0].content == LONG_TASK
    assert record.pinned == values["messages"][0].id
    assert list(record.task_lines or ()) == values[CLIP_STATE_KEY]["task"]["lines"]  # the fold kept the cut's lines
    await agent.ainvoke({"messages": [HumanMessage("and now?")]}, config)
    assert views.views[-1][0].content == part
    assert is_summary(views.views[-1][1])


class PrependNotes(AgentMiddleware):
    """A user's middleware that opens every request with a long message of its own (not in the thread)."""

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        notes = HumanMessage(_task(100).replace("Requirement", "Note"), id="notes")
        return handler(request.override(messages=[notes, *request.messages]))


def test_only_the_threads_own_task_is_cut_where_it_stands(tmp_path: Path) -> None:
    """A message a user's middleware puts first is not the thread's task: `recall(part="task")` could not return it,
    so it is never cut; nor is a later message that carries the task's id."""
    views = Views()
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path / "files", virtual_mode=True))
    middleware = context_middleware(backend=backend, summarizer=DETERMINISTIC, policy=POLICY, state_dir=tmp_path)
    model = scripted_model([*_steps(0, 8), AIMessage("paused")], window=WINDOW)
    agent = create_agent(model, [fetch], middleware=[PrependNotes(), *middleware, views], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "prepended"}}
    agent.invoke({"messages": [HumanMessage("Fix module_42.")]}, config)
    events = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert events
    assert not any(e.payload["task_cut"] for e in events)
    assert all(view[0].id == "notes" and "Note 50" in str(view[0].content) for view in views.views)

    layer = ClearLayer(POLICY, TokenMeter())
    task = HumanMessage(LONG_TASK, id="task")
    impostor = HumanMessage(LONG_TASK + "\nand more", id="task")  # a later message with the task's id
    boundary = Boundary(task="task", task_lines=(0, 42, 99))
    shown = layer.view([task, AIMessage("ok"), impostor], boundary, NO_MASK)
    assert str(shown[0].content).startswith(NOTE_START)
    assert shown[2] is impostor


def test_the_context_report_counts_the_part_of_a_long_task_the_next_batch_cuts() -> None:
    """/context told a reader that clearing could not reach the task; the part a batch cuts is clearable now."""
    answered = [HumanMessage(LONG_TASK, id="task"), AIMessage("Reading module_42.")]
    policy = ContextPolicy(window=WINDOW)
    report = build_report(answered, values={}, policy=policy)
    whole = TokenMeter().message_tokens(answered[0])
    assert report.clearable > 0
    assert report.out_of_reach["user messages"] < report.categories["user messages"]
    excess = whole - int(WINDOW * policy.fold_facts_share)
    assert abs(report.out_of_reach["user messages"] - (report.categories["user messages"] - excess)) <= 2  # rounding
    unanswered = build_report(answered[:1], values={}, policy=policy)  # read whole once first: out of reach
    assert unanswered.clearable == 0
    assert unanswered.out_of_reach["user messages"] == unanswered.categories["user messages"]
    boundary = Boundary(task="task", task_lines=(0, 42, 99))  # cut already: the view shows the part, nothing to cut
    cut = build_report(answered, values={CLIP_STATE_KEY: boundary.to_state()}, policy=policy)
    assert cut.clearable == 0
    assert cut.categories["user messages"] < report.categories["user messages"]


def test_a_copy_still_stands_for_its_original_after_many_other_threads_tasks() -> None:
    """A process serving many threads shows many tasks in part; a copy whose entry was dropped would be taken for an
    original and cut again, its own lines renumbered."""
    lines = (0, 42, 99)
    first = HumanMessage(LONG_TASK, id="task-0")
    copy = shown_task(first, lines)
    others = [HumanMessage(LONG_TASK + f"\nthread {i}", id=f"task-{i}") for i in range(1, 200)]
    shown = [shown_task(task, lines) for task in others]  # kept alive, as their threads' views keep them
    assert shown_lines(copy) == lines
    assert shown_task(copy, lines) is copy
    assert len(shown) == 199
