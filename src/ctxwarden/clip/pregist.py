"""Gists made ahead, in a background thread, for the results the cost-first mask or a clearing batch hides next.

A mask advance hides the results of `MASK_STEP_FACTOR * mask_after_turns` turns at once,
and each needs its gist (about a millisecond apiece on a long thread): made on the call
that advances, they were that call's whole cost above the median. Which results an advance
takes is known long before it — every result older than the newest `mask_after_turns`
turns that the mask does not cover yet — and a gist depends only on the result and on what
the thread showed before it, which no later message changes. So each call hands the ones
not made yet to a background thread, which makes them while the model answers, and the
advance finds them made. A clearing batch of the default preset is the same case: it takes
a few dozen milliseconds of gists on a long session, and the results it takes (superseded
ones, then the oldest) are known several calls before the view reaches `clear_at`, so once
a call is halfway there they are handed over too, and again near the end of the way
(`PREPARE_STAGES`: results that arrived since, or whose details showed again, may come
first by then). Each gist's placeholder is rendered and counted there too, so the call
that hides the result neither renders nor tokenizes it. One not ready in time is made on
the call, as before: the same bytes either way (`core.gist` is deterministic, and so is the
placeholder). One thread serves a layer's calls; it ends after `LINGER` seconds without
work, and it waits while a call is being shaped (`core.foreground`), one gist at a time.

The thread's token ledger is shared with the calls: the background thread copies what it
needs of it (how often each of a result's tokens was shown before it) under the ledger's
lock, which its `sync` holds too, so a call never waits on a gist being made. The gists
are memory only, held weakly by the result's identity (`ObjectCache`, at most
`MAX_PREGISTS`), and checked on use against the budget, the result's count and its
position in the thread they were made for.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, ToolMessage

from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.ledger import TokenLedger
from ctxwarden.clip.mask import upcoming
from ctxwarden.clip.placeholders import result_placeholder
from ctxwarden.core.caches import ObjectCache
from ctxwarden.core.foreground import FOREGROUND
from ctxwarden.core.gist import Gist, Seen, gist, gist_budget
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import TOKEN, text_of

log = logging.getLogger(__name__)

MAX_PREGISTS = 1_024
"""Gists kept ahead at most (a mask advance takes a few; past it the oldest quarter is dropped)."""

PREGIST_DELAY = 0.005
"""Seconds the background thread waits once work is handed over to an idle thread: the call that hands it over has its
own work to finish first (both need the interpreter), and the gists are needed only on a later call. A list that
replaces the one being made is taken up at once."""

FOREGROUND_WAIT = 0.05
"""Seconds the background thread waits, before each gist, for the calls being shaped to finish (`core.foreground`)."""

LINGER = 2.0
"""Seconds an idle background thread waits for more work before it ends: starting a thread costs a call about 0.1 ms,
so one thread serves the calls of a run."""

PREPARE_STAGES = (0.5, 0.85)
"""Clearing batches are made ahead too: the first call past each of these shares of the way from `clear_to` to
`clear_at` hands over the results the next batch is likely to take (the view grows by a turn or so per call), and
every later call the results that arrived since: a batch that goes down to `clear_to` can reach the step just before
it."""

BATCH_AHEAD = 1.5
"""Batches' worth of results prepared: a batch frees what brings the call from where it is down to `clear_to`, more
than `clear_at - clear_to` when a large result pushed the call past `clear_at`."""

Measure = Callable[[BaseMessage], int]
"""Counts a placeholder from the background thread (`TokenMeter.count_apart`)."""

Job = tuple[ToolMessage, int, int]
"""A result, its gist budget and its own count, in tokens."""


@dataclass(frozen=True, slots=True)
class MadeAhead:
    """A result's gist, its placeholder and the placeholder's count, for the result at `position` of its thread."""

    budget: int
    tokens: int
    position: int
    gist: Gist
    placeholder: ToolMessage
    placeholder_tokens: int


class Pregists:
    """The gists made ahead for one clearing layer (see the module)."""

    __slots__ = ("_ending", "_idle", "_made", "_pending", "_wake", "_worker")

    def __init__(self) -> None:
        self._made: ObjectCache[MadeAhead] = ObjectCache(MAX_PREGISTS)
        self._pending: tuple[TokenLedger, list[BaseMessage], list[Job], Callable[[str], int], Measure] | None = None
        self._wake = threading.Condition()
        self._idle = threading.Event()
        self._idle.set()
        self._worker: threading.Thread | None = None
        self._ending = False

    def standing(
        self, message: BaseMessage, budget: int, tokens: int, thread: Sequence[BaseMessage]
    ) -> MadeAhead | None:
        """What was made ahead for `message`, if it still stands where it stood in `thread` when it was made: the
        lines before it are the same, so the gist is too, and the call need not index the thread to know."""
        hit = self._made.get(message)
        if hit is None or hit.budget != budget or hit.tokens != tokens:
            return None
        return hit if hit.position < len(thread) and thread[hit.position] is message else None

    def ahead(
        self,
        index: ThreadIndex,
        hidden: Set[str],
        turns: int,
        window: int | None,
        batch: Callable[[], Sequence[tuple[str, str, float]]],
        *,
        boundary: object,
        stage: int,
        known: Callable[[Job], bool] | None = None,
    ) -> tuple[list[Job], list[Job]]:
        """What is wanted ahead on this call, and what of it is still to make (not made, nor `known` elsewhere): on a
        cost-first thread, the next mask advance's gists (every call); else, the next clearing batch's, once per
        `boundary` (a batch changes it) and `stage` of the way to it (see `prepare_stage`): the first of the `batch`
        candidates, in its order, until they free `BATCH_AHEAD` batches' worth."""
        if index.policy.mask_after_turns is not None:
            positions = [index.result_at.get(call_id) for call_id in upcoming(index, turns) if call_id not in hidden]
            wanted = self._wanted(index, [p for p in positions if p is not None], window)
        else:
            wanted = self._batch_ahead(index, window, batch, boundary, stage)
        return wanted, [job for job in wanted if not self._is_made(*job) and not (known is not None and known(job))]

    def _batch_ahead(
        self,
        index: ThreadIndex,
        window: int | None,
        batch: Callable[[], Sequence[tuple[str, str, float]]],
        boundary: object,
        stage: int,
    ) -> list[Job]:
        prepared = index.memo.get("prepared")
        if not stage or window is None:
            return []
        if prepared is not None and prepared[0] is boundary and prepared[1] >= stage:
            # and the results that arrived since: a batch reaching down to `clear_to` may take them before another
            # stage comes (the whole list stays wanted, so the thread's state keeps carrying what was made of it)
            arrived = itertools.takewhile(lambda r: r.position >= prepared[2], reversed(index.results))
            wanted: list[Job] = [*prepared[3], *self._wanted(index, [r.position for r in arrived][::-1], window)]
            index.memo["prepared"] = (boundary, prepared[1], len(index.messages), wanted)
            return wanted
        span = BATCH_AHEAD * window * (index.policy.clear_at - index.policy.clear_to)
        freed, positions = 0.0, []
        for kind, call_id, saving in batch():
            if freed >= span:
                break
            freed += saving
            if kind == "result" and call_id in index.result_at:
                positions.append(index.result_at[call_id])
        wanted = self._wanted(index, positions, window)
        index.memo["prepared"] = (boundary, stage, len(index.messages), wanted)
        return wanted

    def _wanted(self, index: ThreadIndex, positions: Sequence[int], window: int | None) -> list[Job]:
        """The results at `positions` that get a gist for a model of `window` tokens, with its budget."""
        jobs: list[Job] = []
        for position in positions:
            message = index.messages[position]
            if isinstance(message, ToolMessage):
                tokens = index.meter.message_tokens(message)
                budget = gist_budget(index.policy, window, tokens)
                if budget > 0:
                    jobs.append((message, budget, tokens))
        return jobs

    def hand_over(
        self,
        ledger: TokenLedger,
        thread: Sequence[BaseMessage],
        jobs: list[Job],
        counter: Callable[[str], int],
        measure: Measure,
    ) -> None:
        """Have the gists of `jobs` made in the background, their lines counted by `counter` and their placeholders by
        `measure`. Only the latest hand-over is kept: each call's jobs hold every one of the call before that was not
        made yet. The list being made gives way to it between two gists: what it still held is either in the newer
        list or hidden since, made on the call (as the first advance after a resume makes its own)."""
        if not jobs:
            return
        with self._wake:
            self._pending = (ledger, list(thread), jobs, counter, measure)
            self._idle.clear()
            if self._worker is not None and self._worker.is_alive() and not self._ending:
                self._wake.notify()
                return
            self._ending = False
            # a fresh context: the work belongs to no step of the run
            self._worker = threading.Thread(
                target=contextvars.Context().run, args=(self._run,), name="ctxwarden-pregist", daemon=True
            )
            self._worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every gist handed over is made; whether they are."""
        return self._idle.wait(timeout)

    def _run(self) -> None:
        gave_way = False
        while True:
            with self._wake:
                if self._pending is None:
                    self._idle.set()
                    self._wake.wait(LINGER)
                    if self._pending is None:
                        self._ending = True  # under the lock: a hand-over from now on starts another thread
                        return
                work, self._pending = self._pending, None
            if not gave_way:  # a list taken over from the one being made goes on at once: one call adds one result,
                time.sleep(PREGIST_DELAY)  # so a pause at every call would let the backlog of a resume stand
            try:
                gave_way = self._make(*work)
            except Exception:  # a gist not made ahead is made on the call that needs it
                gave_way = False
                log.debug("making gists ahead failed", exc_info=True)

    def _make(
        self,
        ledger: TokenLedger,
        thread: list[BaseMessage],
        jobs: list[Job],
        counter: Callable[[str], int],
        measure: Measure,
    ) -> bool:
        """Make the gists of `jobs`; whether it gave way to a newer hand-over before the end."""
        for message, budget, tokens in jobs:
            FOREGROUND.wait_idle(FOREGROUND_WAIT)
            if ledger.size < len(thread):  # a call may have brought it further already: never back
                ledger.sync(thread)  # a whole thread's on a resume: calls may have started meanwhile
                FOREGROUND.wait_idle(FOREGROUND_WAIT)
            if self._pending is not None:  # a newer hand-over holds every job of this one still needed: on to it
                return True
            if self._is_made(message, budget, tokens):  # made before this hand-over was taken
                continue
            text = text_of(message)
            with ledger.lock:
                position = ledger.position(message)
                if position is None:
                    continue
                seen = ledger.seen_before(position)
                counts = {token: seen(token) for line in text.splitlines() for token in TOKEN.findall(line)}
            made = gist(text, budget, counter, _seen_in(counts))
            placeholder = result_placeholder(message, tokens, made)
            self._made.put(message, MadeAhead(budget, tokens, position, made, placeholder, measure(placeholder)))
        return False

    def _is_made(self, message: BaseMessage, budget: int, tokens: int) -> bool:
        hit = self._made.get(message)
        return hit is not None and hit.budget == budget and hit.tokens == tokens


def _seen_in(counts: dict[str, int]) -> Seen:
    return lambda token: counts.get(token, 0)


def prepare_at(policy: ContextPolicy, window: int, stage: int = 0) -> int:
    """Tokens past which a call prepares the next clearing batch's gists, at `stage` (`PREPARE_STAGES`)."""
    return int(window * (policy.clear_to + (policy.clear_at - policy.clear_to) * PREPARE_STAGES[stage]))


def prepare_stage(policy: ContextPolicy, window: int, used: int) -> int:
    """How many of the `PREPARE_STAGES` a call of `used` tokens is past (0: no batch near)."""
    return sum(used > prepare_at(policy, window, stage) for stage in range(len(PREPARE_STAGES)))


__all__ = [
    "MAX_PREGISTS",
    "PREPARE_STAGES",
    "Job",
    "MadeAhead",
    "Measure",
    "Pregists",
    "prepare_at",
    "prepare_stage",
]
