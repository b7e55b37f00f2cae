"""One fold, start to finish: plan the cut, write the history, summarize, build the new view.

Shared by the automatic fold (a layer, on every call past the threshold) and `compact()`
(on demand). Planning and finishing are pure; only writing the history file and asking
the summarizer touch the outside, in sync and async twins. The pure parts that cost the
most — the summarizer prompt and the facts section — are separate steps (`prompt`,
`gathered`), so a fold prepared ahead has them made in the background
(`ctxwarden.fold.prepare`, `ctxwarden.fold.draft`) and only checks and applies them.

The summarizer runs inside the agent's model step, so LangGraph's `stream_mode="messages"`
would hand its tokens to the user as if the agent said them. Like langchain's own
summarization, the call is tagged `nostream` (and marked `lc_source: summarization`), so
only the agent's replies stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.constants import TAG_NOSTREAM

from ctxwarden.core.io import Steps, arun, run
from ctxwarden.core.layers import PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.window import model_name, resolve_window
from ctxwarden.errors import WindowUnknownError
from ctxwarden.fold.cut import choose_cut
from ctxwarden.fold.facts import Facts, gather, gist_lines, quoted, render, strip_facts
from ctxwarden.fold.fit import facts_within, summary_room, words_within
from ctxwarden.fold.history import appending, continued_path, history_path
from ctxwarden.fold.in_place import SentCall, fold_request
from ctxwarden.fold.pin import pinned_task
from ctxwarden.fold.plan import FoldInput, FoldOutcome, FoldPlan, Gathered
from ctxwarden.fold.state import (
    FOLD_STATE_KEY,
    FoldRecord,
    Folds,
    covered_up_to,
    is_summary,
    kept_ahead,
    summary_message,
)
from ctxwarden.fold.summarize import Summary, bounded_summary, prompt_for, summarizing
from ctxwarden.fold.transcript import history_section
from ctxwarden.fold.user_quotes import quoted_users

CHARS_PER_TOKEN = 4
"""For the facts cap: a share of the window in tokens, spent in characters."""

IN_PLACE_ALLOWANCE = 600
"""Tokens an in-place summarizer request adds to its call (the instruction): a call with less room left in its
window asks with the transcript instead."""

DETERMINISTIC = "deterministic"
"""Pass as the summarizer to build summaries without a model."""


class Folder:
    """Folds older turns into one cumulative, structured summary."""

    def __init__(self, policy: ContextPolicy, meter: TokenMeter, backend: Any, summarizer: Any = None) -> None:
        self.policy, self.meter, self.backend, self.summarizer = policy, meter, backend, summarizer

    def start(self, view: Sequence[BaseMessage], window: int) -> int:
        """Index of the first message of `view` a fold may take: after the summary, and after the thread's first user
        message, pinned ahead of every summary, whole or in part (`ctxwarden.fold.pin`)."""
        ahead = kept_ahead(view)
        if ahead or not view:
            return ahead
        return 1 if isinstance(view[0], HumanMessage) and view[0].id else 0

    def pinned(self, view: Sequence[BaseMessage], window: int) -> tuple[BaseMessage, ...]:
        """The message a fold of `view` shows ahead of its summary (none, or the thread's first user message)."""
        return tuple(m for m in view[: self.start(view, window)] if not is_summary(m))

    def plan(self, given: FoldInput) -> FoldPlan | None:
        keep = 0 if given.forced else int(given.window * self.policy.fold_keep_share)
        cut = choose_cut(given.view, self.meter, keep, self.start(given.view, given.window))
        return None if cut is None else self.plan_at(given, cut)

    def plan_at(self, given: FoldInput, cut: int, *, prompt_wanted: bool = True) -> FoldPlan:
        """The fold of everything before `given.view[cut]` (`prompt_wanted=False`: no summarizer prompt is built)."""
        start = self.start(given.view, given.window)
        folded = list(given.view[start:cut])
        by_id = {m.id: m for m in given.thread}
        folded_raw = [by_id.get(m.id, m) for m in folded]
        number = (given.folds.last.number + 1) if given.folds.last else 1
        summarizer = self.summarizer if self.summarizer is not None else given.fallback_model
        cap = (int(given.window * self.policy.fold_facts_share), self.meter.counter)
        pinned, lines = pinned_task(self.pinned(given.view, given.window), by_id, given.prior, folded_raw, cap)
        prompt = None
        if prompt_wanted and asks_model(summarizer) and not self.in_place(summarizer, given, given.sent):
            words = self._words(given, summary_room(given, pinned, cut, self.meter))
            prompt = self._bounded_prompt(summarizer, _previous_summary(given), folded, given, words)
        return FoldPlan(
            number=number,
            cut=cut,
            folded=folded,
            folded_raw=folded_raw,
            path=continued_path(_last_written(given.folds), given.thread_id, given.namespace, given.thread),
            section=history_section(number, given.thread_id, folded_raw),
            summarizer=summarizer,
            prompt=prompt,
            pinned=pinned,
            task_lines=lines,
        )

    def in_place(self, summarizer: Any, given: FoldInput, sent: SentCall | None) -> bool:
        """Whether the summary is asked for by continuing the call `sent`: the summarizer is the model it calls, it
        takes the call's tools, and the call leaves room for the instruction (`ctxwarden.fold.in_place`)."""
        return (
            self.policy.summarize_in_place
            and self.summarizer is None
            and sent is not None
            and summarizer is sent.model
            and given.tokens_before + IN_PLACE_ALLOWANCE <= given.window
            and sent.bound is not None
        )

    def request(self, plan: FoldPlan, given: FoldInput, sent: SentCall | None) -> tuple[Any, str | list[BaseMessage]]:
        """The model to ask and what to ask it: the call `sent` continued in place when it can be, else the transcript
        prompt (built here for a plan made with `prompt_wanted=False`, in the background)."""
        words = self._words(given, summary_room(given, plan.pinned, plan.cut, self.meter))
        if sent is not None and self.in_place(plan.summarizer, given, sent):
            asked = fold_request(sent, budget_words=words, focus=given.instructions)
            return unstreamed(sent.bound), asked
        prompt = plan.prompt or self._bounded_prompt(
            plan.summarizer, _previous_summary(given), plan.folded, given, words
        )
        return unstreamed(plan.summarizer), prompt

    def gathered(self, folded_raw: Sequence[BaseMessage], given: FoldInput) -> Gathered:
        """The facts of a fold of `folded_raw` after `given.prior`: its facts extended, and rendered (a long
        user message quoted in part, `ctxwarden.fold.user_quotes`)."""
        previous = Facts.from_dict(given.prior.facts if given.prior else None)
        cap = int(given.window * self.policy.fold_facts_share)
        quoting = quoted_users(folded_raw, given.view, cap, self.meter)
        facts = gather(previous, quoting, gist_lines(self.policy, given.window, self.meter))
        cap *= CHARS_PER_TOKEN
        kept = quoted(facts, max_chars=cap)
        return Gathered(kept, render(kept, max_chars=cap))

    def fold(self, given: FoldInput) -> FoldOutcome | None:
        return run(self.folding(given))

    async def afold(self, given: FoldInput) -> FoldOutcome | None:
        return await arun(self.folding(given))

    def folding(self, given: FoldInput) -> Steps[FoldOutcome | None]:
        """The fold of `given`: plan, summarize, write the history, build the view (the core of `fold`/`afold`)."""
        plan = self.plan(given)
        if plan is None:
            return None
        summary = yield from self._summarizing(plan, given)
        return (yield from self.applying(plan, given, summary))

    def apply(
        self, plan: FoldPlan, given: FoldInput, summary: Summary, gathered: Gathered | None = None
    ) -> FoldOutcome:
        """Finish the fold `plan` with a summary (and facts, if given) made beforehand: write the history, build the
        view."""
        return run(self.applying(plan, given, summary, gathered))

    async def aapply(
        self, plan: FoldPlan, given: FoldInput, summary: Summary, gathered: Gathered | None = None
    ) -> FoldOutcome:
        return await arun(self.applying(plan, given, summary, gathered))

    def applying(
        self, plan: FoldPlan, given: FoldInput, summary: Summary, gathered: Gathered | None = None
    ) -> Steps[FoldOutcome]:
        """The core of `apply`/`aapply` (`gathered`: the facts of exactly `plan.folded_raw` after `given.folds`, else
        gathered here). Only a fold that is made writes its history, before its view is returned."""
        gathered = gathered if gathered is not None else self.gathered(plan.folded_raw, given)
        outcome = self._finish(plan, given, summary, None, gathered)
        if outcome.record is None:  # held
            return outcome
        base = history_path(given.thread_id, given.namespace, given.thread)
        path, error = yield from appending(self.backend, plan.path, plan.number, plan.section, base)
        if error is None:  # written, to the branch's own file when another branch's fold has the number
            return (
                outcome if path == plan.path else self._finish(replace(plan, path=path), given, summary, None, gathered)
            )
        if not given.forced:
            return self._write_failed(plan, error)
        return self._finish(plan, given, summary, error, gathered)

    # --- summaries --------------------------------------------------------------
    def _summarizing(self, plan: FoldPlan, given: FoldInput) -> Steps[Summary]:
        if not asks_model(plan.summarizer):
            return self.deterministic(plan, given, fallback=False)
        try:
            model, asked = self.request(plan, given, given.sent)
            return (
                yield from summarizing(
                    model,
                    asked,
                    retries=self.policy.summarizer_retries,
                    timeout=self.policy.summarizer_timeout,
                )
            )
        except Exception as exc:  # the run goes on with the deterministic summary
            return self.deterministic(plan, given, fallback=True, error=f"{type(exc).__name__}: {exc}")

    def deterministic(self, plan: FoldPlan, given: FoldInput, *, fallback: bool, error: str | None = None) -> Summary:
        """The summary built without a model, as long as one asked of a model (`fold.summarize.bounded_summary`)."""
        words = self._words(given, summary_room(given, plan.pinned, plan.cut, self.meter))
        text = bounded_summary(_previous_summary(given), plan.folded_raw, words, self.meter.counter)
        return Summary(text, DETERMINISTIC, fallback, error)

    def _bounded_prompt(
        self, summarizer: Any, previous: str | None, folded: list[BaseMessage], given: FoldInput, words: int
    ) -> str:
        """The summarizer prompt, cut per message until it fits half of the summarizer's own window."""
        try:
            budget = resolve_window(summarizer).tokens // 2
        except WindowUnknownError:
            budget = given.window // 2
        per_message = 6_000
        while True:
            prompt = prompt_for(
                previous, folded, budget_words=words, focus=given.instructions, max_chars_per_message=per_message
            )
            if self.meter.counter(prompt) <= budget or per_message <= 200:
                return prompt
            per_message //= 2

    def _words(self, given: FoldInput, room: int) -> int:
        """The summary's length asked for, in words: about what the fold keeps verbatim, and no more than half the
        `room` the fold leaves it (`fold.fit`)."""
        return words_within(max(150, min(1_000, int(given.window * self.policy.fold_keep_share * 0.6))), room)

    # --- outcomes ---------------------------------------------------------------
    def summary_of(
        self, plan: FoldPlan, given: FoldInput, summary: Summary, gathered: Gathered, write_error: str | None = None
    ) -> FoldRecord:
        """The fold's record before it is measured (`tokens_after` 0): its summary message is the one the view shows."""
        return FoldRecord(
            plan.number,
            str(plan.folded[-1].id),
            f"{gathered.quoted}\n\n{strip_facts(summary.text)}",
            None if write_error else plan.path,
            given.tokens_before,
            0,
            summary.summarizer,
            summary.fallback,
            pinned=str(plan.pinned[0].id) if plan.pinned else None,
            task_lines=plan.task_lines,
        )

    def _finish(
        self,
        plan: FoldPlan,
        given: FoldInput,
        summary: Summary,
        write_error: str | None,
        gathered: Gathered | None = None,
    ) -> FoldOutcome:
        gathered = gathered if gathered is not None else self.gathered(plan.folded_raw, given)
        provisional = self.summary_of(plan, given, summary, gathered, write_error)
        over = self.meter.message_tokens(summary_message(provisional)) - summary_room(
            given, plan.pinned, plan.cut, self.meter
        )
        if over > 0:  # the call after the fold would be past the window: fewer facts (`fold.fit`)
            gathered = facts_within(gathered, over, self.meter.counter)
            provisional = self.summary_of(plan, given, summary, gathered, write_error)
        facts = gathered.facts
        at = len(plan.pinned)  # where the summary goes
        view = [*plan.pinned, summary_message(provisional), *given.view[plan.cut :]]
        after = round((given.fixed_tokens + self.meter.messages_tokens(view)) * given.factor)
        record = FoldRecord(
            provisional.number,
            provisional.upto,
            provisional.summary,
            provisional.path,
            given.tokens_before,
            after,
            provisional.summarizer,
            provisional.fallback,
            facts.to_dict(),
            provisional.pinned,
            provisional.task_lines,
            covered_up_to(given.thread, provisional.upto),
        )
        view[at] = summary_message(record)
        saved = given.tokens_before - after
        regrow = self.policy.fold_regrow(given.window)
        if saved <= 0:  # the summary weighs what it replaces: the view stays, and the next fold waits for growth
            hold = given.folds.hold_until if given.forced else given.tokens_before + regrow
            held = {"fold": record.number, "tokens_before": given.tokens_before, "tokens_after": after}
            state = {FOLD_STATE_KEY: Folds(given.folds.records, hold_until=hold, requested=None).to_state()}
            return FoldOutcome([], state, [("fold_held", {**held, "freed": saved, "hold_until": hold}, None)], None)
        hold = None
        if saved < self.policy.fold_min_saving * given.tokens_before:
            hold = after + regrow
        if after + regrow > self.policy.fold_threshold(given.window):  # little room to grow: let the thread grow first
            hold = max(hold or 0, given.tokens_before + regrow)
        folds = Folds((*given.folds.records, record), hold_until=hold, requested=None)
        summary_tokens = self.meter.message_tokens(view[at])
        payload = {
            "ok": True,
            "fold": record.number,
            "tokens_before": given.tokens_before,
            "tokens_after": after,
            "freed": saved,
            "path": record.path,
            "summarizer": summary.summarizer,
            "fallback": summary.fallback,
            "error": summary.error or write_error,
            "folded_messages": len(plan.folded),
            "summary_tokens": summary_tokens,
            "forced": given.forced,
            "instructions": given.instructions,
            "hold_until": hold,
        }
        events: list[PendingEvent] = [("context_compaction", payload, None)]
        if summary.usage or summary.summarizer != DETERMINISTIC:
            events.append(("model_usage", _summarizer_usage(summary, plan, self.meter), summary.summarizer))
        return FoldOutcome(view, {FOLD_STATE_KEY: folds.to_state()}, events, record)

    @staticmethod
    def _write_failed(plan: FoldPlan, error: str) -> FoldOutcome:
        payload = {"ok": False, "fold": plan.number, "path": plan.path, "error": error}
        return FoldOutcome([], None, [("context_compaction", payload, None)], None)


def asks_model(summarizer: Any) -> bool:
    """Whether a fold with `summarizer` asks a model (`None` and `"deterministic"` build the summary without one)."""
    return summarizer is not None and summarizer != DETERMINISTIC


def _last_written(folds: Folds) -> str | None:
    """The history file the thread's last written fold went to (a fold whose write failed records none)."""
    return next((r.path for r in reversed(folds.records) if r.path), None)


def _previous_summary(given: FoldInput) -> str | None:
    """The last fold's summary without its facts: they are carried in the record and quoted again by every fold,
    so the summarizer is not billed for reading them."""
    return strip_facts(given.prior.summary) if given.prior else None


SUMMARY_CONFIG: dict[str, Any] = {"tags": [TAG_NOSTREAM], "metadata": {"lc_source": "summarization"}}
"""The run config of every summarizer call: kept out of the message stream, marked as a summary."""


def unstreamed(model: Any) -> Any:
    """`model` with `SUMMARY_CONFIG` applied to every call (a model without `with_config` is used as it is)."""
    with_config = getattr(model, "with_config", None)
    return with_config(**SUMMARY_CONFIG) if callable(with_config) else model


def _summarizer_usage(summary: Summary, plan: FoldPlan, meter: TokenMeter) -> Mapping[str, Any]:
    usage = summary.usage or {}
    estimated = not usage.get("input_tokens")
    raw_details = usage.get("input_token_details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    return {
        "role": "summarizer",
        "input_tokens": usage.get("input_tokens") or meter.counter(plan.prompt or ""),
        "output_tokens": usage.get("output_tokens") or meter.counter(summary.text),
        "cached_input_tokens": (details.get("cache_read") or 0) if isinstance(details, dict) else 0,
        "estimated": estimated,
        "model": model_name(plan.summarizer) if plan.summarizer not in (None, DETERMINISTIC) else DETERMINISTIC,
    }


__all__ = [
    "DETERMINISTIC",
    "SUMMARY_CONFIG",
    "FoldInput",
    "FoldOutcome",
    "FoldPlan",
    "Folder",
    "Gathered",
    "asks_model",
    "unstreamed",
]
