"""The clearing boundary as the thread's state stores it: grown from the stored state, by what it added."""

from __future__ import annotations

from ctxwarden.clip.boundary import Boundary


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
