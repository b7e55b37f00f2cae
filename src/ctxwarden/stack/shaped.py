"""One model call as the layers leave it, from the first layer to the request that is sent.

The middleware shapes a call once, and again after each refusal (`stack.refusals`); each
shaping is one of these: the request, its budget re-measured after every layer that edited
it, and what the layers add to the thread's state, the trace and the reply's stamp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import BaseMessage

from ctxwarden.core.layers import CallBudget, ContextLayer, LayerEdit
from ctxwarden.core.stream import emit_layer_events
from ctxwarden.trace.recorder import PendingEvent


class ShapedCall:
    """One call as the layers leave it: request, budget, the layers that edited it, state and events."""

    __slots__ = ("applied", "budget", "events", "request", "stamp", "state")

    def __init__(self, request: ModelRequest[Any], budget: CallBudget, notes: int = 0) -> None:
        self.request, self.budget = request, budget.carrying(notes)
        self.applied: list[str] = []
        self.state: dict[str, Any] = {}
        self.events: list[PendingEvent] = []
        self.stamp: dict[str, Any] = {}

    @property
    def messages(self) -> list[BaseMessage]:
        """The messages the call is sent with."""
        return list(self.request.messages)

    def take(
        self, layer: ContextLayer, edit: LayerEdit | None, measure: Callable[..., CallBudget], *, last: bool = False
    ) -> None:
        """Apply a layer's edit; an edited request is measured again (on the window already resolved, same model).
        The gauge notes earlier calls placed count in every budget until the `last` stage has placed them."""
        notes = 0 if last else self.budget.measurement.notes
        if edit is not None and edit.request is not self.request:
            like = self.budget if edit.request.model is self.request.model else None
            self.budget = measure(edit.request, like=like, before=self.request, message_tokens=edit.message_tokens)
            self.request = edit.request
            self.applied.append(layer.name)
        self.budget = self.budget.carrying(notes)
        if edit is None:
            return
        self.state.update(edit.state or {})
        self.events.extend(edit.events)
        self.stamp.update(edit.stamp or {})
        emit_layer_events(edit.events)  # a client streaming `custom` sees each batch, fold and note as it happens


__all__ = ["ShapedCall"]
