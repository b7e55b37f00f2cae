"""The trace events of one model call or tool call, built from what the core middleware saw.

Kept apart from the middleware, which decides when each is written: a model switch and
a measured overflow before the call, a provider's refusal after it, a tool call with
its sizes and time; and whether a reply goes on to its tools (its usage event can then
be written while they run).
"""

from __future__ import annotations

import json
import time
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest
from langchain.tools.tool_node import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from ctxwarden.core.layers import CallBudget, PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.refusal import is_context_overflow, stated_limit
from ctxwarden.core.stamp import RECENT, last_stamped


def asks_for_tools(result: Any) -> bool:
    """Whether the stamped reply calls tools (so the agent's loop goes on to the tools node)."""
    if isinstance(result, ExtendedModelResponse):
        result = result.model_response
    messages = [result] if isinstance(result, AIMessage) else list(getattr(result, "result", None) or ())
    return any(isinstance(m, AIMessage) and m.tool_calls for m in messages)


def before_call_events(request: ModelRequest[Any], budget: CallBudget) -> list[PendingEvent]:
    """A model switch (this call's model differs from the last one's) and a measured overflow."""
    events: list[PendingEvent] = []
    found = last_stamped(request.messages, limit=RECENT)
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


def failed_call_events(exc: Exception, budget: CallBudget) -> list[PendingEvent]:
    if not is_context_overflow(exc):
        return []
    payload = {
        "stage": "provider",
        "input_tokens": budget.used,
        "window": budget.window.tokens,
        "error": f"{type(exc).__name__}: {exc}"[:500],
        "stated_window": stated_limit(exc),  # the limit the refusal names, if it names one (`core.stated_window`)
    }
    return [("context_overflow", payload, budget.window.model)]


def tool_event(
    request: ToolCallRequest, result: ToolMessage | Command[Any] | None, started: float, error: Exception | None
) -> PendingEvent:
    call = request.tool_call
    payload: dict[str, Any] = {
        "name": call.get("name"),
        "call_id": call.get("id"),
        "args_chars": len(json.dumps(call.get("args", {}), default=str, ensure_ascii=False)),
        "result_chars": result_chars(result),
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "error": f"{type(error).__name__}: {error}"[:500] if error is not None else None,
    }
    if isinstance(result, ToolMessage) and result.status == "error":
        payload["error"] = str(result.content)[:500]
    return ("tool_call", payload, None)


def failed_tool_events(request: ToolCallRequest, started: float, error: Exception) -> list[PendingEvent]:
    """The `tool_call` event of a tool call that raised; none for LangGraph's pause (an interrupt asking a human,
    which the call resumes from: not a failure)."""
    return [] if isinstance(error, GraphBubbleUp) else [tool_event(request, None, started, error)]


def result_chars(result: ToolMessage | Command[Any] | None) -> int:
    if isinstance(result, ToolMessage):
        return len(result.content) if isinstance(result.content, str) else len(json.dumps(result.content, default=str))
    if isinstance(result, Command) and isinstance(result.update, dict):
        messages = result.update.get("messages") or []
        return sum(len(str(m.content)) for m in messages if isinstance(m, ToolMessage))
    return 0


def usage_event(message: AIMessage, budget: CallBudget, meter: TokenMeter) -> PendingEvent:
    """The `model_usage` event of an answered call: the provider's reported usage, else the meter's estimate."""
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
            "output_tokens": meter.message_tokens(message),
            "cached_input_tokens": 0,
            "estimated": True,
        }
    payload["fraction"] = round(payload["input_tokens"] / budget.window.tokens, 4)
    return ("model_usage", payload, budget.window.model)


__all__ = [
    "asks_for_tools",
    "before_call_events",
    "failed_call_events",
    "failed_tool_events",
    "result_chars",
    "tool_event",
    "usage_event",
]
