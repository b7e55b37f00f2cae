"""The cost-first mask: results and large arguments of every call older than the newest N model turns.

The mask advances `MASK_STEP_FACTOR * mask_after_turns` turns at a time, so between two
advances the calls share their prefix: each advance makes the provider read again,
uncached, every turn after the first newly masked one, so advancing on every call would
miss the cache every call, and advancing every N turns re-reads about 2N turns per N.

An advance is made only when it pays for that miss (`advance_pays`): the tokens it hides
are read from the cache on every call until clearing would hide them anyway — the calls
until the view reaches `clear_at`, at its recent growth per turn — and that saving has to
cover the uncached re-read of everything after the first newly masked turn. On a small
window clearing comes within a few calls and takes those results itself, so masking them
first would only add cache misses; on a large one the view grows for a long time before
clearing starts, and masking is what keeps it small.

How far the mask reaches is kept in the clearing boundary (`Boundary.masked_turns` and the
id of the last masked turn's message, `masked_upto`), so it never recedes and every process
shows the same view. Between advances the same `Mask` object is returned.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from langchain_core.messages import AIMessage

from ctxwarden.clip.index import POINTER_TOKENS, ThreadIndex, result_saving

MASK_STEP_FACTOR = 2
"""The mask advances this many times `mask_after_turns` turns at a time."""

CACHED_READ_SHARE = 0.1
"""What a cached input token costs, as a share of an uncached one (Anthropic's prompt caching)."""


@dataclass(frozen=True, slots=True)
class Mask:
    """Call ids whose results, and whose large arguments, the cost-first preset masks on this call."""

    results: frozenset[str] = frozenset()
    args: frozenset[str] = frozenset()


NO_MASK = Mask()


def due_turns(index: ThreadIndex) -> int:
    """How many of the indexed list's oldest turns the mask would cover if it advanced now (0: not cost-first)."""
    keep = index.policy.mask_after_turns
    if keep is None:
        return 0
    step = keep * MASK_STEP_FACTOR
    return max(0, (len(index.callers) - keep) // step * step)


def mask_of(index: ThreadIndex, turns: int) -> Mask:
    """The mask of the indexed list's oldest `turns` turns: the same object while `turns` holds, extended by the
    newly masked turns when it grows."""
    if index.policy.mask_after_turns is None or turns <= 0:
        return NO_MASK
    turns = min(turns, len(index.callers))
    memo = index.memo.get("mask")
    if memo is not None and memo[0] == turns:
        known: Mask = memo[1]
        return known
    start, before = (memo[0], memo[1]) if memo is not None and memo[0] < turns else (0, NO_MASK)
    results: set[str] = set(before.results)
    args: set[str] = set(before.args)
    for call_id, large in _calls(index, start, turns):
        results.add(call_id)
        if large:
            args.add(call_id)
    mask = Mask(frozenset(results), frozenset(args))
    index.memo["mask"] = (turns, mask)
    if start < turns:  # the view before the first newly masked turn is unchanged
        index.memo["mask_grew"] = (before, mask, index.callers[start])
    return mask


def masked_turns(index: ThreadIndex, turns: int, upto: str | None) -> int:
    """How many of the indexed list's turns the stored mask covers: `turns`, unless the list starts later than the
    one it was counted on (a fold): then up to the turn whose message is `upto`, or none when it is not in view."""
    callers = index.callers
    if turns <= 0 or upto is None:
        return max(0, min(turns, len(callers)))
    if turns <= len(callers) and index.messages[callers[turns - 1]].id == upto:
        return turns
    memo = index.memo.get("mask_upto")
    if memo is not None and memo[0] == upto:
        return int(memo[1])
    found = next((n + 1 for n, position in enumerate(callers) if index.messages[position].id == upto), 0)
    index.memo["mask_upto"] = (upto, found)
    return found


def last_masked(index: ThreadIndex, turns: int) -> str | None:
    """The id of the message of the last turn a `turns`-turn mask covers (what `masked_turns` finds it by)."""
    return index.messages[index.callers[turns - 1]].id if 0 < turns <= len(index.callers) else None


def advance_pays(index: ThreadIndex, start: int, end: int, hidden: tuple[Set[str], Set[str]], room: float) -> bool:
    """Whether masking turns `start` to `end` saves, in cached reads until clearing would hide them anyway, what its
    uncached re-read costs (see the module). `room`: raw tokens the view may still grow before `clear_at`.

    O(new turns) per call: the tail and the recent growth come from the index's running totals, and what the advance
    would hide is extended from the previous call's sum while the mask and the boundary hold."""
    keep = index.policy.mask_after_turns or 0
    if room <= 0 or keep <= 0 or end <= start:
        return False
    saved = _hideable(index, start, end, hidden)
    tail = index.tokens_from(index.callers[start])
    growth = index.tokens_from(index.callers[-keep] if len(index.callers) >= keep else 0) / keep  # per turn, raw
    calls = room / growth if growth > 0 else 0.0
    return saved * calls * CACHED_READ_SHARE >= (1 - CACHED_READ_SHARE) * max(0, tail - saved)


def _hideable(index: ThreadIndex, start: int, end: int, hidden: tuple[Set[str], Set[str]]) -> int:
    """What masking turns `start` to `end` would hide, beyond what `hidden` (the boundary's and the mask's) does."""
    memo = index.memo.get("mask_saving")
    if memo is not None and memo[0] == start and memo[1] is hidden and memo[2] <= end:
        done, saved = int(memo[2]), int(memo[3])
    else:
        done, saved = start, 0
    meter, cleared, clipped = index.meter, hidden[0], hidden[1]
    for call_id, large in _calls(index, done, end):
        at = index.result_at.get(call_id)
        if at is not None and call_id not in cleared:
            saved += max(0, result_saving(meter.message_tokens(index.messages[at]), index.policy))
        if large and call_id not in clipped:
            saved += meter.call_args_tokens(_caller(index, call_id))[call_id] - POINTER_TOKENS
    index.memo["mask_saving"] = (start, hidden, end, saved)
    return saved


def upcoming(index: ThreadIndex, turns: int) -> list[str]:
    """Call ids whose results the next advance of a `turns`-turn mask takes: the calls of the turns after its reach,
    one advance's worth, the newest included (they come due on later calls); oldest first (none when not cost-first)."""
    keep = index.policy.mask_after_turns
    if keep is None:
        return []
    # the newest turns too: the one that comes due on the advancing call was handed over calls before
    end = min(len(index.callers), turns + keep * MASK_STEP_FACTOR)  # a held mask: the same few turns
    return [call_id for call_id, _large in _calls(index, turns, end)]


def _calls(index: ThreadIndex, start: int, end: int) -> list[tuple[str, bool]]:
    """The maskable calls of turns `start` to `end`: each call id, and whether its arguments are large enough to
    clip."""
    excluded, large = index.policy.clear_exclude_tools, index.policy.clip_args_min_tokens
    calls: list[tuple[str, bool]] = []
    for position in index.callers[start:end]:
        message = index.messages[position]
        assert isinstance(message, AIMessage)
        sizes = index.meter.call_args_tokens(message)
        for call in message.tool_calls:
            if call.get("name") in excluded:
                continue
            call_id = str(call["id"])
            calls.append((call_id, sizes[call_id] >= large))
    return calls


def _caller(index: ThreadIndex, call_id: str) -> AIMessage:
    message = index.messages[index.caller_at[call_id]]
    assert isinstance(message, AIMessage)
    return message


__all__ = [
    "CACHED_READ_SHARE",
    "MASK_STEP_FACTOR",
    "NO_MASK",
    "Mask",
    "advance_pays",
    "due_turns",
    "last_masked",
    "mask_of",
    "masked_turns",
    "upcoming",
]
