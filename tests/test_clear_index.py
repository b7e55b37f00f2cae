"""Clearing reads each message of a thread once: its index, mask and view grow with the thread.

Between two model calls a thread only grows, so the clearing layer extends what it knows
instead of walking the history again: the tests watch which messages are indexed and which
are run through the view on each call, in the states where clearing is engaged, and check
that what the index answers in O(1) is what a full walk of the thread gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import ctxwarden.clip.boundary as boundary_module
import ctxwarden.clip.clear as clear_module
from ctxwarden.bench.resumed import build, seed_values, session, steps_script
from ctxwarden.clip import mask
from ctxwarden.clip.clear import NO_MASK, Boundary, ClearLayer
from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.mask import advance_pays, due_turns, last_masked, mask_of, masked_turns
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from spies import note_calls

TOKENS = 30_000


def _thread(steps: int, *, start: int = 0) -> list[BaseMessage]:
    """A tool-calling thread: each step writes a large argument and reads a large result."""
    out: list[BaseMessage] = [HumanMessage("Fix the parser.", id="ask")] if start == 0 else []
    for i in range(start, start + steps):
        body = "\n".join(f"line {j} of change {i}: value_{i}_{j} = compute_{j}()" for j in range(60))
        tool = "read_file" if i % 3 else "write_file"
        args = {"file_path": f"/src/mod_{i % 4}.py", **({"content": body} if tool == "write_file" else {})}
        out.append(AIMessage("", id=f"ai-{i}", tool_calls=[{"id": f"c{i}", "name": tool, "args": args}]))
        out.append(ToolMessage(body if tool == "read_file" else "ok", tool_call_id=f"c{i}", name=tool, id=f"t{i}"))
    return out


def _brute_disposable(layer: ClearLayer, messages: list[BaseMessage], boundary: Boundary) -> int:
    return int(sum(saving for _kind, _id, saving in layer._candidates(messages, boundary, NO_MASK)))


def test_what_the_index_says_clearing_could_free_matches_a_full_walk() -> None:
    policy = ContextPolicy()
    layer = ClearLayer(policy, TokenMeter())
    messages = _thread(30)
    boundary = Boundary(results=("c1", "c2"), args=("c3",))
    index = ThreadIndex(policy, layer.meter).sync(messages)
    cleared, clipped = frozenset(boundary.results), frozenset(boundary.args)
    assert index.disposable(cleared, clipped, policy.keep_tool_results) == _brute_disposable(layer, messages, boundary)
    grown = messages + _thread(5, start=30)
    index.sync(grown)  # the same sets: only what was added is weighed
    assert index.disposable(cleared, clipped, policy.keep_tool_results) == _brute_disposable(layer, grown, boundary)


def _watching_adds(patch: pytest.MonkeyPatch) -> list[BaseMessage]:
    """The messages the index adds from now on, in order."""
    added: list[BaseMessage] = []
    original = ThreadIndex._add

    def watched(self: ThreadIndex, position: int, message: BaseMessage) -> None:
        added.append(message)
        original(self, position, message)

    patch.setattr(ThreadIndex, "_add", watched)
    return added


def test_the_index_extends_a_growing_thread_and_starts_over_on_another() -> None:
    index = ThreadIndex(ContextPolicy(), TokenMeter())
    messages = _thread(10)
    with pytest.MonkeyPatch.context() as patch:
        added = _watching_adds(patch)
        index.sync(messages)
        assert len(added) == len(messages)
        added.clear()
        index.sync([*messages, HumanMessage("and the tests", id="more")])
        assert [m.id for m in added] == ["more"]
        added.clear()
        fork = [*messages[:5], HumanMessage("another way", id="fork")]
        index.sync(fork)  # not an extension of what was indexed: indexed again from the start
        assert [m.id for m in added] == [m.id for m in fork]
    assert [c.call_id for c in index.results] == ["c1"]  # the fork's own results only


def test_a_thread_read_again_from_its_checkpoint_extends_its_index() -> None:
    """A run of a served agent reads the thread from its checkpoint: the same messages as new objects. They extend what
    was indexed (an equal message counts and renders alike); one that differs, even by its id, starts over."""
    index = ThreadIndex(ContextPolicy(), TokenMeter())
    messages = _thread(10)
    with pytest.MonkeyPatch.context() as patch:
        added = _watching_adds(patch)
        index.sync(messages)
        added.clear()
        reloaded = [m.model_copy(deep=True) for m in messages]
        assert not any(a is b for a, b in zip(reloaded, messages, strict=True))
        index.sync([*reloaded, HumanMessage("and the tests", id="more")])
        assert [m.id for m in added] == ["more"]
        added.clear()
        renamed = [*reloaded[:3], reloaded[3].model_copy(update={"id": "other"}), *reloaded[4:]]
        index.sync(renamed)
        assert [m.id for m in added] == [m.id for m in renamed]


def test_the_cost_first_mask_grows_by_the_newly_masked_turns_and_matches_a_full_walk() -> None:
    policy = ContextPolicy.cost_first(mask_after_turns=2)
    meter = TokenMeter()
    messages = _thread(9)
    grown = ThreadIndex(policy, meter).sync(messages)
    first = mask_of(grown, due_turns(grown))
    assert mask_of(grown, due_turns(grown)) is first  # between advances: the same object
    grown.sync(messages + _thread(4, start=9))
    advanced = mask_of(grown, due_turns(grown))
    fresh_index = ThreadIndex(policy, meter).sync(messages + _thread(4, start=9))
    fresh = mask_of(fresh_index, due_turns(fresh_index))
    assert advanced is not first
    assert advanced == fresh
    assert first.results < advanced.results


def _resumed(case: str, folder: Path, watch: Any) -> list[Any]:
    """Seed, settle, then resume `case` with a fresh agent, recording what `watch` saw per model call."""
    history = session(TOKENS, TokenMeter())
    saver = InMemorySaver()
    config: dict[str, Any] = {"configurable": {"thread_id": case}, "recursion_limit": 500}
    settle = build(case, TOKENS, steps_script(2, "settle"), saver, folder)
    settle.agent.update_state(config, seed_values(case, history), as_node="model")
    settle.agent.invoke({"messages": [HumanMessage("Run the first checks.", id="settle-ask")]}, config)
    watch.reset()
    resumed = build(case, TOKENS, steps_script(6, "step"), saver, folder)
    resumed.agent.invoke({"messages": [HumanMessage("Now run every check.", id="resume-ask")]}, config)
    return list(watch.calls)


class _Watch:
    """Per model call: how many messages the clearing layer indexed and ran through its view."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, int]] = []
        self.ordered: list[int] = []
        add, apply, shape, candidates = ThreadIndex._add, ClearLayer._apply, ClearLayer.shape, ClearLayer._candidates
        watch = self

        def counted_candidates(layer: ClearLayer, *args: Any, **kwargs: Any) -> Any:
            watch.ordered.append(len(watch.calls))
            return candidates(layer, *args, **kwargs)

        signature = clear_module.content_signature

        def counted_signature(message: BaseMessage) -> list[Any]:
            watch.calls[-1]["signed"] += 1
            return signature(message)

        def counted_add(index: ThreadIndex, position: int, message: BaseMessage) -> None:
            watch.calls[-1]["indexed"] += 1
            add(index, position, message)

        def counted_apply(layer: ClearLayer, messages: Any, *hidden: Any) -> list[BaseMessage]:
            watch.calls[-1]["viewed"] += len(messages)
            return apply(layer, messages, *hidden)

        def counted_shape(layer: ClearLayer, request: Any, budget: Any) -> Any:
            watch.calls.append({"indexed": 0, "viewed": 0, "signed": 0, "messages": len(request.messages), "batch": 0})
            edit = shape(layer, request, budget)
            watch.calls[-1]["batch"] = int(bool(edit is not None and edit.events))
            return edit

        patch.setattr(ThreadIndex, "_add", counted_add)
        patch.setattr(ClearLayer, "_apply", counted_apply)
        patch.setattr(ClearLayer, "shape", counted_shape)
        patch.setattr(ClearLayer, "_candidates", counted_candidates)
        patch.setattr(clear_module, "content_signature", counted_signature)
        patch.setattr(boundary_module, "content_signature", counted_signature)

    def reset(self) -> None:
        self.calls.clear()
        self.ordered.clear()


@pytest.mark.parametrize("case", ["clearing", "deferred", "cost-first"])
def test_a_resumed_thread_is_indexed_once_then_only_its_new_messages(case: str, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        watch = _Watch(patch)
        calls = _resumed(case, tmp_path, watch)
    assert len(calls) == 7
    first, later = calls[0], calls[1:]
    assert first["indexed"] == first["messages"] > 50  # a cold start indexes the thread once
    for before, call in zip(calls, later, strict=False):
        new = call["messages"] - before["messages"]
        assert call["indexed"] == new <= 3, call
        if case != "cost-first" and not call["batch"]:  # a batch, or the mask advancing, views from there
            assert call["viewed"] <= new, call
        # placeholders are measured for the boundary only when made: those of a batch or a mask advance, never the
        # ones the thread already hid
        assert call["signed"] <= call["viewed"], call
    if case == "cost-first":
        assert sum(c["viewed"] for c in later) < first["messages"]
        assert any(c["signed"] for c in later)  # the mask advanced and its new placeholders were measured


def test_a_deferred_batch_is_weighed_without_ordering_the_candidates(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        watch = _Watch(patch)
        calls = _resumed("deferred", tmp_path, watch)
    deferred = [number for number, call in enumerate(calls, 1) if not call["batch"]]
    assert len(deferred) >= 3
    # a call that deferred found the batch too small from the index's running totals, without ordering candidates;
    # only a call that made a batch (here: at the fold threshold) ordered them
    assert watch.ordered
    assert not set(watch.ordered) & set(deferred)


def test_the_mask_is_found_again_in_a_view_that_starts_later() -> None:
    """A fold's view starts later than the list the mask was counted on: its reach is found by the id of the last
    masked turn's message, and a view that no longer holds that turn masks none of its own."""
    policy = ContextPolicy.cost_first(mask_after_turns=2)
    meter = TokenMeter()
    messages = _thread(12)
    full = ThreadIndex(policy, meter).sync(messages)
    upto = last_masked(full, 8)
    assert masked_turns(full, 8, upto) == 8
    callers = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    later = messages[messages.index(callers[3]) :]  # the first three turns folded away
    folded = ThreadIndex(policy, meter).sync(later)
    assert masked_turns(folded, 8, upto) == 5
    assert mask_of(folded, 5).results == mask_of(full, 8).results - mask_of(full, 3).results
    gone = ThreadIndex(policy, meter).sync(messages[messages.index(callers[9]) :])
    assert masked_turns(gone, 8, upto) == 0


def test_weighing_a_mask_advance_reads_only_the_turns_added_since_the_last_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While advancing does not pay, the advance weighed grows by a turn per call: its sum is extended, not redone,
    and the tail and the growth come from running totals, so a long thread costs no more per call than a short one."""
    policy = ContextPolicy.cost_first(mask_after_turns=2)
    meter = TokenMeter()
    weighed = note_calls(monkeypatch, mask, "_calls", lambda _index, start, end: end - start)
    messages = _thread(6)
    index = ThreadIndex(policy, meter).sync(messages)
    hidden: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
    for step in range(40):
        messages = messages + _thread(1, start=6 + step)
        index.sync(messages)
        assert not advance_pays(index, 0, due_turns(index), hidden, room=1.0)  # clearing is a token away
    assert sum(weighed) == due_turns(index)  # every turn weighed once, not once per call
    assert index.tokens_from(0) == meter.messages_tokens(messages)
