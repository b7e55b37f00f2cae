"""The per-call core: resolve the window, measure the call, run the layers in order.

One middleware owns the model-call path so the lifecycle's order is a list, not an
accident of middleware placement: each layer sees the request the cheaper layer
before it produced, and is handed a budget re-measured after that layer. It takes
the `SummarizationMiddleware` slot of `create_deep_agent` (same `name`, replaced in
place), because deepagents places that slot ahead of user middleware: a layer passed
as ordinary user middleware would run *inside* summarization and be measured too late.

After the call, the AI message is stamped with what was measured
(`response_metadata["ctxwarden"]`), so the checkpointed thread itself records the
window, the count and the gauge of every call, and the meter calibrates against the
provider's reported input tokens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.meter import Measurement, TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.window import Window, resolve_window

METADATA_KEY = "ctxwarden"
"""Key under which each AI message's `response_metadata` records its call's budget."""

SLOT_NAME = "SummarizationMiddleware"
"""The deepagents slot this middleware replaces, so it runs before any user middleware."""


@dataclass(frozen=True, slots=True)
class CallBudget:
    """One model call measured against the window of the model it goes to."""

    window: Window
    measurement: Measurement
    policy: ContextPolicy

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


@runtime_checkable
class ContextLayer(Protocol):
    """One lifecycle stage applied to a single call's view (clip, fold, ...).

    A layer returns the request unchanged when it has nothing to do, or
    `request.override(...)` with its edit; it never mutates the checkpointed state.
    """

    name: str

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> ModelRequest[Any]: ...

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> ModelRequest[Any]: ...


class ContextWindowMiddleware(AgentMiddleware):
    """Measures every model call against the called model's window and runs the lifecycle layers."""

    def __init__(
        self,
        *,
        policy: ContextPolicy | None = None,
        meter: TokenMeter | None = None,
        layers: Sequence[ContextLayer] = (),
    ) -> None:
        super().__init__()
        self.policy = policy or DEFAULT_POLICY
        self.meter = meter or TokenMeter()
        self.layers = tuple(layers)

    @property
    def name(self) -> str:
        """Takes deepagents' summarization slot, ahead of user middleware (see module docstring)."""
        return SLOT_NAME

    def budget(self, request: ModelRequest[Any]) -> CallBudget:
        """Measure `request` against the window of `request.model`."""
        window = resolve_window(request.model, self.policy.window)
        measurement = self.meter.measure(
            request.messages,
            system_message=request.system_message,
            tools=request.tools,
            model=window.model,
        )
        return CallBudget(window, measurement, self.policy)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        budget, applied = self.budget(request), []
        for layer in self.layers:
            shaped = layer.shape(request, budget)
            if shaped is not request:
                request, budget = shaped, self.budget(shaped)
                applied.append(layer.name)
        return cast("ModelResponse[Any]", self._record(handler(request), budget, applied))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        budget, applied = self.budget(request), []
        for layer in self.layers:
            shaped = await layer.ashape(request, budget)
            if shaped is not request:
                request, budget = shaped, self.budget(shaped)
                applied.append(layer.name)
        return cast("ModelResponse[Any]", self._record(await handler(request), budget, applied))

    def _record(self, response: Any, budget: CallBudget, applied: list[str]) -> Any:
        """Calibrate the meter and stamp the budget on the response's AI message."""
        if isinstance(response, ExtendedModelResponse):
            response.model_response = self._record(response.model_response, budget, applied)
            return response
        if isinstance(response, AIMessage):
            return self._stamp(response, budget, applied)
        messages = list(response.result)
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], AIMessage):
                messages[i] = self._stamp(messages[i], budget, applied)
                break
        return ModelResponse(result=messages, structured_response=response.structured_response)

    def _stamp(self, message: AIMessage, budget: CallBudget, applied: list[str]) -> AIMessage:
        reported = message.usage_metadata["input_tokens"] if message.usage_metadata else 0
        if reported:
            self.meter.calibrate(budget.window.model, estimated=budget.measurement.estimate, reported=reported)
        record = budget.as_metadata() | {"applied": applied, "reported_input_tokens": reported or None}
        return message.model_copy(update={"response_metadata": {**message.response_metadata, METADATA_KEY: record}})


__all__ = ["METADATA_KEY", "SLOT_NAME", "CallBudget", "ContextLayer", "ContextWindowMiddleware"]
