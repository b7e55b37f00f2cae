"""Folds off the critical path: the summary is written in the background before the fold is due.

A fold waits for a summarizer model, and the user waits with it: tens of seconds on a
real model, on the call that happened to cross `summarize_at`. So once a call passes a
pre-fold point (`summarize_at - fold_prepare_ahead`), the summary of the turns the fold
would take is asked for in a background thread, while the agent goes on working. When
the fold fires it applies that summary at once: it writes the history file, recomputes
the facts section for the cut it applies (`Folder.apply`), and builds the view — no
summarizer call on the critical path.

Past that point a summary is asked for only when the fold looks near: when the call's
recent growth, kept up for `LOOKAHEAD_CALLS` more calls (`ctxwarden.fold.forecast`), would reach `summarize_at`
(a process with no growth seen yet prepares at once). A summary prepared for a session
that ends, or a batch of clearing that brings the call back down, is paid for and never
used, so preparing at the first call past the point would cost more than it saves.

A preparation is only a summary kept in memory, tied to exactly what it summarized: the
fold before it and the id and content of every message it covers. It is applied only
when all of that is still what the thread holds; otherwise it is discarded (and redone on
the next call past the pre-fold point), never applied stale. The thread grows while the
summary is written, so the fold cuts where a fold made now would, and the turns between
the prepared part and that cut are added to the summary by the deterministic summarizer
(the facts section, for the whole cut, quotes them as it quotes the rest); the next fold's
summarizer, given this summary, rewrites it whole. A fold asked for with a focus
summarizes on the spot, with the focus; one asked for without, or forced by an overflow,
applies a prepared summary too. Nothing is written until the
fold fires, so a process that dies during a preparation loses nothing: the next process
folds as if it had never started.

What the call that starts a preparation does is only to choose the cut: the summarizer
prompt (a transcript of every folded message) is built in the background thread that
asks the summarizer. And on the calls just before the fold while a preparation is
kept, the rest of the fold's work — the facts section for each cut the next call could
make, the turns added after the summary, the summary message — is drafted in the
background too (`ctxwarden.fold.draft`), so the call that folds checks the draft of the
cut it makes and applies it: it writes the history file, and little else.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from langchain.agents.middleware.types import ModelRequest

from ctxwarden.core.io import Call, Steps, arun, run
from ctxwarden.core.layers import CallBudget, PendingEvent
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stream import emit
from ctxwarden.fold.cut import choose_cut
from ctxwarden.fold.draft import EXTENSION_HEADING, Drafts, extended_by, extension, fingerprint
from ctxwarden.fold.engine import (
    Folder,
    FoldInput,
    FoldOutcome,
    FoldPlan,
    Gathered,
    asks_model,
)
from ctxwarden.fold.forecast import DRAFT_LOOKAHEAD_CALLS, LOOKAHEAD_CALLS, GrowthForecast, Key, prepare_threshold
from ctxwarden.fold.preparation import Preparation, prepared_cut, previous_fold
from ctxwarden.fold.state import FOLD_STATE_KEY, Folds
from ctxwarden.fold.summarize import Summary, model_summary

ANSWER_WAIT = 600.0
"""Seconds an in-place preparation waits for the call that started it to be answered; past it, the call counts as
failed and the preparation is dropped (the fold, if it comes, asks then)."""

MAX_PREPARED = 256
"""Threads (and subagent namespaces) with a preparation kept at once; the oldest is dropped past it."""


class Preparer:
    """Prepares the next fold's summary in the background and applies it when the fold fires (see the module)."""

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self._prepared: OrderedDict[Key, Preparation] = OrderedDict()
        self.forecast = GrowthForecast()
        self._lock = threading.Lock()

    def due(self, key: Key, budget: CallBudget) -> bool:
        """Whether the next fold's summary should be prepared on this call (see the module docstring).

        Every call that does not fold reports its size here, so the forecast follows the thread.
        """
        threshold = prepare_threshold(budget)
        if threshold is None:
            return False
        sizes = self.forecast.record(key, budget.used)
        return budget.used > threshold and self.forecast.reaches(budget, sizes, LOOKAHEAD_CALLS, largest=False)

    def drafting(self, key: Key, budget: CallBudget) -> bool:
        """Whether the next fold's work should be drafted on this call (after `due`, which recorded its size): a
        preparation is kept and the fold could come within `DRAFT_LOOKAHEAD_CALLS` calls, each growing by as much as
        the most any recent call grew (or no growth was seen yet), or on the next call, by one tool result as large as
        arrives without being evicted (`evict_over`): a thread that grew little lately can still take one such step,
        and the fold it brings would do its bookkeeping on the call. Drafts for a fold further away would be made
        again before it, and each costs a pass over the folded turns."""
        threshold = prepare_threshold(budget)
        with self._lock:
            if threshold is None or budget.used <= threshold or key not in self._prepared:
                return False
        if budget.used + budget.evict_over >= budget.fold_at:
            return True
        sizes = self.forecast.sizes(key)
        return self.forecast.reaches(budget, sizes, DRAFT_LOOKAHEAD_CALLS, largest=True)

    def prepared(self, thread_id: str | None, namespace: str = "") -> Preparation | None:
        """The preparation kept for a thread (and namespace), if any."""
        with self._lock:
            return self._prepared.get((thread_id, namespace))

    # --- ahead of the fold ------------------------------------------------------------
    def ahead(self, given: FoldInput, *, start: bool = True, draft: bool = True) -> list[PendingEvent]:
        """On a call past the pre-fold point: keep a fresh preparation (drafting the fold's work for the next call when
        `draft`), or start one when `start` (discarding a stale one)."""
        key = (given.thread_id, given.namespace)
        events: list[PendingEvent] = []
        with self._lock:
            current = self._prepared.get(key)
        if current is not None and current.unanswered:
            events += self._discard(key, current, "the call that started it was not answered")
            current = None
        if current is not None:
            if prepared_cut(current, given, self.folder.start(given.view, given.window)) is not None:
                if draft:
                    current.drafts.start(self.folder, given, current.future)
                return events
            events += self._discard(key, current, "the thread changed under it")
        if not start:
            return events
        keep = int(given.window * self.folder.policy.fold_keep_share)
        cut = choose_cut(given.view, self.folder.meter, keep, self.folder.start(given.view, given.window))
        if cut is None:  # nothing to fold yet
            return events
        plan = self.folder.plan_at(given, cut, prompt_wanted=False)  # the prompt is built in the background
        if not asks_model(plan.summarizer):  # a deterministic summary: nothing to wait for when the fold fires
            return events
        preparation = self._start(plan, given)
        with self._lock:
            self._prepared[key] = preparation
            self._prepared.move_to_end(key)
            while len(self._prepared) > MAX_PREPARED:
                self._prepared.popitem(last=False)[1].drop("too many threads prepared at once")
        payload = {"fold": plan.number, "folded_messages": len(plan.folded), "tokens": given.tokens_before}
        events.append(("fold_prepare", {**payload, "started": True}, None))
        return events

    def _start(self, plan: FoldPlan, given: FoldInput) -> Preparation:
        future: Future[Summary] = Future()
        folder, policy = self.folder, self.folder.policy
        in_place = folder.in_place(plan.summarizer, given, given.sent)
        summarized = len(given.view) - folder.start(given.view, given.window) if in_place else len(plan.folded_raw)
        preparation = Preparation(
            number=plan.number,
            previous=previous_fold(given.folds),
            folded=tuple((m.id, fingerprint(m)) for m in plan.folded_raw),
            summarizer=plan.summarizer,
            future=future,
            started=time.monotonic(),
            drafts=Drafts(len(plan.folded_raw), summarized),
            sent=Future() if in_place else None,
        )

        def run() -> None:
            try:
                sent = None
                if preparation.sent is not None:  # the call, once answered
                    try:
                        sent = preparation.sent.result(timeout=ANSWER_WAIT)
                    except TimeoutError:
                        preparation.drop(f"its call was not answered within {ANSWER_WAIT:g} s")
                        raise
                model, asked = folder.request(plan, given, sent)  # built here, not on the call
                preparation.prompt_chars = len(asked) if isinstance(asked, str) else 0
                summary = model_summary(
                    model, asked, retries=policy.summarizer_retries, timeout=policy.summarizer_timeout
                )
            except BaseException as exc:  # handed to the fold, which falls back
                future.set_exception(exc)
            else:
                future.set_result(summary)

        # a fresh context: the summary belongs to no step of the run, and its tokens never reach the run's stream
        thread = threading.Thread(
            target=contextvars.Context().run, args=(run,), name="ctxwarden-fold-prepare", daemon=True
        )
        thread.start()
        return preparation

    def answered(self, key: Key, request: ModelRequest[Any]) -> None:
        """The call of `key` made as `request` was answered: a preparation it started that waits for it sends its
        in-place request now."""
        with self._lock:
            current = self._prepared.get(key)
        if current is not None:
            current.answer(request)

    def _discard(self, key: Key, preparation: Preparation, why: str) -> list[PendingEvent]:
        with self._lock:
            if self._prepared.get(key) is preparation:
                del self._prepared[key]
        preparation.drop(why)
        events: list[PendingEvent] = [("fold_prepare", {"fold": preparation.number, "discarded": why}, None)]
        if preparation.future.done() and preparation.future.exception() is None:
            events.append(_usage(preparation, preparation.future.result(), "discarded"))
        return events

    # --- when the fold fires ----------------------------------------------------------
    def _take(self, given: FoldInput) -> tuple[Preparation | None, int | None, list[PendingEvent]]:
        """The preparation to apply to this fold and its cut, or why there is none (as events)."""
        key = (given.thread_id, given.namespace)
        with self._lock:
            preparation = self._prepared.pop(key, None)
        if preparation is None:
            return None, None, []
        if given.instructions:  # the focus shapes the summary: it is written now, with it
            return None, None, self._discard(key, preparation, "this fold was asked for with a focus")
        if preparation.unanswered:
            return None, None, self._discard(key, preparation, "the call that started it was not answered")
        cut = prepared_cut(preparation, given, self.folder.start(given.view, given.window))
        if cut is None:
            return None, None, self._discard(key, preparation, "the thread changed under it")
        return preparation, cut, []

    def fold(self, given: FoldInput) -> FoldOutcome | None:
        """The fold of `given`: the prepared summary applied at once when there is a fresh one, else folded now."""
        return run(self._folding(given))

    async def afold(self, given: FoldInput) -> FoldOutcome | None:
        return await arun(self._folding(given))

    def _folding(self, given: FoldInput) -> Steps[FoldOutcome | None]:
        preparation, cut, events = self._take(given)
        start(given, prepared=preparation is not None)
        if preparation is None or cut is None:
            return _with(events, (yield from self.folder.folding(given)))
        future = preparation.future
        waited = time.monotonic()
        # written already, unless the fold came soon after the preparation
        outcome: Summary | BaseException = yield Call(lambda: _result(future), lambda: _aresult(future))
        wait_ms = (time.monotonic() - waited) * 1000
        plan, summary, gathered, after = self._settle(given, preparation, cut, outcome)
        if self._frees_too_little(given, after):
            with self._lock:  # kept for the fold the thread grows into
                self._prepared[(given.thread_id, given.namespace)] = preparation
            return _with(events, held(given, after, self.folder.policy))
        later = max(0, len(plan.folded) - preparation.drafts.summarized)
        applied = yield from self.folder.applying(plan, given, summary, gathered)
        return _marked(applied, events, wait_ms, later, drafted=gathered is not None)

    def _frees_too_little(self, given: FoldInput, after: int) -> bool:
        """Whether a fold that leaves the call at `after` tokens frees less than `fold_min_saving` of it, while no
        fold was asked for and the thread can still grow by `fold_regrow_share` of the window within it: on a small
        window the task, the tools and a summary can weigh about what the turns a fold would take do, and such a fold
        costs its rewrite and the turns' detail for nothing."""
        policy = self.folder.policy
        if given.forced or given.tokens_before + policy.fold_regrow(given.window) > given.window:
            return False
        return given.tokens_before - after < policy.fold_min_saving * given.tokens_before

    def _settle(
        self, given: FoldInput, preparation: Preparation, cut: int, outcome: Summary | BaseException
    ) -> tuple[FoldPlan, Summary, Gathered | None, int]:
        """The fold to apply: to the cut a fold would make now, the turns after the prepared ones added, with the
        facts drafted for exactly that cut if there is such a draft; and the tokens the call would have after it (the
        facts counted at their cap)."""
        meter, policy = self.folder.meter, self.folder.policy
        keep = 0 if given.forced else int(given.window * policy.fold_keep_share)
        now = choose_cut(given.view, meter, keep, self.folder.start(given.view, given.window))
        plan = self.folder.plan_at(given, max(cut, now or cut), prompt_wanted=False)
        draft = preparation.drafts.get(plan.folded_raw, given.window)
        if isinstance(outcome, Summary):
            tail = draft.extension if draft is not None else extension(plan.folded_raw[preparation.drafts.summarized :])
            summary = extended_by(outcome, tail)
        else:  # the summarizer failed: the deterministic summary, as a fold made now would fall back to
            summary = self.folder.deterministic(
                plan, given, fallback=True, error=f"{type(outcome).__name__}: {outcome}"
            )
        kept = meter.messages_tokens([*plan.pinned, *given.view[plan.cut :]])  # the pinned task stays too
        facts = int(given.window * policy.fold_facts_share)  # at its cap: the section is rendered by the fold
        after = round((given.fixed_tokens + kept + meter.counter(summary.text) + facts) * given.factor)
        return plan, summary, draft.gathered if draft is not None else None, after


def held(given: FoldInput, after: int, policy: ContextPolicy) -> FoldOutcome:
    """No fold on this call (`Preparer._frees_too_little`): the view stays as it is, and the next fold waits until the
    thread has grown by `fold_regrow_share` of the window, when the same summary takes more turns."""
    hold = given.tokens_before + policy.fold_regrow(given.window)
    folds = Folds(given.folds.records, hold_until=hold, requested=None)
    number = given.folds.last.number + 1 if given.folds.last else 1
    payload = {
        "fold": number,
        "tokens_before": given.tokens_before,
        "tokens_after": after,
        "freed": given.tokens_before - after,
        "hold_until": hold,
    }
    return FoldOutcome([], {FOLD_STATE_KEY: folds.to_state()}, [("fold_held", payload, None)], None)


def start(given: FoldInput, *, prepared: bool) -> None:
    """Tell a streaming client that a fold begins."""
    number = given.folds.last.number + 1 if given.folds.last else 1
    emit(
        "fold_start",
        {
            "fold": number,
            "tokens_before": given.tokens_before,
            "window": given.window,
            "prepared": prepared,
            "forced": given.forced,
        },
    )


def _result(future: Future[Summary]) -> Summary | BaseException:
    try:
        return future.result()
    except Exception as exc:  # handed to the fallback
        return exc


async def _aresult(future: Future[Summary]) -> Summary | BaseException:
    try:
        return await asyncio.wrap_future(future)
    except Exception as exc:  # handed to the fallback
        return exc


def _with(events: Sequence[PendingEvent], outcome: FoldOutcome | None) -> FoldOutcome | None:
    if not events:
        return outcome
    if outcome is None:  # nothing to fold after all; the events still go to the trace
        return FoldOutcome([], None, list(events), None)
    return FoldOutcome(outcome.view, outcome.state, [*events, *outcome.events], outcome.record)


def _marked(
    outcome: FoldOutcome, events: Sequence[PendingEvent], wait_ms: float, later: int, *, drafted: bool
) -> FoldOutcome:
    """`outcome` with its compaction event saying the summary was prepared, how long the fold waited for it (it was
    still being written), how many messages the thread gained meanwhile were folded with it, and whether its facts
    section was drafted ahead."""
    marked: list[PendingEvent] = list(events)
    for kind, payload, model in outcome.events:
        if kind == "context_compaction" and payload.get("ok"):
            payload = {
                **payload,
                "prepared": True,
                "prepare_wait_ms": round(wait_ms, 3),
                "prepared_extended": later,
                "drafted": drafted,
            }
        marked.append((kind, payload, model))
    return FoldOutcome(outcome.view, outcome.state, marked, outcome.record)


def _usage(preparation: Preparation, summary: Summary, why: str) -> PendingEvent:
    usage: Mapping[str, Any] = summary.usage or {}
    payload = {
        "role": "summarizer",
        "input_tokens": usage.get("input_tokens") or preparation.prompt_chars // 4,
        "output_tokens": usage.get("output_tokens") or len(summary.text) // 4,
        "cached_input_tokens": 0,
        "estimated": not usage.get("input_tokens"),
        "prepared": why,
    }
    return ("model_usage", payload, summary.summarizer)


__all__ = [
    "EXTENSION_HEADING",
    "MAX_PREPARED",
    "Preparation",
    "Preparer",
    "fingerprint",
    "prepared_cut",
    "previous_fold",
]
