"""The clearing boundary as the thread's state stores it: grown from the stored state, by what it added."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.clip import boundary
from ctxwarden.clip.boundary import Boundary, remembered
from ctxwarden.clip.index import ThreadIndex
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy


def _grown() -> tuple[dict, Boundary]:
    stored = Boundary(("a",), (), {"a": (1, 2)}, {"a": (5, 1)}, "counter").to_state()
    grown = Boundary(("a", "b"), (), {"a": (1, 2), "b": (3,)}, {"a": (5, 1), "b": (6, 2)}, "counter")
    return stored, grown


def test_a_boundary_stored_from_what_it_added_is_the_boundary_stored_whole() -> None:
    stored, grown = _grown()
    whole = grown.to_state()
    assert grown.to_state(stored, ["b"]) == whole
    assert grown.to_state(stored) == whole
    extended = grown.to_state(stored, ["b"])
    assert extended["gists"]["a"] is stored["gists"]["a"]  # what was stored is taken as it is
    assert extended["counts"]["a"] is stored["counts"]["a"]


def test_an_entry_the_stored_state_held_and_the_boundary_dropped_is_dropped() -> None:
    stored, grown = _grown()
    stale = {**stored, "gists": {**stored["gists"], "gone": [9]}, "counts": {**stored["counts"], "gone": [1, 1]}}
    assert grown.to_state(stale, ["b"]) == grown.to_state()


def test_counts_made_by_another_counter_are_not_taken_from_the_stored_state() -> None:
    stored, grown = _grown()
    other = {**stored, "counted_by": "another", "counts": {"a": [7, 1]}}
    state = grown.to_state(other, ["b"])
    assert state["counts"] == {"a": [5, 1], "b": [6, 2]}
    assert state == grown.to_state()


def _thread(calls: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("go", id="task")]
    for i in range(calls):
        call = {"name": "bash", "args": {"command": f"run step {i} " * 40}, "id": f"c{i}", "type": "tool_call"}
        messages += [AIMessage("", id=f"ai{i}", tool_calls=[call]), ToolMessage(f"out {i}", tool_call_id=f"c{i}")]
    return messages


def test_a_resumed_process_reads_only_what_its_stored_boundary_did_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first mask advance after a resume costs what it hid: the entries the stored boundary counted (thousands
    on a long thread) are neither read nor counted again."""
    meter = TokenMeter()
    index = ThreadIndex(ContextPolicy.cost_first(), meter).sync(_thread(40))
    old, new = {f"c{i}" for i in range(30)}, {f"c{i}" for i in range(30, 33)}
    counts = dict.fromkeys(old, (5, 1)) | {f"args:{c}": (5, 1) for c in old}
    stored = Boundary(masked_turns=30, counts=counts, counted_by=meter.count_key)
    keys: list[str] = []
    placeholder_key = boundary.placeholder_key

    def watched(message: BaseMessage, key: tuple[str, ...]) -> str:
        keys.append(placeholder_key(message, key))
        return keys[-1]

    monkeypatch.setattr(boundary, "placeholder_key", watched)
    asked: list[str] = []

    def made(message: BaseMessage, key: tuple[str, ...]) -> tuple[BaseMessage, None]:
        asked.append(placeholder_key(message, key))
        return HumanMessage(f"placeholder of {asked[-1]}"), None

    hidden = (old | new, old | new)
    grown, added = remembered(index, stored, hidden, made, meter, (33, "ai32"))
    fresh = sorted([*new, *(f"args:{c}" for c in new)])
    assert sorted(asked) == sorted(added) == fresh
    assert sorted(set(keys)) == fresh  # no key built for a counted entry
    assert grown.counts.keys() == counts.keys() | set(fresh)


def test_a_call_clipped_since_the_stored_count_has_its_message_counted_again() -> None:
    """A message's placeholder is keyed by its calls clipped so far: one more of them clipped is another placeholder."""
    meter = TokenMeter()
    calls = [{"name": "bash", "args": {"command": "x " * 200}, "id": c, "type": "tool_call"} for c in ("a", "b")]
    thread = [
        HumanMessage("go"),
        AIMessage("", id="ai", tool_calls=calls),
        *(ToolMessage("o", tool_call_id=c) for c in "ab"),
    ]
    index = ThreadIndex(ContextPolicy.cost_first(), meter).sync(thread)
    stored = Boundary(counts={"args:a": (5, 1)}, counted_by=meter.count_key)
    grown, added = remembered(
        index, stored, (set(), {"a", "b"}), lambda m, k: (HumanMessage("p"), None), meter, (0, None)
    )
    assert added == ["args:a,b"]
    assert grown.counts.keys() == {"args:a", "args:a,b"}
