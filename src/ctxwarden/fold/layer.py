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
from ctxwarden.core.runtime import step_context
from ctxwarden.fold.engine import Folder, FoldInput
from ctxwarden.fold.in_place import SentCall
from ctxwarden.fold.prepare import Preparer
from ctxwarden.fold.state import FOLD_STATE_KEY, Folds, shown_folded


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
    """Shows earlier folds: the latest summary, then the messages after it."""

    name = "folded"

    def __init__(self) -> None:
        self._folds = ParsedFolds()
        self._at: tuple[str, int] | None = None
        """Where the last fold's message was found on the previous call: its id and index."""

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        last = self._folds(request.state).last
        if last is None:
            return None
        messages = request.messages
        index = self._index(messages, last.upto)
        if index is None:  # the folded message is gone (an edited thread): show everything rather than guess
            return None
        return LayerEdit(request.override(messages=cast(list[AnyMessage], shown_folded(messages, last, index))))

    def _index(self, messages: Sequence[BaseMessage], upto: str) -> int | None:
        at = self._at
        if at is not None and at[0] == upto and at[1] < len(messages) and messages[at[1]].id == upto:
            return at[1]
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].id == upto:
                self._at = (upto, index)
                return index
        return None

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
