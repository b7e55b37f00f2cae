"""The fold stages of the per-call pipeline.

Two layers around clearing: `FoldedView` first shows the latest summary instead of
the turns it covers (so clearing measures what is really sent), and `FoldLayer` last
folds again when the call, after clearing, still passes `summarize_at` — or when the
agent asked for it with `compact_conversation`, or when a provider refused the call
as too long (a forced fold keeps only the last step). After an unproductive fold, or
instead of a prepared one that would free too little, it holds off until the thread has
grown (`fold_regrow_share`), unless the call would not fit at all. Past the pre-fold
point below the threshold, the next fold's summary is prepared in the background
(`ctxwarden.fold.prepare`) and the rest of its work drafted (`ctxwarden.fold.draft`), and
the fold applies them at once.

Both run on every call, so neither re-reads what did not change: the fold records are
parsed once per state object, and the folded view finds the fold's last message where
it was on the previous call (one id comparison) instead of searching the thread for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AnyMessage, BaseMessage

from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.core.list_totals import starts_with
from ctxwarden.core.runtime import step_context
from ctxwarden.fold.engine import Folder, FoldInput
from ctxwarden.fold.in_place import SentCall
from ctxwarden.fold.prepare import Preparer
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, shown_folded, shown_record


class ParsedFolds:
    """`Folds.from_state`, parsed once per private-state object (the state keeps it until a fold changes it)."""

    __slots__ = ("_folds", "_raw")

    def __init__(self) -> None:
        self._raw: object = None
        self._folds = Folds()

    def __call__(self, state: Any) -> Folds:
        raw = state.get(FOLD_STATE_KEY) if isinstance(state, Mapping) else None
        if raw is None:
            return Folds()
        if raw is not self._raw:
            self._folds, self._raw = Folds.from_state(state), raw
        return self._folds


class FoldedView:
    """Shows earlier folds: the latest summary that stands for the thread (`fold.state.shown_record`), then the
    messages after it."""

    name = "folded"

    def __init__(self) -> None:
        self._folds = ParsedFolds()
        self._shown: tuple[Folds, FoldRecord, int, list[BaseMessage]] | None = None
        """The last answer: for these folds, the record shown and where its last message stood, and the messages up
        to it, which a later call's thread starts with (compared in C) while nothing folded was edited."""

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        folds = self._folds(request.state)
        if folds.last is None:
            return None
        messages = request.messages
        found = self._record(messages, folds)
        if found is None:  # the folded message is gone, or every fold was edited since: show the thread as it is
            return None
        record, index = found
        return LayerEdit(request.override(messages=cast(list[AnyMessage], shown_folded(messages, record, index))))

    def _record(self, messages: Sequence[BaseMessage], folds: Folds) -> tuple[FoldRecord, int] | None:
        known = self._shown
        if known is not None and known[0] is folds and starts_with(messages, known[3]):
            return known[1], known[2]
        found = shown_record(messages, folds)
        self._shown = None if found is None else (folds, *found, list(messages[: found[1] + 1]))
        return found

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)


class FoldLayer:
    """Folds older turns when the call, after clearing, passes the fold threshold."""

    name = "fold"

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self._folds = ParsedFolds()
        self.preparer = Preparer(folder)

    def _input(self, request: ModelRequest[Any], budget: CallBudget) -> FoldInput | None:
        folds = self._folds(request.state)
        requested = folds.requested
        if not (budget.force or requested):
            if budget.used <= budget.fold_at:
                return None
            if folds.hold_until is not None and budget.used < folds.hold_until and not budget.overflow:
                return None
        instructions = (requested or {}).get("instructions")
        return fold_input(request, budget, folds, instructions, bool(budget.force or requested))

    def _ahead(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        """Not folding on this call: past the pre-fold point, have the next fold's summary prepared (and, while one
        is kept, the rest of its work drafted)."""
        thread_id, namespace, _run = step_context()
        key = (thread_id, namespace)
        due = self.preparer.due(key, budget)
        drafting = self.preparer.drafting(key, budget)
        if not (due or drafting):
            return None
        given = fold_input(request, budget, self._folds(request.state), None, False)
        events = self.preparer.ahead(given, start=due, draft=drafting)
        return LayerEdit(request, events=events) if events else None

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        given = self._input(request, budget)
        if given is None:
            return self._ahead(request, budget)
        return _edit(request, self.preparer.fold(given))

    def answered(self, request: ModelRequest[Any]) -> None:
        """The call was answered as `request` was sent: a summary prepared on it may now ask the model in place."""
        thread_id, namespace, _run = step_context()
        self.preparer.answered((thread_id, namespace), request)

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        given = self._input(request, budget)
        if given is None:
            return self._ahead(request, budget)
        return _edit(request, await self.preparer.afold(given))


def fold_input(
    request: ModelRequest[Any], budget: CallBudget, folds: Folds, instructions: str | None, forced: bool
) -> FoldInput:
    """What a fold of this call starts from."""
    thread_id, namespace, _run = step_context()
    state_messages = request.state.get("messages", []) if isinstance(request.state, dict) else []
    m = budget.measurement
    return FoldInput(
        view=request.messages,
        thread=state_messages or request.messages,
        folds=folds,
        window=budget.window.tokens,
        fixed_tokens=m.fixed,
        factor=m.factor,
        tokens_before=budget.used,
        thread_id=thread_id,
        namespace=namespace,
        fallback_model=request.model,
        instructions=instructions,
        forced=forced,
        sent=SentCall.of(request),
    )


def _edit(request: ModelRequest[Any], outcome: Any) -> LayerEdit | None:
    if outcome is None:
        return None
    if outcome.record is None:  # the history could not be written, or the fold was held: the turns stay in view
        return LayerEdit(request, state=outcome.state, events=outcome.events)
    return LayerEdit(request.override(messages=outcome.view), state=outcome.state, events=outcome.events)


__all__ = ["FoldLayer", "FoldedView", "ParsedFolds", "fold_input"]
