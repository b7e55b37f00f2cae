"""What a lifecycle layer is handed and what it hands back.

A layer sees one model call: the request as the cheaper layers before it left it, and
a `CallBudget` measured on that request. It answers `None` (nothing to do) or a
`LayerEdit`: the request it wants sent, the private state to persist with the reply
(for example the clearing boundary), and the trace events to record.

A graph keeps only the state keys its schema names, and drops others without a word. So
a layer that keeps state declares it, as a middleware does: a `state_schema` (a
`TypedDict`, usually with `Annotated[NotRequired[...], PrivateStateAttr]` keys) that
joins the agent's schema when the stack is built. A key a layer writes without declaring
it stops the call with an error that names the key and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, get_type_hints, runtime_checkable

from langchain.agents.middleware.types import ModelRequest

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.meter import Measurement
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.window import Window
from ctxwarden.errors import LayerStateError

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

    def carrying(self, notes: int) -> CallBudget:
        """This budget counting `notes` tokens of gauge notes beside its messages (`Measurement.notes`)."""
        if self.measurement.notes == notes:
            return self
        return dataclasses.replace(self, measurement=dataclasses.replace(self.measurement, notes=notes))

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
    message_tokens: int | None = None
    """The raw tokens of `request.messages`, when the layer measured them with the stack's meter and changed
    nothing but the messages: the stack takes them instead of measuring the list again."""


@runtime_checkable
class ContextLayer(Protocol):
    """One lifecycle stage applied to a single call's view (clip, fold, ...).

    It returns `None` when it has nothing to do, or a `LayerEdit` whose request is
    `request.override(...)`; it never mutates the checkpointed messages. A layer may also
    define `answered(request)`: the stack calls it once the call is answered, with the
    request as the layers left it (the fold layer sends a prepared summary's request then).
    """

    name: str

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None: ...

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None: ...


def declared_keys(layer: Any) -> dict[str, Any]:
    """The state keys `layer` declares in its `state_schema` (none when it has none), with their types."""
    schema = getattr(layer, "state_schema", None)
    if schema is None:
        return {}
    try:
        return dict(get_type_hints(schema, include_extras=True))
    except Exception as exc:  # not a TypedDict, or hints that do not resolve
        raise LayerStateError(
            f"layer {getattr(layer, 'name', layer)!r} has state_schema={schema!r}, which is not a TypedDict whose "
            f"keys can be read ({exc}). Fix: declare its state as a TypedDict, e.g. class MyState(AgentState): "
            "my_key: Annotated[NotRequired[dict], PrivateStateAttr]."
        ) from exc


def joined_schema(base: type, layers: Iterable[Any]) -> type:
    """`base` with every key the `layers` declare; a key declared twice with different types is refused."""
    hints = dict(get_type_hints(base, include_extras=True))
    owners = dict.fromkeys(hints, "ctxwarden")
    added = False
    for layer in layers:
        for key, kind in declared_keys(layer).items():
            if key in hints and hints[key] != kind:
                raise LayerStateError(
                    f"layer {layer.name!r} declares state key {key!r}, which {owners[key]} already declares with "
                    f"another type. Fix: rename the layer's key (e.g. {layer.name}_{key})."
                )
            if key not in hints:
                hints[key], owners[key], added = kind, f"layer {layer.name!r}", True
    if not added:
        return base
    joined: type = TypedDict(f"{base.__name__}WithLayers", hints)  # type: ignore[misc]
    return joined


def check_state(layer: Any, edit: LayerEdit | None, allowed: Iterable[str]) -> LayerEdit | None:
    """`edit`, after checking that every state key it writes is one the agent keeps."""
    if edit is None or not edit.state:
        return edit
    unknown = sorted(set(edit.state) - set(allowed))
    if unknown:
        raise LayerStateError(
            f"layer {getattr(layer, 'name', layer)!r} keeps state under {unknown[0]!r}, which is not in the agent's "
            "state schema, so it would be dropped. Fix: declare it on the layer, e.g. state_schema = MyState with "
            f"class MyState(AgentState): {unknown[0]}: Annotated[NotRequired[dict], PrivateStateAttr]."
        )
    return edit


class StateCheckedLayer:
    """A custom layer, run as it is, whose state writes are checked against the keys the agent keeps."""

    def __init__(self, layer: ContextLayer, allowed: Iterable[str]) -> None:
        self.layer = layer
        self.name = layer.name
        self.allowed = frozenset(allowed)

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return check_state(self.layer, self.layer.shape(request, budget), self.allowed)

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return check_state(self.layer, await self.layer.ashape(request, budget), self.allowed)


__all__ = [
    "CallBudget",
    "ContextLayer",
    "LayerEdit",
    "PendingEvent",
    "StateCheckedLayer",
    "check_state",
    "declared_keys",
    "joined_schema",
]
