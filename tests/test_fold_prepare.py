"""Folds off the critical path: the summary is prepared in the background and applied at once, never stale."""

from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path
from typing import Any, cast

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import ContextPolicy, ThreadIsolatedBackend, context_middleware
from ctxwarden.core.layers import CallBudget
from ctxwarden.core.meter import Measurement, TokenMeter
from ctxwarden.core.stream import STREAM_KEY
from ctxwarden.core.window import Window
from ctxwarden.fold import SECTIONS, Folds, is_summary
from ctxwarden.fold import engine as fold_engine
from ctxwarden.fold.cut import choose_cut
from ctxwarden.fold.draft import EXTENSION_MAX_LINES, MAX_DRAFTS, Drafts, extension
from ctxwarden.fold.engine import Folder, FoldInput
from ctxwarden.fold.facts import Facts, gather
from ctxwarden.fold.layer import FoldLayer
from ctxwarden.fold.prepare import EXTENSION_HEADING, Preparer
from ctxwarden.fold.summarize import Summary
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.stack.middleware import ContextWindowMiddleware
from ctxwarden.thread import compact
from ctxwarden.trace import TraceStore
from spies import note_calls
from views import Views

WINDOW = 6_000
# ~400 tokens of assistant text per step; clear_call_text=False (in `_agent`) keeps it in view: the window fills, folds
THOUGHT = "Let me think about the parser carefully. " * 40
PREPARERS: list[Preparer] = []
"""The preparers of the agents under test: a tool call waits for a summary being prepared (see `fetch`)."""


@pytest.fixture(autouse=True)
def _fresh() -> None:
    PREPARERS.clear()


@tool
def fetch(page: int, config: RunnableConfig) -> str:
    """Fetch a page."""
    thread = config["configurable"]["thread_id"]
    for preparer in PREPARERS:  # the agent works on while the summary is written and the fold drafted: here, until done
        preparation = preparer.prepared(thread)
        if preparation is not None:
            concurrent.futures.wait([preparation.future], timeout=10)
            preparation.drafts.wait(timeout=10)
    return f"page {page}: " + "data " * 20


class Summarizer(ScriptedChatModel):
    """Answers with a numbered summary; records, per call, how many model calls the agent had made when it began."""

    _views: Any = PrivateAttr(default=None)
    _calls: list[tuple[int, str]] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self._calls.append((len(self._views.views), str(messages[-1].content)))
        number = len(self._calls)
        text = "\n".join(f"## {name}\n- from the summarizer, summary {number}" for name in SECTIONS)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def _steps(n: int, start: int = 0) -> list[AIMessage]:
    return [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}])
        for i in range(start, start + n)
    ]


def _agent(
    tmp_path: Path,
    replies: list[AIMessage],
    policy: ContextPolicy,
    *,
    window: int = WINDOW,
    summarizer_kind: type[Summarizer] | None = None,
) -> tuple[Any, Views, Summarizer]:
    views = Views()
    kind = summarizer_kind or Summarizer
    summarizer = kind(messages=iter(()), profile={"max_input_tokens": 100_000}, name="summarizer")
    summarizer._views = views
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    policy = policy.replace(clear_call_text=False)  # the THOUGHT of each step stays in view
    middleware = context_middleware(
        policy=policy, trace=tmp_path / "trace.sqlite", backend=backend, summarizer=summarizer
    )
    model = scripted_model(replies, window=window, name="agent-model")
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=InMemorySaver())
    core = cast(ContextWindowMiddleware, middleware[0])
    PREPARERS.extend(layer.preparer for layer in core.layers if isinstance(layer, FoldLayer))
    return agent, views, summarizer


def _events(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind=kind)]


def _fold_calls(agent: Any, config: dict[str, Any]) -> list[int]:
    """Which model calls (counted from 0) folded."""
    messages = agent.get_state(config).values["messages"]
    stamps = [m.response_metadata["ctxwarden"] for m in messages if isinstance(m, AIMessage)]
    return [i for i, s in enumerate(stamps) if "context_compaction" in s["events"]]


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_a_fold_applies_the_prepared_summary_without_waiting_for_the_summarizer(tmp_path: Path, run: str) -> None:
    agent, views, summarizer = _agent(tmp_path, [*_steps(16), AIMessage("done")], ContextPolicy())
    config = {"configurable": {"thread_id": "prepared"}}
    given = {"messages": [HumanMessage("Fix the parser. Never touch tests/legacy.")]}
    if run == "invoke":
        streamed = list(agent.stream(given, config, stream_mode="custom"))
    else:
        streamed = [chunk async for chunk in agent.astream(given, config, stream_mode="custom")]
    assert agent.get_state(config).values["messages"][-1].content == "done"
    start, end = (e for e in streamed if e.get(STREAM_KEY) in {"fold_start", "fold_end"} and e["fold"] == 1)
    assert start["prepared"] is True
    assert end["source"] == "prepared"  # what a client shows: the summary was ready when the fold fired

    (fold_call, *_more) = _fold_calls(agent, config)
    folds = [c for c in _events(tmp_path, "context_compaction") if c["ok"]]
    assert folds[0]["prepared"] is True
    assert folds[0]["summarizer"] == "summarizer"
    # the turns the thread gained while the summary was written go with it, summarized without a model
    assert folds[0]["prepared_extended"] > 0
    # the summarizer was asked before the call that folded, and not again on it: no wait on the critical path
    started = [at for at, _prompt in summarizer._calls]
    assert started[0] < fold_call
    assert fold_call not in started
    assert len(summarizer._calls) == len(folds)  # nothing asked twice, nothing wasted
    prepare = _events(tmp_path, "fold_prepare")
    assert prepare[0]["started"] is True
    assert prepare[0]["fold"] == 1
    # the fold applied the prepared summary, with the facts of exactly the turns it folded
    view = views.views[fold_call]
    assert "from the summarizer, summary 1" in view[1].content  # after the task, pinned above every summary
    assert EXTENSION_HEADING in view[1].content
    record = Folds.from_state(agent.get_state(config).values).records[0]
    messages = agent.get_state(config).values["messages"]
    upto = next(i for i, m in enumerate(messages) if m.id == record.upto)
    assert record.facts == gather(Facts(), messages[1 : upto + 1]).to_dict()  # the task is pinned, not folded
    assert view[2].id == messages[upto + 1].id  # the view goes on right after the folded turns
    history = (tmp_path / "conversation_history" / "prepared.md").read_text(encoding="utf-8")
    assert f"messages {messages[1].id} .. {record.upto}" in history  # every folded turn, and only those


def test_without_preparing_the_summarizer_runs_on_the_call_that_folds(tmp_path: Path) -> None:
    agent, _views, summarizer = _agent(tmp_path, [*_steps(16), AIMessage("done")], ContextPolicy(fold_prepare_ahead=0))
    config = {"configurable": {"thread_id": "inline"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    folds = _fold_calls(agent, config)
    assert [at for at, _prompt in summarizer._calls] == folds  # each one asked on the very call that folded
    assert not _events(tmp_path, "fold_prepare")
    assert all(not c.get("prepared") for c in _events(tmp_path, "context_compaction"))


def _prepared_then_paused(
    tmp_path: Path, then: list[AIMessage] | None = None
) -> tuple[Any, Views, Summarizer, dict[str, Any]]:
    """A thread past the pre-fold point, its summary prepared, paused before the fold is due."""
    rest = then if then is not None else [*_steps(14, start=12), AIMessage("done")]
    agent, views, summarizer = _agent(tmp_path, [*_steps(12), AIMessage("paused"), *rest], ContextPolicy())
    config = {"configurable": {"thread_id": "stale"}}
    agent.invoke({"messages": [HumanMessage("Fix the parser.")]}, config)
    assert _fold_calls(agent, config) == []
    assert len(summarizer._calls) == 1  # prepared, not applied yet
    return agent, views, summarizer, config


def test_a_preparation_whose_turns_changed_is_never_applied(tmp_path: Path) -> None:
    agent, views, summarizer, config = _prepared_then_paused(tmp_path)
    first = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    edited = ToolMessage("page 0: EDITED AFTER THE SUMMARY WAS PREPARED", tool_call_id=first.tool_call_id, id=first.id)
    agent.update_state(config, {"messages": [edited]})  # same id, other content: what was summarized is gone

    agent.invoke({"messages": [HumanMessage("Go on.")]}, config)
    (fold_call, *_rest) = _fold_calls(agent, config)
    discarded = [e for e in _events(tmp_path, "fold_prepare") if e.get("discarded")]
    assert [e["discarded"] for e in discarded] == ["the thread changed under it"]
    # summarized again, from the thread as it is now; the stale summary is nowhere in the view
    assert len(summarizer._calls) >= 2
    assert "EDITED AFTER THE SUMMARY WAS PREPARED" in summarizer._calls[1][1]
    assert "EDITED AFTER THE SUMMARY WAS PREPARED" not in summarizer._calls[0][1]
    assert "summary 1" not in views.views[fold_call][1].content
    assert "from the summarizer, summary 2" in views.views[fold_call][1].content


def test_a_preparation_made_before_another_fold_is_never_applied(tmp_path: Path) -> None:
    agent, _views, _summarizer, config = _prepared_then_paused(tmp_path)
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    trace = tmp_path / "trace.sqlite"
    compact(
        agent,
        config,
        summarizer="deterministic",
        backend=backend,
        trace=trace,
        policy=ContextPolicy(clear_call_text=False),
    )

    agent.invoke({"messages": [HumanMessage("Go on.")]}, config)
    records = Folds.from_state(agent.get_state(config).values).records
    assert len(records) >= 2
    assert records[0].summarizer == "deterministic"  # the compaction
    assert "from the summarizer, summary 2" in records[1].summary  # prepared again after it
    assert not any("summary 1" in r.summary for r in records)
    assert any(e.get("discarded") for e in _events(tmp_path, "fold_prepare"))


@pytest.mark.parametrize("focus", ["the lexer's dialect table", None])
def test_a_compaction_asked_with_a_focus_is_summarized_with_it(tmp_path: Path, focus: str | None) -> None:
    ask = AIMessage("", tool_calls=[{"name": "compact_conversation", "args": {"focus": focus}, "id": "k1"}])
    agent, views, summarizer, config = _prepared_then_paused(tmp_path, [ask, AIMessage("done")])
    agent.invoke({"messages": [HumanMessage("Compact, then go on.")]}, config)
    (fold_call,) = _fold_calls(agent, config)
    fold = next(c for c in _events(tmp_path, "context_compaction") if c["ok"])
    assert fold["forced"] is True
    if focus is not None:  # the prepared summary knew nothing of the focus: written again, with it, on the spot
        assert [e.get("discarded") for e in _events(tmp_path, "fold_prepare")][
            -1
        ] == "this fold was asked for with a focus"
        assert len(summarizer._calls) == 2
        assert summarizer._calls[1][0] == fold_call
        assert f"Focus especially on: {focus}" in summarizer._calls[1][1]
        assert not fold.get("prepared")
    else:  # without one, the prepared summary serves, extended to the last step
        assert len(summarizer._calls) == 1
        assert fold["prepared"] is True
        assert "from the summarizer, summary 1" in views.views[fold_call][1].content


@pytest.mark.parametrize("value", [-0.1, 0.85, 0.9, "0.1", True])
def test_a_bad_prepare_point_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="fold_prepare_ahead"):
        ContextPolicy(fold_prepare_ahead=value)


def _budget(used: int, window: int = 10_000) -> CallBudget:
    return CallBudget(Window(window, "override", "m"), Measurement(0, 0, used, 1.0), ContextPolicy())


def test_a_summary_is_prepared_when_the_fold_is_near_not_at_the_first_call_past_the_point() -> None:
    """Past the pre-fold point (70% by default) a thread that grows slowly is not summarized yet: a session that ends,
    or a clearing batch that brings it down, would leave that summary paid for and unused."""
    preparer = Preparer(cast(Any, None))
    key = ("slow", "")
    sizes = range(6_000, 8_001, 200)  # +200 a call: past the point (7,000) from 7,200; the fold is at 8,500
    due = [preparer.due(key, _budget(used)) for used in sizes]
    assert due == [False] * 9 + [True, True]  # 7,800 + 4 x 200 reaches the fold threshold
    # a call that grew by a large result brings the forecast forward; a clearing drop does not count as growth
    assert [preparer.due(("jump", ""), _budget(used)) for used in (6_000, 5_000, 7_200, 6_900)] == [
        False,
        False,
        True,
        False,
    ]


def test_a_process_that_never_saw_the_thread_grow_prepares_at_once() -> None:
    """A new worker resuming a full thread has no growth to go by: it prepares rather than risk making the fold wait."""
    preparer = Preparer(cast(Any, None))
    assert preparer.due(("resumed", ""), _budget(7_100)) is True
    assert preparer.due(("resumed-below", ""), _budget(6_900)) is False
    off_policy = ContextPolicy(fold_prepare_ahead=0)
    off = CallBudget(Window(10_000, "override", "m"), Measurement(0, 0, 8_000, 1.0), off_policy)
    assert preparer.due(("off", ""), off) is False


def _threads_calling(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """The names of the threads that call `ctxwarden.fold.engine.<name>`, in order."""
    seen: list[str] = []
    real = getattr(fold_engine, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(fold_engine, name, recorded)
    return seen


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
async def test_the_prompt_and_the_facts_are_made_off_the_call(
    tmp_path: Path, run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call that starts a preparation does not build the summarizer prompt, and the call that folds does not
    gather the facts section: both are made in background threads, and the fold applies the draft of its cut."""
    prompts = _threads_calling(monkeypatch, "prompt_for")
    gathers = _threads_calling(monkeypatch, "gather")
    agent, views, _summarizer = _agent(tmp_path, [*_steps(16), AIMessage("done")], ContextPolicy())
    config = {"configurable": {"thread_id": "drafted"}}
    given = {"messages": [HumanMessage("Fix the parser. Never touch tests/legacy.")]}
    if run == "invoke":
        agent.invoke(given, config)
    else:
        await agent.ainvoke(given, config)
    (fold_call, *_rest) = _fold_calls(agent, config)
    fold = next(c for c in _events(tmp_path, "context_compaction") if c["ok"])
    assert fold["prepared"] is True
    assert fold["drafted"] is True
    assert prompts
    assert set(prompts) == {"ctxwarden-fold-prepare"}
    assert gathers
    assert set(gathers) == {"ctxwarden-fold-draft"}
    # the draft applied is the one of exactly the turns folded: the facts section matches the cut
    messages = agent.get_state(config).values["messages"]
    record = Folds.from_state(agent.get_state(config).values).records[0]
    upto = next(i for i, m in enumerate(messages) if m.id == record.upto)
    assert record.facts == gather(Facts(), messages[1 : upto + 1]).to_dict()  # the task is pinned, not folded
    assert views.views[fold_call][2].id == messages[upto + 1].id


def _thread(steps: int) -> list[Any]:
    messages: list[Any] = [HumanMessage("Fix the parser.", id="u0")]
    for i in range(steps):
        call = {"name": "fetch", "args": {"page": i}, "id": f"f{i}"}
        messages += [
            AIMessage(THOUGHT, tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"page {i}: " + "data " * 20, tool_call_id=f"f{i}", id=f"t{i}"),
        ]
    return messages


def _given(messages: list[Any]) -> FoldInput:
    return FoldInput(messages, messages, Folds(), WINDOW, 0, 1.0, WINDOW, "t", "")


def test_a_draft_serves_the_cut_the_next_step_brings_and_never_a_changed_thread() -> None:
    folder = Folder(ContextPolicy(), TokenMeter(), None)
    summary: concurrent.futures.Future[Summary] = concurrent.futures.Future()
    summary.set_result(Summary("## Session intent\n- parse", "summarizer", False))
    before, after = _thread(10), _thread(11)  # the next step: one more call and its result
    drafts = Drafts(prepared=3)
    assert drafts.start(folder, _given(before), summary) is not None
    assert drafts.wait(timeout=10)
    keep = int(WINDOW * ContextPolicy().fold_keep_share)
    start = folder.start(after, WINDOW)
    cut = choose_cut(after, folder.meter, keep, start)
    earlier = choose_cut(before, folder.meter, keep, start)
    assert cut is not None
    assert earlier is not None
    assert cut > earlier  # the step moved the cut forward
    draft = drafts.get(after[start:cut], WINDOW)
    assert draft is not None  # drafted before the step that decided it
    assert draft.gathered == folder.gathered(after[start:cut], _given(after))
    assert draft.extension == extension(after[start + 3 : cut])  # the turns after the three the summary covers
    edited = [
        *after[: cut - 1],
        ToolMessage("page: EDITED", tool_call_id=after[cut - 1].tool_call_id, id=after[cut - 1].id),
    ]
    assert drafts.get(edited, WINDOW) is None  # same ids, other content: stale, never applied
    assert drafts.get(after[:cut], WINDOW * 2) is None  # another window renders the facts otherwise


def test_every_cut_the_next_step_could_bring_is_drafted_over_a_few_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """More candidate cuts than one pass drafts: the first pass drafts the cut of a large next step and the nearest
    ones, the next passes the rest, reusing what the ones before made; none is left out for good."""
    folder = Folder(ContextPolicy(), TokenMeter(), None)
    summary: concurrent.futures.Future[Summary] = concurrent.futures.Future()
    summary.set_result(Summary("## Session intent\n- parse", "summarizer", False))
    view = [HumanMessage("Fix the parser.", id="u0")]
    for i in range(60):  # small steps: many turn boundaries within the kept tail
        view += [
            AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}], id=f"a{i}"),
            ToolMessage(f"page {i}", tool_call_id=f"f{i}", id=f"t{i}"),
        ]
    start = folder.start(view, WINDOW)
    now = choose_cut(view, folder.meter, int(WINDOW * ContextPolicy().fold_keep_share), start)
    assert now is not None
    cuts = [len(view), *(i for i in range(now, len(view)) if isinstance(view[i], AIMessage))]
    assert len(cuts) > MAX_DRAFTS
    drafts = Drafts(prepared=3)
    made = note_calls(monkeypatch, Drafts, "_make", lambda _drafts, _folder, _given, folded_raw: len(folded_raw))
    assert drafts.start(folder, _given(view), summary) is not None
    assert drafts.wait(timeout=30)
    assert len(made) == MAX_DRAFTS
    assert drafts.get(view[start:], WINDOW) is not None  # a large next step: the whole view folded
    assert [drafts.get(view[start:cut], WINDOW) is not None for cut in cuts[1:MAX_DRAFTS]] == [True] * (MAX_DRAFTS - 1)
    passes = 1
    while len(made) < len(cuts):  # each later pass makes only the ones left, at most MAX_DRAFTS
        before = len(made)
        assert drafts.start(folder, _given(view), summary) is not None
        assert drafts.wait(timeout=30)
        assert 0 < len(made) - before <= MAX_DRAFTS
        passes += 1
    assert passes == -(-len(cuts) // MAX_DRAFTS)
    assert sorted(made) == sorted(cut - start for cut in cuts)  # none made twice
    assert all(drafts.get(view[start:cut], WINDOW) is not None for cut in cuts)


def test_the_fold_is_drafted_only_while_a_preparation_is_kept_and_the_fold_is_two_calls_away() -> None:
    """Each draft is a pass over the folded turns: made for a fold within two calls of the largest recent growth, not
    for one many calls away (it would be made again before it), and never without a summary being prepared."""
    preparer = Preparer(cast(Any, None))
    key = ("near", "")
    for used in (6_000, 6_300, 7_100):  # largest growth 800; the fold is at 8,500
        preparer.due(key, _budget(used))
    assert preparer.drafting(key, _budget(7_100)) is False  # no preparation kept
    preparer._prepared[key] = cast(Any, object())
    assert preparer.drafting(key, _budget(7_100)) is True  # 7,100 + 2 x 800 reaches 8,500
    preparer.due(key, _budget(6_800))  # clearing brought the call back down: 6,800 + 1,600 falls short
    assert preparer.drafting(key, _budget(6_800)) is False


def test_the_fold_is_drafted_when_one_result_below_the_eviction_threshold_would_bring_it() -> None:
    """A thread that grew little lately can take one large step: any tool result up to `evict_over` (1,000 tokens on
    this window) arrives whole, so a fold that close is drafted, whatever the recent growth says."""
    preparer = Preparer(cast(Any, None))
    key = ("slow", "")
    for used in (7_400, 7_450, 7_500, 7_550):  # +50 a call; the fold is at 8,500
        preparer.due(key, _budget(used))
    preparer._prepared[key] = cast(Any, object())
    assert _budget(7_550).evict_over == 1_000
    assert preparer.drafting(key, _budget(7_550)) is True  # 7,550 + 1,000 reaches 8,500 (2 x 50 does not)
    preparer.due(key, _budget(7_400))
    assert preparer.drafting(key, _budget(7_400)) is False  # 7,400 + 1,000 falls short, and so does 2 x 50


def test_an_extension_leaves_errors_to_the_facts_and_keeps_a_few_lines_a_section() -> None:
    later: list[Any] = []
    for i in range(12):
        command = f"python check_{i}.py"
        later.append(
            AIMessage(
                f"Step {i}: run the check.", tool_calls=[{"name": "sh", "args": {"command": command}, "id": f"s{i}"}]
            )
        )
        failing = i % 3 == 0
        later.append(
            ToolMessage(f"ValueError: bad value {i}" if failing else f"ok {i}", tool_call_id=f"s{i}", name="sh")
        )
    text = extension(later)
    assert text is not None
    assert "Errors seen" not in text
    facts = gather(Facts(), later)
    for i in (0, 3, 6, 9):  # the facts of the same fold quote every failure the extension leaves out
        assert any(
            f"python check_{i}.py" in entry and f"ValueError: bad value {i}" in entry for entry in facts.failures
        )
    section = text.split("### Artifacts\n")[1].split("\n\n")[0].splitlines()
    artifacts = [line for line in section if line.startswith("- ")]  # an entry's quoted lines are indented under it
    assert len(artifacts) == EXTENSION_MAX_LINES + 1  # the first two, the last two, and how many more the file has
    assert artifacts[-1].startswith("- … ")
    assert "python check_11.py" in text  # the latest call is never the one left out


class WordySummarizer(Summarizer):
    """Writes a summary about as long as the turns a fold at the threshold would take."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        text = result.generations[0].message.content + "\n" + "The parser keeps its tables in order. " * 900
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


def test_a_fold_that_would_free_too_little_is_held_until_the_thread_grows(tmp_path: Path) -> None:
    window = 12_000
    agent, views, summarizer = _agent(
        tmp_path, [*_steps(40), AIMessage("done")], ContextPolicy(), window=window, summarizer_kind=WordySummarizer
    )
    config = {"configurable": {"thread_id": "held"}}
    streamed = list(agent.stream({"messages": [HumanMessage("Fix the parser.")]}, config, stream_mode="custom"))
    assert agent.get_state(config).values["messages"][-1].content == "done"
    (held, *_more) = _events(tmp_path, "fold_held")
    assert held["tokens_before"] <= window
    assert held["freed"] < ContextPolicy().fold_min_saving * held["tokens_before"]
    assert held["hold_until"] == held["tokens_before"] + int(ContextPolicy().fold_regrow_share * window)
    # the call that would have folded shows the turns as they were, and the client hears the fold did not happen
    ends = [e for e in streamed if e.get(STREAM_KEY) == "fold_end"]
    assert ends[0]["ok"] is False
    assert ends[0]["hold_until"] == held["hold_until"]
    calls_before_fold = [v for v in views.views if not any(is_summary(m) for m in v)]
    assert len(calls_before_fold) > 1
    # once the thread grew, the fold applied the summary prepared before: the held call asked the summarizer nothing
    folds = [c for c in _events(tmp_path, "context_compaction") if c["ok"]]
    assert folds
    assert folds[0]["prepared"] is True
    assert folds[0]["tokens_before"] >= held["hold_until"]
    assert folds[0]["freed"] >= ContextPolicy().fold_min_saving * folds[0]["tokens_before"]
    messages = agent.get_state(config).values["messages"]
    stamps = [m.response_metadata["ctxwarden"] for m in messages if isinstance(m, AIMessage)]
    (held_call,) = [i for i, stamp in enumerate(stamps) if "fold_held" in stamp["events"]]
    (fold_call, *_later) = _fold_calls(agent, config)
    asked = [at for at, _prompt in summarizer._calls]
    assert asked[0] < held_call < fold_call
    assert held_call not in asked
    assert "from the summarizer, summary 1" in views.views[fold_call][1].content  # the one prepared before the hold
