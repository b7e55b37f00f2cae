"""Clearing: old tool results and large old tool-call arguments leave the model's view, in batches.

When a call would pass `clear_at` of the window, the oldest results (stale `read_file`
results first) and the large arguments of older calls are replaced by placeholders,
in one batch, until the call is down to `clear_to` (a batch too small to be worth a
cache miss waits, unless the call is past the fold threshold); the newest `keep_tool_results`
results and calls stay verbatim, and `clear_exclude_tools` are never touched. The
batch's call ids are kept in private state: every later call replaces exactly those
again, with the same bytes, so consecutive calls share their prefix until the trigger
fires again (stock `ClearToolUsesEdit` clears one more result on every call, which
misses a provider's prompt cache every turn). Only the view changes: the checkpointed
messages stay whole, and `recall` returns any of them.

The cost-first preset (`mask_after_turns`) also masks every result older than the
newest N model turns, whatever the fill.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import AgentState, ModelRequest, PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage

from ctxwarden.clip.gist import Gist, TokenLedger, gist, gist_of_lines, never_seen
from ctxwarden.clip.order import kept_results, newest, superseded
from ctxwarden.clip.placeholders import args_placeholder, result_placeholder
from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.runtime import step_context
from ctxwarden.core.text import text_of

CLIP_STATE_KEY = "ctxwarden_clip"


@dataclass(frozen=True, slots=True)
class Mask:
    """Call ids whose results, and whose large arguments, the cost-first preset masks on this call."""

    results: frozenset[str] = frozenset()
    args: frozenset[str] = frozenset()


NO_MASK = Mask()
POINTER_TOKENS = 60
"""About what a placeholder's pointer line costs (tool, size, line counts, the `recall` call, a file path)."""
MASK_STEP_FACTOR = 2
"""The cost-first mask advances this many times `mask_after_turns` turns at a time (see `ClearLayer._masked`)."""


class ClipState(AgentState):
    """The clearing boundary: call ids whose results, and whose arguments, are out of the view (and the lines each
    cleared result's gist quotes)."""

    ctxwarden_clip: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


@dataclass(frozen=True, slots=True)
class Boundary:
    """Which results and which calls' arguments are cleared, in the order they were cleared."""

    results: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    gists: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """The lines each cleared result's gist quotes, by call id: a process that resumes the thread renders the same
    gists from these without weighing the thread's text again (a gist depends on everything shown before it)."""

    @classmethod
    def from_state(cls, state: Any) -> Boundary:
        raw = state.get(CLIP_STATE_KEY) if isinstance(state, dict) else None
        if not isinstance(raw, dict):
            return cls()
        gists = raw.get("gists")
        gists = gists if isinstance(gists, dict) else {}
        return cls(
            tuple(raw.get("results") or ()),
            tuple(raw.get("args") or ()),
            {str(k): tuple(v) for k, v in gists.items() if isinstance(v, list | tuple)},
        )

    def to_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"results": list(self.results), "args": list(self.args)}
        return state | {"gists": {k: list(v) for k, v in self.gists.items()}} if self.gists else state


@dataclass(slots=True)
class ClearLayer:
    """The clearing stage of the lifecycle (a `ContextLayer`)."""

    policy: ContextPolicy
    meter: TokenMeter
    name: str = "clear"
    _replacements: dict[tuple[int, tuple[str, ...]], tuple[BaseMessage, BaseMessage, Gist | None]] = field(
        default_factory=dict
    )
    _stored: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """The boundary's gist lines for the thread being shaped (see `Boundary.gists`)."""
    _ledgers: OrderedDict[str, TokenLedger] = field(default_factory=OrderedDict)
    _ledger: TokenLedger | None = None
    _thread: Sequence[BaseMessage] | None = None
    _line_tokens: dict[str, int] = field(default_factory=dict)

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        messages = request.messages
        boundary = Boundary.from_state(request.state)
        self._stored = boundary.gists
        masked = self._masked(messages)
        untouched = not (boundary.results or boundary.args or masked.results or masked.args)
        state_messages = request.state.get("messages") if isinstance(request.state, dict) else None
        self._thread, self._ledger = state_messages or messages, None  # indexed only if a gist is made
        view = list(messages) if untouched else self.view(messages, boundary, masked)
        fixed = budget.measurement.system + budget.measurement.tools
        factor = budget.measurement.factor
        used = budget.used if untouched else round((fixed + self.meter.messages_tokens(view)) * factor)
        events = []
        if used > budget.clear_at or budget.force:
            target = int(budget.window.tokens * self.policy.clear_to)
            need = float("inf") if budget.force else (used - target) / factor
            grown, freed = self._extend(messages, boundary, masked, need=need, keep=1 if budget.force else None)
            worth_it = freed * factor >= budget.window.tokens * self.policy.clear_min_batch_share
            if grown != boundary and (worth_it or used > budget.fold_at or budget.force):
                view = self.view(messages, grown, masked)
                after = round((fixed + self.meter.messages_tokens(view)) * factor)
                events.append(
                    (
                        "context_clear",
                        {
                            "results": len(grown.results) - len(boundary.results),
                            "args": len(grown.args) - len(boundary.args),
                            "tokens_before": used,
                            "tokens_after": after,
                            "freed": used - after,
                            "target": target,
                            "cleared_total": len(grown.results),
                            "clipped_total": len(grown.args),
                            "forced": budget.force,
                        },
                        budget.window.model,
                    )
                )
                boundary = self._with_gists(grown, messages)
        if untouched and not events:
            return None
        if not events and all(map(operator.is_, view, messages)):
            return None
        state = {CLIP_STATE_KEY: boundary.to_state()} if events else None
        return LayerEdit(request.override(messages=cast(list[AnyMessage], view)), state=state, events=events)

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)

    def _with_gists(self, boundary: Boundary, messages: Sequence[BaseMessage]) -> Boundary:
        """`boundary` with the gist lines of the results it clears, as this process chose them."""
        gists = dict(boundary.gists)
        for message in messages:
            if isinstance(message, ToolMessage) and message.tool_call_id in boundary.results:
                hit = self._replacements.get((id(message), ("result",)))
                made = hit[2] if hit is not None and hit[0] is message else None
                if made is not None:
                    gists.setdefault(message.tool_call_id, made.chosen)
        return Boundary(boundary.results, boundary.args, gists)

    # --- the view ---------------------------------------------------------------
    def _current_ledger(self) -> TokenLedger | None:
        """The ledger of the thread being shaped, brought up to date on first use in a call.

        Only a new gist or a clearing order needs it, so a call that makes neither (a roomy
        thread, a boundary whose placeholders are cached) never reads the thread's text.
        """
        if self._ledger is None and self._thread is not None:
            self._sync_ledger(self._thread)
        return self._ledger

    def _sync_ledger(self, thread: Sequence[BaseMessage]) -> TokenLedger:
        """The token ledger of this thread, brought up to date with its new messages."""
        thread_id, namespace, _run = step_context()
        key = f"{thread_id}|{namespace}"
        ledger = self._ledgers.pop(key, None) or TokenLedger()
        ledger.sync(thread)
        self._ledgers[key] = ledger
        while len(self._ledgers) > 16:
            self._ledgers.popitem(last=False)
        self._ledger = ledger
        return ledger

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
        self._stored = boundary.gists
        results = set(boundary.results) | masked.results
        args = set(boundary.args) | masked.args
        out: list[BaseMessage] = []
        for message in messages:
            if isinstance(message, ToolMessage) and message.tool_call_id in results:
                out.append(self._replace(message, ("result",)))
            elif isinstance(message, AIMessage) and message.tool_calls and args:
                ids = tuple(sorted(str(c["id"]) for c in message.tool_calls if c.get("id") in args))
                out.append(self._replace(message, ("args", *ids)) if ids else message)
            else:
                out.append(message)
        return out

    def _replace(self, message: BaseMessage, key: tuple[str, ...]) -> BaseMessage:
        """The same original always gets the same replacement object (cheap to measure, byte-stable)."""
        hit = self._replacements.get((id(message), key))
        if hit is not None and hit[0] is message:
            return hit[1]
        made: Gist | None = None
        if key[0] == "result":
            assert isinstance(message, ToolMessage)
            tokens = self.meter.message_tokens(message)
            made = self._gist(message, tokens)
            replacement: BaseMessage = result_placeholder(message, tokens, made)
        else:
            assert isinstance(message, AIMessage)
            replacement = args_placeholder(message, set(key[1:]))
        if len(self._replacements) > 50_000:
            self._replacements.clear()
        self._replacements[(id(message), key)] = (message, replacement, made)
        return replacement

    def _gist(self, message: ToolMessage, tokens: int) -> Gist | None:
        budget = min(self.policy.gist_max_tokens, int(tokens * self.policy.gist_share))
        if budget <= 0:
            return None
        stored = self._stored.get(message.tool_call_id)
        if stored is not None:  # chosen when the result was cleared: the same lines, without reading the thread
            kept = gist_of_lines(text_of(message), stored)
            if kept is not None:
                return kept
        ledger = self._current_ledger()
        position = ledger.position(message) if ledger is not None else None
        seen = ledger.seen_before(position) if ledger is not None and position is not None else never_seen
        return gist(text_of(message), budget, self._count_line, seen)

    # --- growing the boundary ------------------------------------------------------
    def _extend(
        self,
        messages: Sequence[BaseMessage],
        boundary: Boundary,
        masked: Mask,
        *,
        need: float,
        keep: int | None = None,
    ) -> tuple[Boundary, float]:
        """Add candidates, most disposable first, until `need` raw tokens are freed (or none are left)."""
        results, args = list(boundary.results), list(boundary.args)
        freed = 0.0
        for kind, call_id, saving in self._candidates(messages, boundary, masked, keep=keep):
            if freed >= need:
                break
            (results if kind == "result" else args).append(call_id)
            freed += saving
        return Boundary(tuple(results), tuple(args)), freed

    def _candidates(
        self, messages: Sequence[BaseMessage], boundary: Boundary, masked: Mask, *, keep: int | None = None
    ) -> list[tuple[str, str, float]]:
        """`(kind, call id, tokens freed)`: superseded results first, then oldest first; the newest stay."""
        policy = self.policy if keep is None else self.policy.replace(keep_tool_results=keep)
        names = {
            str(c["id"]): c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls if c.get("id")
        }
        stale = superseded(messages)
        results = [m for m in messages if isinstance(m, ToolMessage)]
        keep_results = kept_results(messages, results, policy.keep_tool_results)
        callers = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
        keep_callers = {id(m) for m in newest(callers, policy.keep_tool_results)}
        cleared, clipped = set(boundary.results) | masked.results, set(boundary.args) | masked.args
        found: list[tuple[int, int, str, str, float]] = []
        for position, message in enumerate(messages):
            if isinstance(message, ToolMessage):
                call_id = message.tool_call_id
                tool = message.name or names.get(call_id)
                if call_id in cleared or call_id in keep_results or tool in policy.clear_exclude_tools:
                    continue
                saving = self._result_saving(message)
                if saving > 0:
                    found.append((self._rank(message, call_id in stale), position, "result", call_id, saving))
            elif policy.clip_tool_args and isinstance(message, AIMessage) and message.tool_calls:
                if id(message) in keep_callers:
                    continue
                sizes = self.meter.call_args_tokens(message)
                for call in message.tool_calls:
                    call_id = str(call.get("id"))
                    if call_id in clipped or call.get("name") in policy.clear_exclude_tools:
                        continue
                    size = sizes[call_id]
                    if size >= policy.clip_args_min_tokens:
                        placeholder = self._replace(message, ("args", call_id))
                        assert isinstance(placeholder, AIMessage)
                        left = self.meter.call_args_tokens(placeholder)[call_id]
                        found.append((2, position, "args", call_id, size - left))
        found.sort(key=lambda item: (item[0], item[1]))
        return [(kind, call_id, saving) for _rank, _pos, kind, call_id, saving in found]

    def _result_saving(self, message: ToolMessage) -> int:
        """Tokens clearing `message` would free: measured when its placeholder exists, else estimated with its gist at
        the full budget, so that weighing a batch (on every call while one is deferred) never chooses gists it may not
        make; the batch's own placeholders are measured when it is made."""
        tokens = self.meter.message_tokens(message)
        hit = self._replacements.get((id(message), ("result",)))
        if hit is not None and hit[0] is message:
            return tokens - self.meter.message_tokens(hit[1])
        budget = min(self.policy.gist_max_tokens, int(tokens * self.policy.gist_share))
        return tokens - budget - POINTER_TOKENS

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

    def _masked(self, messages: Sequence[BaseMessage]) -> Mask:
        """Cost-first: results and large arguments of calls made before the newest `mask_after_turns` turns.

        The mask advances `MASK_STEP_FACTOR * mask_after_turns` turns at a time, so between two
        advances the calls share their prefix: each advance makes the provider read again,
        uncached, every turn after the first newly masked one, so advancing on every call would
        miss the cache every call, and advancing every N turns re-reads about 2N turns per N.
        """
        keep = self.policy.mask_after_turns
        if keep is None:
            return NO_MASK
        callers = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
        step = keep * MASK_STEP_FACTOR
        boundary = max(0, (len(callers) - keep) // step * step)
        excluded = self.policy.clear_exclude_tools
        large = self.policy.clip_args_min_tokens
        results: set[str] = set()
        args: set[str] = set()
        for message in callers[:boundary]:
            sizes = self.meter.call_args_tokens(message)
            for call in message.tool_calls:
                if call.get("name") in excluded:
                    continue
                call_id = str(call["id"])
                results.add(call_id)
                if sizes[call_id] >= large:
                    args.add(call_id)
        return Mask(frozenset(results), frozenset(args))


def last_view(
    messages: Sequence[BaseMessage], clip_state: Any, policy: ContextPolicy, meter: TokenMeter | None = None
) -> list[BaseMessage]:
    """What the model was shown on the thread's last call: the messages before it, with the boundary applied."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=len(messages))
    return current_view(messages[:last], clip_state, policy, meter)


def current_view(
    messages: Sequence[BaseMessage],
    clip_state: Any,
    policy: ContextPolicy,
    meter: TokenMeter | None = None,
    thread: Sequence[BaseMessage] | None = None,
) -> list[BaseMessage]:
    """`messages` as clearing shows them now (before a batch the next call may add).

    Pass the whole `thread` when `messages` is a folded view of it, so gists come out as the calls saw them.
    """
    layer = ClearLayer(policy, meter or TokenMeter())
    state = {CLIP_STATE_KEY: clip_state} if clip_state else {}
    return layer.view(messages, Boundary.from_state(state), layer._masked(messages), thread or messages)


__all__ = ["CLIP_STATE_KEY", "Boundary", "ClearLayer", "ClipState", "current_view", "last_view"]
