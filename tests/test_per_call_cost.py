"""A real deep agent resuming a long thread counts only what is new on each call, in every state.

Each case seeds a checkpointed thread with a long tool-calling session whose messages
carry their counts (as the stack stamps them), settles it into its state with one run,
then resumes it with a fresh agent — a new meter, the messages loaded anew from the
checkpoint — and records every text the meter's counter is asked to count, call by call.
The first call must not tokenize any carried message again; every later call may count
only the reply it produces (the tool result before it was counted on its way in).
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden.bench.resumed import build, seed_values, session, steps_script
from ctxwarden.clip.clear import CLIP_STATE_KEY
from ctxwarden.core.gauge_note import is_note
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import COUNT_KEY, METADATA_KEY
from ctxwarden.fold.layer import FoldedView
from ctxwarden.fold.state import FOLD_STATE_KEY
from ctxwarden.stack.middleware import ContextWindowMiddleware

TOKENS = 30_000


class RecordingCounter:
    """The approximate count, keeping every text it was asked to count on a call's thread (the placeholders a
    background thread renders ahead are counted there, off the call's path: `clip.pregist`)."""

    name = "recording"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.in_background: list[str] = []

    def __call__(self, text: str) -> int:
        background = threading.current_thread().name.startswith("ctxwarden-")
        (self.in_background if background else self.texts).append(text)
        return math.ceil(len(text) / 4)


def _texts(message: BaseMessage) -> set[str]:
    """The texts counting `message` hands to the counter."""
    content = message.content
    texts = {content} if isinstance(content, str) else {str(b.get("text", "")) for b in content if isinstance(b, dict)}
    if message.name:
        texts.add(message.name)
    for call in getattr(message, "tool_calls", None) or ():
        texts.add(str(call.get("name", "")))
        texts.add(json.dumps(call.get("args", {}), sort_keys=True, ensure_ascii=False, default=str))
    return texts


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Per model call of a recording meter: the texts its counter counted during the call."""
    calls: list[list[str]] = []
    original = ContextWindowMiddleware.wrap_model_call

    def watched(self: ContextWindowMiddleware, request: Any, handler: Any) -> Any:
        counter = self.meter.counter
        if not isinstance(counter, RecordingCounter):
            return original(self, request, handler)
        start = len(counter.texts)
        try:
            return original(self, request, handler)
        finally:
            calls.append(counter.texts[start:])

    monkeypatch.setattr(ContextWindowMiddleware, "wrap_model_call", watched)
    return calls


def _resume(case: str, folder: Path, *, carried: bool = True) -> tuple[list[BaseMessage], dict[str, Any], int]:
    """Seed, settle and resume `case`; the thread before the resumed run, the final values, and where it began."""
    history = session(TOKENS, TokenMeter(RecordingCounter()), carried=carried)
    saver = InMemorySaver()
    config: dict[str, Any] = {"configurable": {"thread_id": case}, "recursion_limit": 500}
    settle = build(case, TOKENS, steps_script(2, "settle"), saver, folder, meter=TokenMeter(RecordingCounter()))
    settle.agent.update_state(config, seed_values(case, history), as_node="model")
    settle.agent.invoke({"messages": [HumanMessage("Run the first checks.", id="settle-ask")]}, config)
    before = list(settle.agent.get_state(config).values["messages"])
    resumed = build(case, TOKENS, steps_script(4, "step"), saver, folder, meter=TokenMeter(RecordingCounter()))
    resumed.agent.invoke({"messages": [HumanMessage("Now run every check.", id="resume-ask")]}, config)
    values = resumed.agent.get_state(config).values
    return before, values, len(before)


def _check_state(case: str, values: dict[str, Any], stamps: list[dict[str, Any]]) -> None:
    """The resumed run really was in the state the case names."""
    applied = {name for s in stamps for name in s["applied"]}
    if case == "clearing":
        assert values.get(CLIP_STATE_KEY, {}).get("results"), "no clearing boundary"
        assert "clear" in applied
        assert not any("context_clear" in s["events"] for s in stamps)
    if case == "deferred":
        assert not values.get(CLIP_STATE_KEY)
        assert all(s["fraction"] > 0.6 for s in stamps)
    if case == "cost-first":
        assert "clear" in applied
    if case == "folded":
        assert "folded" in applied
    if case == "admit":
        assert all(set(s["admit_tokens"]) == {"skills index", "memory index", "instruction files"} for s in stamps)
    if case == "switch":
        assert all(a["model"] != b["model"] for a, b in itertools.pairwise(stamps))


@pytest.mark.parametrize(
    "case",
    [
        "roomy",
        "clearing",
        "deferred",
        "cost-first",
        "folded",
        "admit",
        "switch",
    ],
)
def test_each_call_counts_only_what_is_new(case: str, tmp_path: Path, counted: list[list[str]]) -> None:
    before, values, start = _resume(case, tmp_path)
    resumed_calls = counted[-5:]  # the resumed run's four steps and its final answer
    replies = [m for m in values["messages"][start:] if isinstance(m, AIMessage)]
    assert len(replies) == len(resumed_calls) == 5
    _check_state(case, values, [r.response_metadata[METADATA_KEY] for r in replies])

    carried = {t for m in before if COUNT_KEY in m.response_metadata for t in _texts(m) if len(t) >= 40}
    assert len(carried) > 50  # the seeded session and the settle run carry their counts
    assert not carried & set(resumed_calls[0]), "a cold start tokenized carried messages again"
    if case in {"clearing", "cost-first"}:  # the boundary carries its placeholders' counts (the mask's too)
        placeholders = [t[:60] for t in resumed_calls[0] if t.startswith("[cleared") or "[clipped" in t]
        assert placeholders == [], "a cold start tokenized the boundary's placeholders again"
    thread = {t for m in values["messages"] for t in _texts(m) if len(t) >= 8}  # short names and "" are everywhere
    for call, reply in zip(resumed_calls[1:], replies[1:], strict=True):
        old = (set(call) - _texts(reply)) & thread
        assert not old, f"counted messages of the thread again: {[t[:60] for t in old]}"
    # what a call builds from older messages (placeholders, a summary) is counted once, then reused
    again = Counter(t for call in resumed_calls for t in call if len(t) >= 8)
    assert [t[:60] for t, n in again.items() if n > 1] == [], "a text was counted twice in one run"


def test_a_thread_without_carried_counts_is_recounted_to_the_same_figure(tmp_path: Path) -> None:
    _before, carried_values, start = _resume("roomy", tmp_path / "carried")
    _before, plain_values, plain_start = _resume("roomy", tmp_path / "plain", carried=False)

    def first_call(values: dict[str, Any], begin: int) -> dict[str, Any]:
        reply = next(m for m in values["messages"][begin:] if isinstance(m, AIMessage))
        return dict(reply.response_metadata[METADATA_KEY])

    assert (
        first_call(carried_values, start)["message_tokens"] == first_call(plain_values, plain_start)["message_tokens"]
    )


def test_replies_and_tool_results_carry_their_counts_into_the_thread(tmp_path: Path) -> None:
    _before, values, start = _resume("roomy", tmp_path)
    new = values["messages"][start:]
    meter = TokenMeter(RecordingCounter())
    for message in new:
        if isinstance(message, AIMessage | ToolMessage):
            record = message.response_metadata[COUNT_KEY]
            assert record["by"] == meter.count_key
            assert record["tokens"] == TokenMeter(RecordingCounter())._count_message(message)
    assert {type(m) for m in new if COUNT_KEY in m.response_metadata} == {AIMessage, ToolMessage}


@pytest.mark.parametrize("case", ["clearing", "deferred", "cost-first"])
def test_a_view_a_layer_measured_is_not_measured_again(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clearing measures the view it builds and the gauge note knows what its notes add: the stack takes their
    counts, so each message list a call measures is a different one, and the count stamped is the full one."""
    measured: list[list[BaseMessage]] = []
    sent: list[list[BaseMessage]] = []
    original, hook = TokenMeter.messages_tokens, ContextWindowMiddleware.wrap_model_call

    def watched(self: TokenMeter, messages: Any) -> int:
        if isinstance(self.counter, RecordingCounter):
            measured.append(messages)  # kept alive: ids are never reused
        return original(self, messages)

    def sending(self: ContextWindowMiddleware, request: Any, handler: Any) -> Any:
        return hook(self, request, lambda shaped: (sent.append(list(shaped.messages)), handler(shaped))[1])

    monkeypatch.setattr(TokenMeter, "messages_tokens", watched)
    monkeypatch.setattr(ContextWindowMiddleware, "wrap_model_call", sending)
    _before, values, start = _resume(case, tmp_path)
    ids = [id(messages) for messages in measured]
    assert len(ids) == len(set(ids)), "a message list was measured twice"
    assert not [m for messages in measured for m in messages if is_note(m)], "a view with its notes was measured"
    replies = [m for m in values["messages"][start:] if isinstance(m, AIMessage)]
    for reply, messages in zip(replies, sent[-len(replies) :], strict=True):
        stamp = reply.response_metadata[METADATA_KEY]
        assert stamp["applied"]  # the layers edited what the model received
        assert stamp["message_tokens"] == original(TokenMeter(RecordingCounter()), messages)


class _ReadCountingList(list):  # type: ignore[type-arg]
    """A message list that counts reads of single items."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            type(self).reads += 1
        return super().__getitem__(index)


def test_the_folded_view_finds_its_fold_without_searching_the_thread_again() -> None:
    history = session(TOKENS, TokenMeter(RecordingCounter()))
    values = seed_values("folded", history)
    upto = values[FOLD_STATE_KEY]["records"][0]["upto"]
    layer = FoldedView()
    budget = cast(Any, None)  # the folded view does not measure

    def request(messages: list[BaseMessage]) -> ModelRequest[Any]:
        state = {"messages": messages, FOLD_STATE_KEY: values[FOLD_STATE_KEY]}
        return ModelRequest(model=cast(Any, None), messages=cast(Any, messages), state=cast(Any, state))

    first = layer.shape(request(_ReadCountingList(history)), budget)
    position = next(i for i, m in enumerate(history) if m.id == upto)
    assert first is not None
    assert first.request.messages[1] is history[position + 1]
    grown = _ReadCountingList([*history, HumanMessage("one more", id="one-more")])
    _ReadCountingList.reads = 0
    second = layer.shape(request(grown), budget)
    assert second is not None
    assert second.request.messages[-1].id == "one-more"
    assert second.request.messages[0] is first.request.messages[0]  # the same summary object: a stable prefix
    assert _ReadCountingList.reads <= 1  # one look where the fold was, not a search back through the thread
