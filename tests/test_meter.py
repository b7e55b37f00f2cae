"""The meter counts what a call receives, pays only for new messages, and calibrates per model."""

from __future__ import annotations

import math
import socket

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from ctxwarden import ApproximateCounter, CtxwardenError, TokenMeter
from ctxwarden.core.meter import OFFLINE_ENCODING, TOKENIZER_ENV, default_counter


class CountingCounter:
    """An approximate counter that remembers how often it was asked."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return math.ceil(len(text) / 4)


@tool
def search(query: str) -> str:
    """Search the code base for `query`."""
    return query


def _history(n: int) -> list:
    messages: list = [HumanMessage("fix the bug", id="u0")]
    for i in range(n):
        messages.append(
            AIMessage("", id=f"a{i}", tool_calls=[{"name": "search", "args": {"query": f"q{i}"}, "id": f"c{i}"}])
        )
        messages.append(ToolMessage("result " * 50, tool_call_id=f"c{i}", id=f"t{i}"))
    return messages


def test_counts_system_prompt_tools_and_messages_separately() -> None:
    meter = TokenMeter(ApproximateCounter())
    system = SystemMessage("s" * 400)
    m = meter.measure([HumanMessage("h" * 40)], system_message=system, tools=[search])
    assert m.system == 100 + 2 + 3  # text, role, per-message overhead
    assert m.messages == 10 + 1 + 3
    assert m.tools > 10  # the schema's name, description and parameters
    assert m.estimate == m.system + m.tools + m.messages
    assert m.total == m.estimate  # uncalibrated


def test_plain_text_agrees_with_langchain_estimate() -> None:
    """The approximate counter gives langchain-core's figures (±1 rounding per message), so
    ctxwarden's numbers compare directly with the stock middlewares that use it."""
    messages = [
        HumanMessage("a" * 401),
        AIMessage("b" * 39),
        HumanMessage("c" * 4000),
        SystemMessage("d" * 7),
    ]
    meter = TokenMeter(ApproximateCounter())
    ours = meter.messages_tokens(messages)
    assert abs(ours - count_tokens_approximately(messages, count_name=False)) <= len(messages)


def test_tool_call_arguments_are_counted() -> None:
    meter = TokenMeter(ApproximateCounter())
    small = AIMessage("", tool_calls=[{"name": "write", "args": {"body": "x"}, "id": "1"}])
    big = AIMessage("", tool_calls=[{"name": "write", "args": {"body": "x" * 8000}, "id": "2"}])
    assert meter.message_tokens(big) - meter.message_tokens(small) >= 1990


def test_a_measured_history_is_not_counted_again() -> None:
    counter = CountingCounter()
    meter = TokenMeter(counter)
    history = _history(200)
    first = meter.messages_tokens(history)
    calls = counter.calls
    assert meter.messages_tokens(history) == first
    assert counter.calls == calls


def test_appending_one_message_counts_only_that_message() -> None:
    counter = CountingCounter()
    meter = TokenMeter(counter)
    history = _history(200)
    before = meter.messages_tokens(history)
    calls = counter.calls
    new = HumanMessage("one more", id="u-new")
    after = meter.messages_tokens([*history, new])
    assert counter.calls - calls == 1  # the new message's text, nothing else
    assert after == before + meter.message_tokens(new)


def test_a_thread_loaded_again_is_not_recounted() -> None:
    """Messages deserialized from a checkpoint are new objects with the same id and content."""
    counter = CountingCounter()
    meter = TokenMeter(counter)
    history = _history(50)
    total = meter.messages_tokens(history)
    calls = counter.calls
    reloaded = messages_from_dict(messages_to_dict(history))
    assert all(a is not b for a, b in zip(reloaded, history, strict=True))
    assert meter.messages_tokens(reloaded) == total
    assert counter.calls == calls


def test_changed_content_is_recounted() -> None:
    meter = TokenMeter(ApproximateCounter())
    short = ToolMessage("x" * 40, tool_call_id="c", id="t")
    long = ToolMessage("x" * 4000, tool_call_id="c", id="t")
    assert meter.message_tokens(long) > meter.message_tokens(short)


def test_a_changed_middle_is_measured_correctly() -> None:
    meter = TokenMeter(ApproximateCounter())
    history = _history(20)
    meter.messages_tokens(history)
    edited = list(history)
    edited[4] = ToolMessage("[cleared]", tool_call_id="c1", id="t1")
    assert meter.messages_tokens(edited) == sum(meter.message_tokens(m) for m in edited)
    assert meter.messages_tokens(edited) < meter.messages_tokens(history)


def test_calibration_learns_per_model_and_is_clamped() -> None:
    meter = TokenMeter(ApproximateCounter())
    messages = [HumanMessage("x" * 4000)]
    raw = meter.measure(messages, model="m1").estimate
    assert meter.calibrate("m1", estimated=1000, reported=1500) == pytest.approx(1.5)
    assert meter.measure(messages, model="m1").total == round(raw * 1.5)
    assert meter.measure(messages, model="m2").total == raw  # another model keeps its own factor
    assert meter.calibrate("m1", estimated=1000, reported=1000) == pytest.approx(1.25)  # blended
    assert meter.calibrate("m3", estimated=10, reported=10_000) == 4.0  # one odd report cannot derail it
    assert meter.calibrate("m4", estimated=0, reported=100) == 1.0  # nothing to learn from


def test_approx_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_ENV, "approx")
    assert TokenMeter().counter_name == "approximate"


def test_default_counter_never_reaches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the meter tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.delenv(TOKENIZER_ENV, raising=False)
    counter = default_counter()
    assert counter("hello world") > 0


def test_uses_tiktoken_when_the_offline_encoding_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    if OFFLINE_ENCODING not in tiktoken.list_encoding_names():
        pytest.skip("the offline cl100k encoding (ctxwarden[tokenizer]) is not installed")
    monkeypatch.delenv(TOKENIZER_ENV, raising=False)
    meter = TokenMeter()
    assert meter.counter_name == f"tiktoken:{OFFLINE_ENCODING}"
    assert meter.counter("hello world") == 2


def test_an_unknown_encoding_says_how_to_fix_it() -> None:
    with pytest.raises(CtxwardenError, match=rf"(?s)'no-such-encoding'.*{TOKENIZER_ENV}=approx"):
        default_counter("no-such-encoding")
