"""The cost-first mask: results and large arguments of every call older than the newest N model turns.

The mask advances `MASK_STEP_FACTOR * mask_after_turns` turns at a time, so between two
advances the calls share their prefix: each advance makes the provider read again,
uncached, every turn after the first newly masked one, so advancing on every call would
miss the cache every call, and advancing every N turns re-reads about 2N turns per N.
Between advances the same `Mask` object is returned, from the thread's index.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage

from ctxwarden.clip.index import ThreadIndex

MASK_STEP_FACTOR = 2
"""The mask advances this many times `mask_after_turns` turns at a time."""


@dataclass(frozen=True, slots=True)
class Mask:
    """Call ids whose results, and whose large arguments, the cost-first preset masks on this call."""

    results: frozenset[str] = frozenset()
    args: frozenset[str] = frozenset()


NO_MASK = Mask()


def mask_of(index: ThreadIndex) -> Mask:
    """The mask for the indexed list: the same object between advances, extended by the newly masked turns."""
    policy = index.policy
    keep = policy.mask_after_turns
    if keep is None:
        return NO_MASK
    step = keep * MASK_STEP_FACTOR
    turns = max(0, (len(index.callers) - keep) // step * step)
    memo = index.memo.get("mask")
    if memo is not None and memo[0] == turns:
        known: Mask = memo[1]
        return known
    start, before = (memo[0], memo[1]) if memo is not None and memo[0] < turns else (0, NO_MASK)
    excluded, large = policy.clear_exclude_tools, policy.clip_args_min_tokens
    results: set[str] = set(before.results)
    args: set[str] = set(before.args)
    for position in index.callers[start:turns]:
        message = index.messages[position]
        assert isinstance(message, AIMessage)
        sizes = index.meter.call_args_tokens(message)
        for call in message.tool_calls:
            if call.get("name") in excluded:
                continue
            call_id = str(call["id"])
            results.add(call_id)
            if sizes[call_id] >= large:
                args.add(call_id)
    mask = Mask(frozenset(results), frozenset(args))
    index.memo["mask"] = (turns, mask)
    if start < turns:  # the view before the first newly masked turn is unchanged
        index.memo["mask_grew"] = (before, mask, index.callers[start])
    return mask


def mask_turns(index: ThreadIndex) -> int:
    """How many turns the mask `mask_of` last gave for the indexed list covers (0: none)."""
    memo = index.memo.get("mask")
    return int(memo[0]) if memo is not None else 0


__all__ = ["MASK_STEP_FACTOR", "NO_MASK", "Mask", "mask_of", "mask_turns"]
