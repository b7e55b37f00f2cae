"""Clearing: old tool results and large old tool-call arguments leave the model's view, in batches.

When a call would pass `clear_at` of the window, the oldest results (stale `read_file`
results first) and the large arguments of older calls are replaced by placeholders,
in one batch, until the call is down to `clear_to` (a batch too small to be worth a
cache miss waits, unless the call is past the fold threshold); the newest `keep_tool_results`
results and calls stay verbatim, and `clear_exclude_tools` are never touched. A call
whose every result is cleared leaves its text out too (`clip.placeholders`), and a result
no larger than its placeholder stays whole, so clearing it takes only that text. A task
far past its cap is shown in part by the first batch that can (`core.task`). The
batch's call ids are kept in private state: every later call replaces exactly those
again, with the same bytes, so consecutive calls share their prefix until the trigger
fires again (stock `ClearToolUsesEdit` clears one more result on every call, which
misses a provider's prompt cache every turn). Only the view changes: the checkpointed
messages stay whole, and `recall` returns any of them.

The cost-first preset (`mask_after_turns`) also masks every result older than the
newest N model turns, whenever that pays for its cache miss before clearing would
hide them anyway (`clip.mask`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections import OrderedDict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.clip.boundary import (
    CLIP_STATE_KEY,
    Boundary,
    ClipState,
    TaskCut,
    boundary_of,
    call_key,
    placeholder_key,
    remembered,
)
from ctxwarden.clip.candidates import Candidate, candidates, extend, hidden_by, may_be_worth_it, task_saving_of
from ctxwarden.clip.carried import NOTHING, Carried, Carrier, carried_in
from ctxwarden.clip.index import MAX_THREADS, ThreadIndex, result_saving
from ctxwarden.clip.ledger import ThreadLedgers, TokenLedger
from ctxwarden.clip.mask import (
    NO_MASK,
    Mask,
    advance_pays,
    due_turns,
    last_masked,
    mask_of,
    masked_turns,
)
from ctxwarden.clip.placeholders import clip_calls, result_placeholder
from ctxwarden.clip.pregist import MadeAhead, Pregists, prepare_at, prepare_stage
from ctxwarden.core.gist import Gist, gist, gist_budget, gist_of_lines, never_seen
from ctxwarden.core.layers import CallBudget, LayerEdit, PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.pasted import message_cuts, shown_message
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.runtime import thread_key
from ctxwarden.core.stamp import content_signature
from ctxwarden.core.task import shown_task, task_cut
from ctxwarden.core.text import text_of


@dataclass(slots=True)
class ClearLayer:
    """The clearing stage of the lifecycle (a `ContextLayer`).

    Per call it costs an identity check of the thread plus the messages added since the
    previous call: the thread's index (`clip.index`), its boundary, its mask and its view
    are extended, not rebuilt, and a deferred batch is weighed from the index's running total.
    """

    policy: ContextPolicy
    meter: TokenMeter
    name: str = "clear"
    _replacements: dict[int, tuple[BaseMessage, tuple[str, ...], BaseMessage, tuple[int, ...] | None]] = field(
        default_factory=dict
    )
    """By the original's id: the original, what hid it (`("result",)`, or `"args"` and the call ids), the placeholder
    and the lines it quotes (its gist's, or its clipped values'). One tuple per entry: a resumed cost-first thread
    makes thousands at once."""
    _stored: Boundary = field(default_factory=Boundary)
    """The boundary of the thread being shaped: its gist lines and placeholder counts."""
    _ledgers: ThreadLedgers = field(default_factory=lambda: ThreadLedgers(MAX_THREADS))
    _ledger: TokenLedger | None = None
    _thread: Sequence[BaseMessage] | None = None
    _line_tokens: dict[str, int] = field(default_factory=dict)
    _indexes: OrderedDict[str, ThreadIndex] = field(default_factory=OrderedDict)
    _window: int | None = None
    """The window of the model being called: `gist_window_share` caps a gist by it."""
    _pregists: Pregists = field(default_factory=Pregists)
    _carried: Carried = NOTHING
    """The gists made ahead that the thread being shaped carries (`clip.carried`)."""
    _carrier: Carrier = field(default_factory=Carrier)
    """The gists each call wanted made ahead, for `answered` to carry what was made of them."""

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        self._window = budget.window.tokens
        messages = request.messages
        raw = request.state.get(CLIP_STATE_KEY) if isinstance(request.state, dict) else None
        prepare = min(budget.clear_at, prepare_at(self.policy, budget.window.tokens))
        if not (raw or self.policy.mask_after_turns is not None or budget.used > prepare or budget.force):
            return None  # nothing cleared or masked, no batch near: the thread is not even indexed
        index = self._index(messages)
        boundary = boundary_of(index, request.state)
        self._stored = boundary
        turns = masked_turns(index, boundary.masked_turns, boundary.masked_upto)
        masked = mask_of(index, turns)
        state_messages = request.state.get("messages") if isinstance(request.state, dict) else None
        self._thread, self._ledger = state_messages or messages, None  # indexed only if a gist is made
        self._carried = carried_in(index, request.state)
        fixed = budget.measurement.fixed
        factor = budget.measurement.factor
        untouched, view, view_tokens, used = self._measured_view(index, boundary, masked, budget)
        due = due_turns(index)
        if due > turns and advance_pays(
            index, turns, due, hidden_by(index, boundary, masked), budget.clear_at / factor - view_tokens - fixed
        ):
            turns, masked = due, mask_of(index, due)
            untouched, view, view_tokens, used = self._measured_view(index, boundary, masked, budget)
        events: list[PendingEvent] = []
        if used > budget.clear_at or budget.force:
            boundary, view, view_tokens, events = self._batch(
                index, messages, boundary, masked, (view, view_tokens), used, budget
            )
        if self._thread is not None:  # the next mask advance's gists, or the next batch's once one is near
            # not past clear_at: a deferred batch is weighed from running totals, never by ordering the candidates
            stage = 0 if events or used > budget.clear_at else prepare_stage(self.policy, budget.window.tokens, used)
            gone = hidden_by(index, boundary, masked)[0]
            batch = functools.partial(self._candidates, messages, boundary, masked, keep=0)  # the newest age meanwhile
            wanted, jobs = self._pregists.ahead(
                index,
                gone,
                turns,
                self._window,
                batch,
                boundary=boundary,
                stage=stage,
                known=self._carried.covering(self._thread),
            )
            if wanted:
                self._carrier.want(thread_key(), wanted, self._thread, self._carried)
            if jobs:
                self._pregists.hand_over(
                    self._ledgers.here(), self._thread, jobs, self._count_line, self.meter.count_apart
                )
        if events or turns != boundary.masked_turns:  # a batch, or the mask moved: their placeholders' counts travel
            stored = index.memo.get("boundary")
            grown_from = stored[0] if stored is not None and stored[1] is self._stored else None
            hidden = hidden_by(index, boundary, masked)
            mask = (turns, last_masked(index, turns))
            boundary, added = remembered(index, boundary, hidden, self._made, self.meter, mask)
            index.memo["boundary"] = (boundary.to_state(grown_from, added), boundary)  # the next call reads it
            index.memo["view"] = (boundary, masked, list(view))
            state = {CLIP_STATE_KEY: index.memo["boundary"][0]}
        elif untouched or all(map(operator.is_, view, messages)):
            return None
        else:
            state = None
        shown = request.override(messages=cast(list[AnyMessage], view))
        return LayerEdit(shown, state=state, events=events, message_tokens=view_tokens)

    def _measured_view(
        self, index: ThreadIndex, boundary: Boundary, masked: Mask, budget: CallBudget
    ) -> tuple[bool, list[BaseMessage], int, int]:
        """Whether nothing is hidden, the view with `boundary` and `masked` applied, its raw message tokens and the
        call's calibrated tokens with it."""
        if boundary.hides_nothing and not (masked.results or masked.args):
            return True, list(index.messages), budget.measurement.messages, budget.used
        view = self._grown_view(index, boundary, masked)
        tokens = self.meter.messages_tokens(view)
        fixed = budget.measurement.fixed
        return False, view, tokens, round((fixed + tokens) * budget.measurement.factor)

    def _batch(
        self,
        index: ThreadIndex,
        messages: Sequence[BaseMessage],
        boundary: Boundary,
        masked: Mask,
        measured: tuple[list[BaseMessage], int],
        used: int,
        budget: CallBudget,
    ) -> tuple[Boundary, list[BaseMessage], int, list[PendingEvent]]:
        """Grow the boundary by one batch when one is worth its cache miss (or the call is past the fold threshold,
        or forced, when even a task never read whole is cut: one past the window never is): the boundary, the view,
        its raw message tokens and the batch's event; the same boundary and the `measured` view when not."""
        fixed, factor, force = budget.measurement.fixed, budget.measurement.factor, budget.force
        target = int(budget.window.tokens * self.policy.clear_to)
        need = float("inf") if force else (used - target) / factor
        smallest = budget.window.tokens * self.policy.clear_min_batch_share
        urgent = used > budget.fold_at or force
        task_budget = int(budget.window.tokens * self.policy.fold_facts_share)
        task_saving = task_saving_of(index, boundary, self._thread, task_budget, smallest / factor, unread=force)
        if not (urgent or task_saving or may_be_worth_it(index, boundary, masked, need, smallest / factor)):
            return boundary, *measured, []
        cut = task_cut(index.messages, task_budget, self.meter.counter, unread=force) if task_saving else None
        task_saving = task_saving if cut is not None else 0  # not cut after all: not yet answered, or blocks
        done = boundary.cut_messages
        pasted = message_cuts(index.messages, budget.window.tokens, task_budget, self.meter, done) if force else {}
        keep = 1 if force else None
        found = self._candidates(messages, boundary, masked, keep=keep, budget=budget)
        grown, freed = extend(found, boundary, need - task_saving)
        if cut is not None:
            grown, freed = dataclasses.replace(grown, task=cut[0], task_lines=cut[1]), freed + task_saving
        if pasted:  # a later message past half the window: only the forced round cuts it
            grown = dataclasses.replace(grown, cut_messages={**boundary.cut_messages, **pasted})
        if not grown.hides_more_than(boundary) or not (freed * factor >= smallest or urgent):
            return boundary, *measured, []
        view = self.view(messages, grown, masked)
        view_tokens = self.meter.messages_tokens(view)
        after = round((fixed + view_tokens) * factor)
        event = grown.growth_from(boundary) | {"tokens_before": used, "tokens_after": after, "freed": used - after}
        event |= {"target": target, "task_cut": cut is not None, "forced": force}
        return grown, view, view_tokens, [("context_clear", event, budget.window.model)]

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)

    def answered(self, request: ModelRequest[Any]) -> dict[str, Any] | None:
        """The call was answered: carry in the thread's state the gists it wanted made ahead, as made by now."""
        return self._carrier.answered(thread_key(), self._pregists, self.meter.count_key)

    def _index(self, messages: Sequence[BaseMessage]) -> ThreadIndex:
        """The index of the thread being shaped, extended with its new messages (one per recent thread)."""
        key = thread_key()
        index = self._indexes.pop(key, None) or ThreadIndex(self.policy, self.meter)
        self._indexes[key] = index.sync(messages)
        while len(self._indexes) > MAX_THREADS:
            self._indexes.popitem(last=False)
        return index

    def _made(self, message: BaseMessage, key: tuple[str, ...]) -> tuple[BaseMessage, tuple[int, ...] | None] | None:
        """The placeholder this process made for `message` under `key`, with the lines it quotes; `None` if it made
        none."""
        hit = self._replacements.get(id(message))
        return (hit[2], hit[3]) if hit is not None and hit[0] is message and hit[1] == key else None

    # --- the view ---------------------------------------------------------------
    def _current_ledger(self) -> TokenLedger | None:
        """The ledger of the thread being shaped, brought up to date on first use in a call.

        Only a new gist or a clearing order needs it, so a call that makes neither (a roomy
        thread, a boundary whose placeholders are cached) never reads the thread's text.
        """
        if self._ledger is None and self._thread is not None:
            self._ledger = self._ledgers.here()
            self._ledger.sync(self._thread)
        return self._ledger

    def _grown_view(self, index: ThreadIndex, boundary: Boundary, masked: Mask) -> list[BaseMessage]:
        """`view` of the indexed list, extending the previous call's view when boundary and mask are the same."""
        memo = index.memo.get("view")
        grew = index.memo.get("mask_grew")
        if memo is not None and memo[0] is boundary and grew is not None and grew[0] is memo[1] and grew[1] is masked:
            memo = (boundary, masked, memo[2][: grew[2]])  # the mask advanced: the view before it holds
        elif memo is None or memo[0] is not boundary or memo[1] is not masked:
            memo = (boundary, masked, [])
        shown: list[BaseMessage] = memo[2]
        cleared, clipped = hidden_by(index, boundary, masked)
        task = None if shown else boundary.cut
        view = shown + self._apply(index.messages[len(shown) :], cleared, clipped, task, boundary.cut_messages)
        index.memo["view"] = (boundary, masked, view)
        return list(view)

    def view(
        self,
        messages: Sequence[BaseMessage],
        boundary: Boundary,
        masked: Mask,
        thread: Sequence[BaseMessage] | None = None,
    ) -> list[BaseMessage]:
        """`messages` with the boundary (and the cost-first mask) applied; untouched messages are the same objects.

        `thread` is the whole checkpointed thread when `messages` is a folded view of it: a gist
        depends on what the thread showed before the result, so it must be measured on the thread.
        """
        if thread is not None:
            self._thread, self._ledger = thread, None
        self._stored = boundary
        results, args = set(boundary.results) | masked.results, set(boundary.args) | masked.args
        return self._apply(messages, results, args, boundary.cut, boundary.cut_messages)

    def _apply(
        self,
        messages: Sequence[BaseMessage],
        results: Set[str],
        args: Set[str],
        task: TaskCut | None = None,
        pasted: Mapping[str, tuple[int, ...]] | None = None,
    ) -> list[BaseMessage]:
        """`messages` with these results and arguments hidden; `task`: they open the thread, and a batch cut it;
        `pasted`: the later user messages a forced batch cut, by id."""
        out: list[BaseMessage] = []
        first = messages[0] if task is not None and messages else None
        start = 0
        if isinstance(first, HumanMessage) and task is not None and first.id == task[0]:  # only where the task stands
            out.append(shown_task(first, task[1]))
            start = 1
        newest = next(
            (i for i in range(len(messages) - 1, -1, -1) if getattr(messages[i], "tool_calls", None)), len(messages)
        )
        for position, message in enumerate(itertools.islice(messages, start, None), start=start):
            # the newest reply's results stay whole, whatever id they answer: a server that numbers calls `call_0`,
            # `call_1` in every reply reuses the ids of results cleared before
            if isinstance(message, ToolMessage) and message.tool_call_id in results and position < newest:
                out.append(self._replace(message, ("result",)))
            elif isinstance(message, AIMessage) and message.tool_calls:
                key = call_key(message, results, args, self.policy.clear_call_text)
                out.append(self._replace(message, key) if key else message)
            elif pasted and isinstance(message, HumanMessage) and message.id in pasted:
                out.append(shown_message(message, pasted[str(message.id)]))
            else:
                out.append(message)
        return out

    def _replace(self, message: BaseMessage, key: tuple[str, ...]) -> BaseMessage:
        """The same original always gets the same replacement object (cheap to measure, byte-stable)."""
        hit = self._replacements.get(id(message))
        if hit is not None and hit[0] is message and hit[1] == key:
            return hit[2]
        lines: tuple[int, ...] | None = None
        replacement: BaseMessage
        name = placeholder_key(message, key)
        if key[0] == "result":
            assert isinstance(message, ToolMessage)
            tokens = self.meter.message_tokens(message)
            whole = result_saving(tokens, self.policy) <= 0  # no larger than its placeholder: it stays whole
            found = None if whole else self._gist(message, tokens)
            if whole:
                replacement = message
            elif isinstance(found, MadeAhead):  # rendered and counted in the background
                lines, replacement = found.gist.chosen, found.placeholder
                self.meter.remember(replacement, found.placeholder_tokens)
            else:
                lines, replacement = found.chosen if found else None, result_placeholder(message, tokens, found)
        else:  # the lines the clipped values keep, as the boundary carries them: the arguments are not read again
            assert isinstance(message, AIMessage)
            keep_text, stored = key[0] == "args", self._stored.gists.get(name)
            replacement, lines = clip_calls(message, set(key[1:]), keep_text=keep_text, lines=stored)
        same_counter = self._stored.counted_by == self.meter.count_key
        counted = self._stored.counts.get(name) if same_counter else None
        if counted and list(counted[1:]) == content_signature(replacement):  # counted when cleared, maybe elsewhere
            self.meter.remember(replacement, counted[0])
        if len(self._replacements) > 50_000:
            self._replacements.clear()
        self._replacements[id(message)] = (message, key, replacement, lines)
        return replacement

    def _gist(self, message: ToolMessage, tokens: int) -> Gist | MadeAhead | None:
        """The gist of a result being hidden: from the lines the boundary stored, made ahead (with its placeholder),
        or made now."""
        budget = gist_budget(self.policy, self._window, tokens)
        if budget <= 0:
            return None
        stored = self._stored.gists.get(message.tool_call_id)
        if stored is not None:  # chosen when the result was cleared: the same lines, without reading the thread
            kept = gist_of_lines(text_of(message), stored)
            if kept is not None:
                return kept
        if self._thread is not None:  # made ahead, in the background, where the result still stands
            ahead = self._pregists.standing(message, budget, tokens, self._thread)
            if ahead is not None:
                return ahead
        carried = self._carried.made_ahead(message, budget, tokens, self._thread, self.meter.count_key)
        if carried is not None:  # made ahead by the process that ran the thread before
            return carried
        ledger = self._current_ledger()
        position = ledger.position(message) if ledger is not None else None
        seen = ledger.seen_before(position) if ledger is not None and position is not None else never_seen
        return gist(text_of(message), budget, self._count_line, seen)

    # --- growing the boundary ------------------------------------------------------
    def _candidates(
        self,
        messages: Sequence[BaseMessage],
        boundary: Boundary,
        masked: Mask,
        *,
        keep: int | None = None,
        budget: CallBudget | None = None,
    ) -> list[Candidate]:
        """What a batch would take, most disposable first (`clip.candidates`); the newest `keep` results stay (and the
        newest calls' arguments, unless `budget` is urgent: `clip.candidates.newest_args_bar`)."""
        count = self.policy.keep_tool_results if keep is None else keep
        return candidates(self._index(messages), messages, boundary, masked, count, self._rank, budget)

    def _count_line(self, line: str) -> int:
        """Tokens of one output line, each distinct line counted once (outputs repeat lines)."""
        tokens = self._line_tokens.get(line)
        if tokens is None:
            if len(self._line_tokens) >= 100_000:
                self._line_tokens.clear()
            tokens = self._line_tokens[line] = self.meter.counter(line)
        return tokens

    def _rank(self, message: ToolMessage, stale: bool) -> int:
        """0: superseded by a later call; 1: every new detail it showed appears again later; 2: the rest."""
        if stale:
            return 0
        ledger = self._current_ledger()
        position = ledger.position(message) if ledger is not None else None
        return 1 if position is not None and ledger is not None and ledger.shown_again(message, position) else 2


__all__ = ["CLIP_STATE_KEY", "NO_MASK", "Boundary", "ClearLayer", "ClipState", "Mask"]
