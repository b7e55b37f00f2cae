"""The per-call core: resolve the window, measure the call, run the layers in order.

One middleware owns the model-call path so the lifecycle's order is a list, not an
accident of middleware placement: each layer sees the request the cheaper layer
before it produced, and is handed a budget re-measured after that layer. It takes
the `SummarizationMiddleware` slot of `create_deep_agent` (same `name`, replaced in
place), because deepagents places that slot ahead of user middleware: a layer passed
as ordinary user middleware would run *inside* summarization and be measured too late.

It also records the trace (model usage, tool calls, model switches, overflows) through
one `TraceRecorder`; being in the slot, it is inherited by deepagents' general-purpose
subagent, whose events carry its checkpoint namespace.

After the call, the AI message is stamped with what was measured
(`response_metadata["ctxwarden"]`), so the checkpointed thread itself records the
window, the count and the gauge of every call, and the meter calibrates against the
provider's reported input tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.meter import Measurement, TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import METADATA_KEY, last_stamped
from ctxwarden.core.window import Window, resolve_window
from ctxwarden.errors import is_context_overflow
from ctxwarden.observe.recorder import PendingEvent, TraceRecorder

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
    """Measures every model call against the called model's window, runs the lifecycle layers, records the trace."""

    def __init__(
        self,
        *,
        policy: ContextPolicy | None = None,
        meter: TokenMeter | None = None,
        layers: Sequence[ContextLayer] = (),
        recorder: TraceRecorder | None = None,
    ) -> None:
        super().__init__()
        self.policy = policy or DEFAULT_POLICY
        self.meter = meter or TokenMeter()
        self.layers = tuple(layers)
        self.recorder = recorder or TraceRecorder(None)

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

    # --- model calls ------------------------------------------------------------
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
        self.recorder.record_all(_before_call_events(request, budget))
        try:
            response = handler(request)
        except Exception as exc:
            self.recorder.record_all(_failed_call_events(exc, budget))
            raise
        result, events = self._record(response, budget, applied)
        self.recorder.record_all(events)
        return cast("ModelResponse[Any]", result)

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
        await self.recorder.arecord_all(_before_call_events(request, budget))
        try:
            response = await handler(request)
        except Exception as exc:
            await self.recorder.arecord_all(_failed_call_events(exc, budget))
            raise
        result, events = self._record(response, budget, applied)
        await self.recorder.arecord_all(events)
        return cast("ModelResponse[Any]", result)

    def _record(self, response: Any, budget: CallBudget, applied: list[str]) -> tuple[Any, list[PendingEvent]]:
        """Calibrate the meter, stamp the budget on the response's AI message, and build its usage event."""
        if isinstance(response, ExtendedModelResponse):
            response.model_response, inner = self._record(response.model_response, budget, applied)
            return response, inner
        if isinstance(response, AIMessage):
            stamped = self._stamp(response, budget, applied)
            return stamped, [self._usage_event(stamped, budget)]
        messages = list(response.result)
        events: list[PendingEvent] = []
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], AIMessage):
                messages[i] = self._stamp(messages[i], budget, applied)
                events.append(self._usage_event(messages[i], budget))
                break
        return ModelResponse(result=messages, structured_response=response.structured_response), events

    def _stamp(self, message: AIMessage, budget: CallBudget, applied: list[str]) -> AIMessage:
        reported = message.usage_metadata["input_tokens"] if message.usage_metadata else 0
        if reported:
            self.meter.calibrate(budget.window.model, estimated=budget.measurement.estimate, reported=reported)
        record = budget.as_metadata() | {"applied": applied, "reported_input_tokens": reported or None}
        return message.model_copy(update={"response_metadata": {**message.response_metadata, METADATA_KEY: record}})

    def _usage_event(self, message: AIMessage, budget: CallBudget) -> PendingEvent:
        usage = message.usage_metadata
        payload: dict[str, Any] = {"role": "main", "window": budget.window.tokens, "measured_input_tokens": budget.used}
        if usage and usage.get("input_tokens"):
            details = usage.get("input_token_details") or {}
            payload |= {
                "input_tokens": usage["input_tokens"],
                "output_tokens": usage.get("output_tokens", 0),
                "cached_input_tokens": details.get("cache_read", 0) or 0,
                "estimated": False,
            }
        else:
            payload |= {
                "input_tokens": budget.used,
                "output_tokens": self.meter.message_tokens(message),
                "cached_input_tokens": 0,
                "estimated": True,
            }
        payload["fraction"] = round(payload["input_tokens"] / budget.window.tokens, 4)
        return ("model_usage", payload, budget.window.model)

    # --- tool calls -------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        if not self.recorder.enabled:
            return handler(request)
        started = time.perf_counter()
        try:
            result = handler(request)
        except Exception as exc:
            self.recorder.record_all([_tool_event(request, None, started, exc)])
            raise
        self.recorder.record_all([_tool_event(request, result, started, None)])
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        if not self.recorder.enabled:
            return await handler(request)
        started = time.perf_counter()
        try:
            result = await handler(request)
        except Exception as exc:
            await self.recorder.arecord_all([_tool_event(request, None, started, exc)])
            raise
        await self.recorder.arecord_all([_tool_event(request, result, started, None)])
        return result


def _before_call_events(request: ModelRequest[Any], budget: CallBudget) -> list[PendingEvent]:
    """A model switch (this call's model differs from the last one's) and a measured overflow."""
    events: list[PendingEvent] = []
    found = last_stamped(request.messages)
    previous = found[1] if found is not None else None
    if previous is not None and previous.get("model") != budget.window.model:
        events.append(
            (
                "model_switch",
                {
                    "from_model": previous.get("model"),
                    "to_model": budget.window.model,
                    "from_window": previous.get("window"),
                    "to_window": budget.window.tokens,
                },
                budget.window.model,
            )
        )
    if budget.overflow:
        events.append(
            (
                "context_overflow",
                {"stage": "measured", "input_tokens": budget.used, "window": budget.window.tokens},
                budget.window.model,
            )
        )
    return events


def _failed_call_events(exc: Exception, budget: CallBudget) -> list[PendingEvent]:
    if not is_context_overflow(exc):
        return []
    payload = {
        "stage": "provider",
        "input_tokens": budget.used,
        "window": budget.window.tokens,
        "error": f"{type(exc).__name__}: {exc}"[:500],
    }
    return [("context_overflow", payload, budget.window.model)]


def _tool_event(
    request: ToolCallRequest, result: ToolMessage | Command[Any] | None, started: float, error: Exception | None
) -> PendingEvent:
    call = request.tool_call
    payload: dict[str, Any] = {
        "name": call.get("name"),
        "call_id": call.get("id"),
        "args_chars": len(json.dumps(call.get("args", {}), default=str, ensure_ascii=False)),
        "result_chars": _result_chars(result),
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "error": f"{type(error).__name__}: {error}"[:500] if error is not None else None,
    }
    if isinstance(result, ToolMessage) and result.status == "error":
        payload["error"] = str(result.content)[:500]
    return ("tool_call", payload, None)


def _result_chars(result: ToolMessage | Command[Any] | None) -> int:
    if isinstance(result, ToolMessage):
        return len(result.content) if isinstance(result.content, str) else len(json.dumps(result.content, default=str))
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages") or []
        return sum(len(str(m.content)) for m in messages if isinstance(m, ToolMessage))
    return 0


__all__ = ["SLOT_NAME", "CallBudget", "ContextLayer", "ContextWindowMiddleware"]
