"""When a thread's next fold is near: a forecast from how much its latest calls grew.

A fold's summary takes a summarizer call, seconds on a real model, so it is prepared a few
calls before the fold fires; the fold's bookkeeping is drafted only when the fold could
come on one of the next calls (drafts for a fold further away would be made again before
it). Both read the same record: the tokens of each thread's latest calls.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

from ctxwarden.core.layers import CallBudget

LOOKAHEAD_CALLS = 4
"""Past the pre-fold point, a summary is prepared once the recent growth per call, kept up this many calls, would
reach the fold threshold: enough calls for a summarizer to write while the agent works. (At three, a thread whose
growth sped up left the summary one call short of written: the fold waited for it.)"""

DRAFT_LOOKAHEAD_CALLS = 2
"""While a preparation is kept, the fold's work is drafted once the largest recent growth per call, kept up this many
calls, would reach the fold threshold (the next call's growth is not known: a call can grow more than any before)."""

GROWTH_CALLS = 4
"""Calls whose growth (tokens over the previous call, when it grew) the forecast averages."""

MAX_THREADS = 256
"""Threads (and subagent namespaces) whose latest call sizes are kept; the oldest is dropped past it."""

Key = tuple[str | None, str]


def prepare_threshold(budget: CallBudget) -> int | None:
    """Tokens past which the next fold is prepared on this window (`None`: preparing is off)."""
    policy = budget.policy
    if not policy.fold_prepare_ahead:
        return None
    return int(budget.window.tokens * (policy.summarize_at - policy.fold_prepare_ahead))


class GrowthForecast:
    """The tokens of each thread's latest calls, and what they say about when the fold comes."""

    def __init__(self) -> None:
        self._sizes: OrderedDict[Key, list[int]] = OrderedDict()
        """The tokens of each thread's latest calls (the newest last)."""
        self._lock = threading.Lock()

    def record(self, key: Key, tokens: int) -> list[int]:
        """Note a call's size; the thread's latest sizes, this one last."""
        with self._lock:
            sizes = self._sizes.pop(key, [])
            sizes = [*sizes[-GROWTH_CALLS:], tokens]
            self._sizes[key] = sizes
            while len(self._sizes) > MAX_THREADS:
                self._sizes.popitem(last=False)
        return sizes

    def sizes(self, key: Key) -> list[int]:
        with self._lock:
            return list(self._sizes.get(key, []))

    @staticmethod
    def reaches(budget: CallBudget, sizes: list[int], calls: int, *, largest: bool) -> bool:
        """Whether `calls` more calls, each growing by the mean (or the `largest`) recent growth, reach the fold."""
        growth = [later - earlier for earlier, later in itertools.pairwise(sizes) if later > earlier]
        if not growth:  # nothing seen grow yet (a new process): assume the fold may be next
            return True
        step = max(growth) if largest else sum(growth) / len(growth)
        return budget.used + calls * step >= budget.policy.fold_threshold(budget.window.tokens)


__all__ = [
    "DRAFT_LOOKAHEAD_CALLS",
    "GROWTH_CALLS",
    "LOOKAHEAD_CALLS",
    "GrowthForecast",
    "Key",
    "prepare_threshold",
]
