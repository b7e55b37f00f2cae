"""What a lifecycle layer is handed and what it hands back.

A layer sees one model call: the request as the cheaper layers before it left it, and
a `CallBudget` measured on that request. It answers `None` (nothing to do) or a
`LayerEdit`: the request it wants sent, the private state to persist with the reply
(for example the clearing boundary), and the trace events to record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain.agents.middleware.types import ModelRequest

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.meter import Measurement
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.window import Window

PendingEvent = tuple[str, Mapping[str, Any], str | None]
"""A trace event still to be written: kind, payload, model."""


@dataclass(frozen=True, slots=True)
class CallBudget:
    """One model call measured against the window of the model it goes to."""

    window: Window
    measurement: Measurement
    policy: ContextPolicy
    force: bool = False
    """Set on the retry after a provider refused the call as too long: clear and fold as far as possible."""

    @property
    def used(self) -> int:
        """Tokens the call is expected to send (calibrated)."""
        return self.measurement.total

    @property
    def fraction(self) -> float:
        """`used` as a share of the window."""
        return self.used / self.window.tokens

    @property
    def gauge(self) -> GaugeLevel:
        """ok / warn / critical, from the one shared gauge function."""
        return gauge_level(self.fraction, self.policy)

    @property
    def overflow(self) -> bool:
        """Whether the call would exceed the window."""
        return self.used > self.window.tokens

    @property
    def clear_at(self) -> int:
        """Tokens at which clearing fires on this window."""
        return self.policy.clear_threshold(self.window.tokens)

    @property
    def fold_at(self) -> int:
        """Tokens at which folding fires on this window."""
        return self.policy.fold_threshold(self.window.tokens)

    @property
    def evict_over(self) -> int:
        """Tool results above this many tokens are evicted at arrival on this window."""
        return self.policy.evict_threshold(self.window.tokens)

    def as_metadata(self) -> dict[str, Any]:
        """The JSON-safe record stamped on the call's AI message."""
        m = self.measurement
        return {
            "model": self.window.model,
            "window": self.window.tokens,
            "window_source": self.window.source,
            "input_tokens": self.used,
            "system_tokens": m.system,
            "tool_schema_tokens": m.tools,
            "message_tokens": m.messages,
            "calibration": round(m.factor, 4),
            "fraction": round(self.fraction, 4),
            "gauge": self.gauge,
            "overflow": self.overflow,
        }


@dataclass(frozen=True, slots=True)
class LayerEdit:
    """A layer's answer: the request to send, private state to persist, events to record."""

    request: ModelRequest[Any]
    state: Mapping[str, Any] | None = None
    events: Sequence[PendingEvent] = ()
    stamp: Mapping[str, Any] | None = None
    """Extra figures for the call's stamp on the reply (e.g. the admitted sections' tokens)."""


@runtime_checkable
class ContextLayer(Protocol):
    """One lifecycle stage applied to a single call's view (clip, fold, ...).

    It returns `None` when it has nothing to do, or a `LayerEdit` whose request is
    `request.override(...)`; it never mutates the checkpointed messages.
    """

    name: str

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None: ...

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None: ...


__all__ = ["CallBudget", "ContextLayer", "LayerEdit", "PendingEvent"]
