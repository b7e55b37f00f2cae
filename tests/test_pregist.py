"""The gists a cost-first mask advance needs are made ahead, in the background, with the same lines."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_model_call
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.clip import clear, pregist
from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.ledger import TokenLedger
from ctxwarden.clip.mask import upcoming
from ctxwarden.clip.pregist import Pregists
from ctxwarden.core.foreground import FOREGROUND
from ctxwarden.core.layers import LayerEdit
from ctxwarden.core.text import text_of
from ctxwarden.replay import scripted_model
from ctxwarden.trace.store import SqliteTraceStore
from views import Views


@tool
def listing(page: int) -> str:
    """List the handlers of a page: every line names new things."""
    return "\n".join(f"src/mod_{page}_{i}.py:{i * 7}: def handler_{page}_{i}(request_{page}_{i}):" for i in range(40))


def _run(thread_id: str, policy: ContextPolicy | None = None, steps: int = 13) -> list[list[str]]:
    calls = [[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}] for i in range(steps)]
    replies = [AIMessage("", tool_calls=call) for call in calls]
    views = Views()
    policy = policy or ContextPolicy.cost_first(mask_after_turns=2, window=128_000)
    model = scripted_model([*replies, AIMessage("done")], window=policy.window or 128_000)
    agent = create_agent(
        model, [listing], middleware=[*context_middleware(policy=policy), views], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread_id}})
    return [[str(m.content) for m in view] for view in views.views]


def _recording_gists(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every gist made, as (thread name, the result's first line)."""
    made: list[tuple[str, str]] = []
    for module in (clear, pregist):
        original = module.gist

        def recorded(text: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            made.append((threading.current_thread().name, text.splitlines()[0]))
            return _original(text, *args, **kwargs)

        monkeypatch.setattr(module, "gist", recorded)
    return made


def _on_the_call_and_ahead(
    monkeypatch: pytest.MonkeyPatch, policy: ContextPolicy | None = None, steps: int = 13
) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The views of one session with every gist made on the call, then (asserted equal, byte for byte) made ahead;
    and the gists made the second time."""
    made = _recording_gists(monkeypatch)
    monkeypatch.setattr(Pregists, "hand_over", lambda *args, **kwargs: None)  # nothing ahead: every gist on the call
    on_the_call = _run("on-the-call", policy, steps)
    assert made
    assert {name for name, _line in made} == {"MainThread"}
    made.clear()
    monkeypatch.undo()
    made = _recording_gists(monkeypatch)
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:  # the model took long enough for the background to finish
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    ahead = _run("ahead", policy, steps)
    assert ahead == on_the_call  # byte for byte, every call
    return ahead, made


def test_a_mask_advance_finds_its_gists_made_ahead_with_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead, made = _on_the_call_and_ahead(monkeypatch)
    masked = [line for line in ahead[-2] if line.startswith("[cleared")]
    assert len(masked) >= 8  # the mask advanced at least twice
    assert {name for name, _line in made} == {"ctxwarden-pregist"}  # none made on a call
    assert len(made) == len(set(made))  # each made once
    assert {text.splitlines()[1] for text in masked} <= {line for _name, line in made}


def test_a_mask_advance_with_its_gists_made_ahead_does_not_index_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gist made ahead still holds while its result stands where it stood: the call checks that in O(1) and
    leaves the thread's token ledger to the background."""
    indexed_on_the_call: list[int] = []
    original = TokenLedger._sync

    def watched(self: TokenLedger, messages: Any, *args: Any) -> bool:
        before = self.size
        done = original(self, messages, *args)
        if threading.current_thread() is threading.main_thread() and self.size > before:
            indexed_on_the_call.append(self.size - before)
        return done

    monkeypatch.setattr(TokenLedger, "_sync", watched)
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:  # the model took long enough for the background to finish
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    views = _run("standing")
    assert sum(line.startswith("[cleared") for line in views[-2]) >= 8  # the mask advanced at least twice
    assert indexed_on_the_call == []


def test_a_clearing_batch_finds_its_gists_made_ahead_with_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default preset: the results the next batch takes are handed over once the view is halfway to `clear_at`
    (each listing is about 900 tokens: a batch every few calls on a 12,000-token window)."""
    ahead, made = _on_the_call_and_ahead(monkeypatch, ContextPolicy(window=12_000), steps=16)
    cleared = {text.splitlines()[1] for view in ahead for text in view if text.startswith("[cleared")}
    assert len(cleared) >= 6  # more than one batch
    assert {name for name, _line in made} == {"ctxwarden-pregist"}  # none made on a call
    assert len(made) == len(set(made))  # each made once
    assert cleared <= {line for _name, line in made}


def test_a_held_mask_hands_over_one_advance_at_most() -> None:
    """Where the mask no longer pays to advance, the same few turns stay ahead of it: the work per call does not
    grow with the thread."""
    policy = ContextPolicy.cost_first(mask_after_turns=2)
    messages: list[Any] = [HumanMessage("go", id="h")]
    for i in range(40):
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}]))
        messages.append(ToolMessage(f"page {i}", tool_call_id=f"l{i}", id=f"t{i}"))
    index = ThreadIndex(policy, TokenMeter()).sync(messages)
    assert upcoming(index, 4) == ["l4", "l5", "l6", "l7"]
    assert upcoming(index, 36) == ["l36", "l37", "l38", "l39"]
    assert upcoming(ThreadIndex(ContextPolicy(), TokenMeter()).sync(messages), 0) == []


def test_a_placeholder_made_ahead_is_not_tokenized_on_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background thread renders and counts each gist's placeholder too: the advancing call takes its count."""
    counted: list[tuple[str, str]] = []
    original = TokenMeter.count_apart

    def recording(self: TokenMeter, message: Any) -> int:
        counted.append((threading.current_thread().name, str(message.content).splitlines()[0]))
        return original(self, message)

    monkeypatch.setattr(TokenMeter, "count_apart", recording)
    main_counts: list[str] = []
    meter = TokenMeter()
    plain = meter.counter
    meter.counter = lambda text: (  # type: ignore[method-assign]
        main_counts.append(text) if threading.current_thread() is threading.main_thread() else None,
        plain(text),
    )[1]
    policy = ContextPolicy.cost_first(mask_after_turns=2, window=128_000)
    calls = [[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}] for i in range(13)]
    model = scripted_model([*(AIMessage("", tool_calls=c) for c in calls), AIMessage("done")], window=128_000)
    views = Views()
    pregists: list[Pregists] = []
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:
        pregists.append(self)
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    stack = context_middleware(policy=policy, meter=meter)
    agent = create_agent(model, [listing], middleware=[*stack, views], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    shown = [str(m.content) for m in views.views[-1] if str(m.content).startswith("[cleared")]
    assert len(shown) >= 8
    assert {name for name, _head in counted} == {"ctxwarden-pregist"}
    assert {text.splitlines()[0] for text in shown} <= {head for _name, head in counted}
    assert not [text for text in main_counts if text.startswith("[cleared")]  # none tokenized on a call
    for text in shown:  # the counts taken are the meter's own
        placeholder = next(m for m in views.views[-1] if m.content == text)
        assert meter.message_tokens(placeholder) == original(TokenMeter(), placeholder)


def _listings(steps: int) -> tuple[list[Any], TokenMeter, TokenLedger, Pregists, list[Any]]:
    """A thread of `steps` listing results, and what hands their gists over: a meter, a ledger, the jobs."""
    messages: list[Any] = [HumanMessage("go", id="h")]
    for i in range(steps):
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}]))
        messages.append(ToolMessage(listing.invoke({"page": i}), tool_call_id=f"l{i}", id=f"t{i}"))
    meter = TokenMeter()
    jobs = [(m, 100, meter.message_tokens(m)) for m in messages if isinstance(m, ToolMessage)]
    return messages, meter, clear.ThreadLedgers(1).here(), Pregists(), jobs


def test_background_gists_wait_while_a_call_is_shaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gist is not started while a call is being shaped (they would share the interpreter), and is once it ends."""
    monkeypatch.setattr(pregist, "FOREGROUND_WAIT", 60.0)
    messages, meter, ledger, pregists, jobs = _listings(3)
    with FOREGROUND.call():
        pregists.hand_over(ledger, messages, jobs, meter.counter, meter.count_apart)
        assert not pregists.wait(timeout=0.3)
        assert pregists.standing(jobs[0][0], 100, jobs[0][2], messages) is None
    assert pregists.wait(timeout=60)
    made = pregists.standing(jobs[0][0], 100, jobs[0][2], messages)
    assert made is not None
    assert made.placeholder_tokens == meter.message_tokens(made.placeholder)


def test_the_stack_marks_its_calls_as_foreground() -> None:
    """What the background waits on: a layer shaping a call runs inside the gate, the model answers outside it."""
    seen: list[bool] = []

    class Watch:
        name = "watch"

        def shape(self, request: Any, budget: Any) -> None:
            seen.append(FOREGROUND.busy)

        async def ashape(self, request: Any, budget: Any) -> None:
            seen.append(FOREGROUND.busy)

    @wrap_model_call
    def answer(request: Any, handler: Any) -> Any:  # inside the stack's handler: where the model is called
        seen.append(FOREGROUND.busy)
        return handler(request)

    stack = context_middleware(policy=ContextPolicy(window=8_000), layers=[Watch()])
    agent = create_agent(scripted_model(["ok"], window=8_000), middleware=[*stack, answer])
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert seen == [True, False]
    assert not FOREGROUND.busy


def test_the_trace_written_in_a_call_is_written_inside_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's own trace writes (its lifecycle events, and on the last call of a run the usage events it waits for)
    hold the interpreter between SQLite's steps: a gist made meanwhile in the background would take it from them."""
    writes: list[tuple[list[str], bool]] = []
    append = SqliteTraceStore.append

    def watched(store: SqliteTraceStore, events: Any) -> Any:
        if threading.current_thread() is threading.main_thread():  # in the call, not the trace's own writer
            writes.append(([event.kind for event in events], FOREGROUND.busy))
        return append(store, events)

    monkeypatch.setattr(SqliteTraceStore, "append", watched)

    class Batch:
        name = "batch"

        def shape(self, request: Any, budget: Any) -> LayerEdit:
            return LayerEdit(request, events=[("context_clear", {"results": 1}, None)])

        async def ashape(self, request: Any, budget: Any) -> LayerEdit:
            return self.shape(request, budget)

    stack = context_middleware(
        policy=ContextPolicy(window=8_000), layers=[Batch()], trace=tmp_path / "trace.sqlite", state_dir=tmp_path
    )
    agent = create_agent(scripted_model(["ok"], window=8_000), middleware=stack)
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert [kinds for kinds, _busy in writes] == [["context_clear"], ["model_usage"]]
    assert all(busy for _kinds, busy in writes)
    assert not FOREGROUND.busy


def test_a_list_that_replaces_the_one_being_made_is_taken_up_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call of a long run hands over a newer list: a pause before each would leave about one gist made per call,
    as many as the call adds, and the backlog of a resume would still be there when the mask advances."""
    _recording_gists(monkeypatch)
    pauses: list[float] = []
    monkeypatch.setattr(pregist, "time", SimpleNamespace(sleep=pauses.append))  # this module's pauses only
    messages, meter, ledger, pregists, jobs = _listings(4)
    handed: list[bool] = []

    def counter(line: str) -> int:  # runs while the first gist is being made: a call hands over meanwhile
        if not handed:
            handed.append(True)
            pregists.hand_over(ledger, messages, jobs[1:], counter, meter.count_apart)
        return meter.counter(line)

    pregists.hand_over(ledger, messages, jobs[:2], counter, meter.count_apart)
    assert pregists.wait(timeout=60)
    assert pauses == [pregist.PREGIST_DELAY]  # once, when the idle thread took the first list
    assert all(pregists.standing(job[0], 100, job[2], messages) is not None for job in jobs)


def test_a_newer_hand_over_replaces_the_list_being_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first advance after a resume makes its own gists while the background is still indexing the thread:
    the list handed over before it must not be made again once the call has handed over the next one."""
    made = _recording_gists(monkeypatch)
    messages, meter, ledger, pregists, jobs = _listings(4)
    newer = [jobs[0], jobs[3]]  # the first one is being made; the middle two were hidden, made on the call
    handed: list[bool] = []

    def counter(line: str) -> int:  # runs while the first gist is being made: a call hands over meanwhile
        if not handed:
            handed.append(True)
            pregists.hand_over(ledger, messages, newer, counter, meter.count_apart)
        return meter.counter(line)

    pregists.hand_over(ledger, messages, jobs[:3], counter, meter.count_apart)
    assert pregists.wait(timeout=60)
    first_lines = [text_of(job[0]).splitlines()[0] for job in jobs]
    assert [line for _name, line in made] == [first_lines[0], first_lines[3]]  # each once, none of the stale ones
    assert pregists.standing(jobs[3][0], 100, jobs[3][2], messages) is not None
