"""The fold stages of the per-call pipeline.

Two layers around clearing: `FoldedView` first shows the latest summary instead of
the turns it covers (so clearing measures what is really sent), and `FoldLayer` last
folds again when the call, after clearing, still passes `summarize_at` — or when the
agent asked for it with `compact_conversation`, or when a provider refused the call
as too long (a forced fold keeps only the last step). After an unproductive fold it
holds off until the thread has grown (`fold_regrow_share`), unless the call would
not fit at all. Past the pre-fold point below the threshold, the next fold's summary is
prepared in the background (`ctxwarden.fold.prepare`), and the fold applies it at once.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ModelRequest

from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.core.runtime import step_context
from ctxwarden.fold.engine import Folder, FoldInput
from ctxwarden.fold.prepare import Preparer
from ctxwarden.fold.state import Folds, folded_view


class FoldedView:
    """Shows earlier folds: the latest summary, then the messages after it."""

    name = "folded"

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        folds = Folds.from_state(request.state)
        if folds.last is None:
            return None
        view = folded_view(request.messages, folds)
        if len(view) == len(request.messages) and all(a is b for a, b in zip(view, request.messages, strict=True)):
            return None
        return LayerEdit(request.override(messages=view))  # type: ignore[arg-type]

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)


class FoldLayer:
    """Folds older turns when the call, after clearing, passes the fold threshold."""

    name = "fold"

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self.preparer = Preparer(folder)

    def _input(self, request: ModelRequest[Any], budget: CallBudget) -> FoldInput | None:
        folds = Folds.from_state(request.state)
        requested = folds.requested
        if not (budget.force or requested):
            if budget.used <= budget.fold_at:
                return None
            if folds.hold_until is not None and budget.used < folds.hold_until and not budget.overflow:
                return None
        instructions = (requested or {}).get("instructions")
        return fold_input(request, budget, folds, instructions, bool(budget.force or requested))

    def _ahead(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        """Not folding on this call: past the pre-fold point, have the next fold's summary prepared."""
        threshold = self.preparer.threshold(budget)
        if threshold is None or budget.used <= threshold:
            return None
        events = self.preparer.ahead(fold_input(request, budget, Folds.from_state(request.state), None, False))
        return LayerEdit(request, events=events) if events else None

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        given = self._input(request, budget)
        if given is None:
            return self._ahead(request, budget)
        return _edit(request, self.preparer.fold(given))

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
        fixed_tokens=m.system + m.tools,
        factor=m.factor,
        tokens_before=budget.used,
        thread_id=thread_id,
        namespace=namespace,
        fallback_model=request.model,
        instructions=instructions,
        forced=forced,
    )


def _edit(request: ModelRequest[Any], outcome: Any) -> LayerEdit | None:
    if outcome is None:
        return None
    if outcome.record is None:  # the history could not be written: keep the turns in view, say why
        return LayerEdit(request, events=outcome.events)
    return LayerEdit(request.override(messages=outcome.view), state=outcome.state, events=outcome.events)


__all__ = ["FoldLayer", "FoldedView", "fold_input"]
