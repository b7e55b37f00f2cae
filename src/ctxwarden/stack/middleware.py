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
provider's reported input tokens. The reply, and every tool result on its way into
the thread, also carries its own token count (`core.stamp`), so the process that next
loads the thread reads the counts instead of tokenizing the history again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from ctxwarden.clip.evict import Evictor
from ctxwarden.clip.recall import make_recall_tool
from ctxwarden.core.foreground import FOREGROUND
from ctxwarden.core.gauge_note import GaugeNote
from ctxwarden.core.identity import Identities, as_received
from ctxwarden.core.layers import CallBudget, ContextLayer
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.refusal import is_context_overflow
from ctxwarden.core.runtime import agent_tool, check_thread_id
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.stated_window import with_stated
from ctxwarden.core.window import Window, resolve_window
from ctxwarden.fold.tool import make_compact_tool
from ctxwarden.stack.call_events import (
    asks_for_tools,
    before_call_events,
    failed_call_events,
    failed_tool_events,
    tool_event,
    usage_event,
)
from ctxwarden.stack.originals_guard import refused_change
from ctxwarden.stack.pick import ModelPicker
from ctxwarden.stack.refusals import Refusals, Retry, forced, refused_ahead, with_room
from ctxwarden.stack.search_scope import ThreadScope
from ctxwarden.stack.shaped import ShapedCall
from ctxwarden.stack.tool_copies import ToolInstances
from ctxwarden.stack.tool_names import refuse_reserved
from ctxwarden.thread.history import history_start
from ctxwarden.thread.view import ContextState
from ctxwarden.trace.recorder import PendingEvent, TraceRecorder

SLOT_NAME = "SummarizationMiddleware"
"""The deepagents slot this middleware replaces, so it runs before any user middleware."""


class ContextWindowMiddleware(AgentMiddleware):
    """Measures every model call against the called model's window, runs the lifecycle layers, records the trace."""

    state_schema = ContextState

    def __init__(
        self,
        *,
        policy: ContextPolicy | None = None,
        meter: TokenMeter | None = None,
        layers: Sequence[ContextLayer] = (),
        recorder: TraceRecorder | None = None,
        backend: Any = None,
        pick_model: ModelPicker | None = None,
    ) -> None:
        super().__init__()
        self.pick_model = pick_model
        self.policy = policy or DEFAULT_POLICY
        self.meter = meter or TokenMeter()
        self.layers = tuple(layers)
        self._answered = tuple(hook for layer in self.layers if callable(hook := getattr(layer, "answered", None)))
        self.note = GaugeNote(self.policy, self.meter)  # after every layer: it reports the fill the call is sent with
        self.recorder = recorder or TraceRecorder(None)
        self.evictor = Evictor(backend, self.policy, self.meter)
        scope = ThreadScope(backend, self.policy, self.meter)  # recall(query=...) marks what the model sees
        self.tools = [make_recall_tool(backend, scope=scope, meter=self.meter), make_compact_tool()]
        self.tool_instances = ToolInstances()  # a tool copied on every call keeps its schema memo
        self.identities = Identities(calls=True)  # the thread and its views, identified once (`core.identity`)

    @property
    def name(self) -> str:
        """Takes deepagents' summarization slot, ahead of user middleware (see module docstring)."""
        return SLOT_NAME

    def budget(
        self,
        request: ModelRequest[Any],
        *,
        force: bool = False,
        like: CallBudget | None = None,
        before: ModelRequest[Any] | None = None,
        message_tokens: int | None = None,
        window: Window | None = None,
    ) -> CallBudget:
        """Measure `request` against `window`, else the window of `request.model` (or the smaller one a provider
        stated refusing a call of the thread, `core.stated_window`); the window of `like`, measured for the same
        model earlier in this call, is not resolved again. When `like` was measured on `before` and only the system
        message changed since, as the admitted sections change it, the messages and tools are not measured again;
        when only the messages changed and the layer that changed them measured them (`message_tokens`), nor is
        anything else."""
        if like is not None:
            window = like.window
        elif window is None:
            window = with_stated(resolve_window(request.model, self.policy.window), request.state)
        if like is not None and before is not None and request.tools is before.tools:
            if request.messages is before.messages:
                system = self.meter.system_tokens(request.system_message)
                return CallBudget(window, dataclasses.replace(like.measurement, system=system), self.policy, force)
            if message_tokens is not None and request.system_message is before.system_message:
                measured = dataclasses.replace(like.measurement, messages=message_tokens)
                return CallBudget(window, measured, self.policy, force)
        measurement = self.meter.measure(
            request.messages,
            system_message=request.system_message,
            tools=request.tools,
            model=window.model,
        )
        return CallBudget(window, measurement, self.policy, force)

    def _picked(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with the model the run's context picks (before anything is measured), with each copy of a
        tool seen before swapped for its first instance (see `stack.tool_copies`), and with its messages and the
        thread's identified (`core.identity`): the layers find every message by an id no other message has."""
        model = self.pick_model(request) if self.pick_model is not None else None
        refuse_reserved(request.tools, "the agent's tools", self.tools)  # before any tool of it runs
        tools = self.tool_instances.reused(request.tools)
        changes: dict[str, Any] = {}
        if model is not None and model is not request.model:
            changes["model"] = model
        if tools is not request.tools:
            changes["tools"] = tools
        messages = self.identities(request.messages)
        if messages is not request.messages:
            changes["messages"] = messages
        state = request.state
        raw = state.get("messages") if isinstance(state, dict) else None
        if raw:
            thread = messages if raw is request.messages else as_received(self.identities(raw), messages)
            if thread is not raw:
                changes["state"] = {**state, "messages": thread}
        return request.override(**changes) if changes else request

    def _begun(self, request: ModelRequest[Any], retry: Retry | None) -> tuple[ShapedCall, Callable[..., CallBudget]]:
        """The call picked and measured before any layer, and how each layer's edit is measured again."""
        started = history_start(request.state)  # before any event: the report counts from here
        request = self._picked(request)
        force, window = (retry.force, retry.window) if retry is not None else (False, None)
        budget = with_room(self.budget(request, force=force, window=window))
        shaped = ShapedCall(request, budget, self.note.carried(request))
        shaped.state.update(started)
        return shaped, functools.partial(self.budget, force=force)

    def _shape(self, request: ModelRequest[Any], retry: Retry | None = None) -> ShapedCall:
        with FOREGROUND.call():  # the stack's background work waits meanwhile (`core.foreground`)
            shaped, measure = self._begun(request, retry)
            for layer in (*self.layers, self.note):
                shaped.take(layer, layer.shape(shaped.request, shaped.budget), measure, last=layer is self.note)
            return shaped

    async def _ashape(self, request: ModelRequest[Any], retry: Retry | None = None) -> ShapedCall:
        with FOREGROUND.call():
            shaped, measure = self._begun(request, retry)
            for layer in (*self.layers, self.note):
                shaped.take(layer, await layer.ashape(shaped.request, shaped.budget), measure, last=layer is self.note)
            return shaped

    # --- model calls ------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        with agent_tool(None):  # ctxwarden's own writes (a fold's history), even in a subagent an agent's tool started
            return self._model_call(request, handler)

    def _model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        check_thread_id()
        shaped, first, refusals = self._shape(request), None, Refusals(request.state, self.meter)
        self.recorder.record_later(before_call_events(shaped.request, shaped.budget))
        if refused_ahead(shaped.budget):  # one round of forced clearing and folding before it is sent
            first, shaped = shaped, self._shape(request, forced(shaped.budget))
        while True:
            try:
                response = handler(shaped.request)
                break
            except Exception as exc:
                self.recorder.record_all(failed_call_events(exc, shaped.budget))
                if not is_context_overflow(exc):
                    raise
                retry = refusals.retry(exc, shaped, first)  # raises when nothing is left to try
                first, shaped = first or shaped, self._shape(request, retry)
                if refused_ahead(shaped.budget):
                    shaped = self._shape(request, forced(shaped.budget))
                refusals.keep(shaped)
        with FOREGROUND.call():  # the trace written in the call too: background work waits for it
            # the lifecycle events of the shaping that was answered alone: a middleware ahead that retries the call, or
            # falls back to another model, shapes it again, and each attempt's batches and folds were traced as made
            self.recorder.record_all(shaped.events)
            self._answer(shaped)
            result, events = self._finish(response, shaped)
            if asks_for_tools(result):  # the tools run next: the usage event is written meanwhile, off the call's path
                self.recorder.record_later(events)
            else:  # the run may end here: everything it recorded is in the trace when it returns, for any reader
                self.recorder.flush()
                self.recorder.record_all(events)
        return cast("ModelResponse[Any]", result)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        with agent_tool(None):
            return await self._amodel_call(request, handler)

    async def _amodel_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        check_thread_id()
        shaped, first, refusals = await self._ashape(request), None, Refusals(request.state, self.meter)
        self.recorder.record_later(before_call_events(shaped.request, shaped.budget))
        if refused_ahead(shaped.budget):
            first, shaped = shaped, await self._ashape(request, forced(shaped.budget))
        while True:
            try:
                response = await handler(shaped.request)
                break
            except Exception as exc:
                await self.recorder.arecord_all(failed_call_events(exc, shaped.budget))
                if not is_context_overflow(exc):
                    raise
                retry = refusals.retry(exc, shaped, first)
                first, shaped = first or shaped, await self._ashape(request, retry)
                if refused_ahead(shaped.budget):
                    shaped = await self._ashape(request, forced(shaped.budget))
                refusals.keep(shaped)
        with FOREGROUND.call():
            await self.recorder.arecord_all(shaped.events)
            self._answer(shaped)
            result, events = self._finish(response, shaped)
            if asks_for_tools(result):
                self.recorder.record_later(events)
            else:
                await asyncio.to_thread(self.recorder.flush)
                await self.recorder.arecord_all(events)
        return cast("ModelResponse[Any]", result)

    def _answer(self, shaped: ShapedCall) -> None:
        """Tell the layers that take it (`answered`) that the call was answered; what they return joins its state."""
        for hook in self._answered:
            shaped.state.update(hook(shaped.request) or {})

    def _finish(self, response: Any, shaped: ShapedCall) -> tuple[Any, list[PendingEvent]]:
        """Stamp the reply, build its usage event, and attach the layers' private state as a state update."""
        result, events = self._record(response, shaped)
        if not shaped.state:
            return result, events
        if isinstance(result, ExtendedModelResponse):
            command = result.command
            update = dict(command.update) if command is not None and isinstance(command.update, dict) else {}
            result.command = Command(update={**update, **shaped.state})
            return result, events
        if isinstance(result, AIMessage):
            result = ModelResponse(result=[result])
        return ExtendedModelResponse(model_response=result, command=Command(update=dict(shaped.state))), events

    def _record(self, response: Any, shaped: ShapedCall) -> tuple[Any, list[PendingEvent]]:
        """Calibrate the meter, stamp the budget on the response's AI message, and build its usage event."""
        if isinstance(response, ExtendedModelResponse):
            response.model_response, inner = self._record(response.model_response, shaped)
            return response, inner
        if isinstance(response, AIMessage):
            stamped = self._stamp(response, shaped)
            return stamped, [usage_event(stamped, shaped.budget, self.meter)]
        messages = list(response.result)
        events: list[PendingEvent] = []
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], AIMessage):
                messages[i] = self._stamp(messages[i], shaped)
                events.append(usage_event(messages[i], shaped.budget, self.meter))
                break
        return ModelResponse(result=messages, structured_response=response.structured_response), events

    def _stamp(self, message: AIMessage, shaped: ShapedCall) -> AIMessage:
        budget = shaped.budget
        reported = message.usage_metadata["input_tokens"] if message.usage_metadata else 0
        if reported:
            self.meter.calibrate(budget.window.model, estimated=budget.measurement.estimate, reported=reported)
        record = (
            budget.as_metadata()
            | shaped.stamp
            | {
                "applied": shaped.applied,
                "events": sorted({kind for kind, _payload, _model in shaped.events}),
                "reported_input_tokens": reported or None,
            }
        )
        return cast(AIMessage, self.meter.carry(message, {METADATA_KEY: record}))  # one copy: stamp and count

    # --- tool calls -------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        started = time.perf_counter()
        try:
            with agent_tool(_tool_name(request)):  # the agent's tool: it may not change ctxwarden's originals
                result = refused_change(request) or handler(request)
        except Exception as exc:
            self.recorder.record_all(failed_tool_events(request, started, exc))
            raise
        called = tool_event(request, result, started, None)
        with agent_tool(None):  # ctxwarden's own write
            evicted, evictions = self.evictor.evict(request, result)
        self.recorder.record_all([called, *evictions])
        return self._carry(evicted)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        started = time.perf_counter()
        try:
            with agent_tool(_tool_name(request)):
                result = refused_change(request) or await handler(request)
        except Exception as exc:
            await self.recorder.arecord_all(failed_tool_events(request, started, exc))
            raise
        called = tool_event(request, result, started, None)
        with agent_tool(None):
            evicted, evictions = await self.evictor.aevict(request, result)
        await self.recorder.arecord_all([called, *evictions])
        return self._carry(evicted)

    def _carry(self, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        """The tool's result with each tool message carrying its token count into the thread."""
        if isinstance(result, ToolMessage):
            return cast(ToolMessage, self.meter.carry(result))
        update = result.update if isinstance(result, Command) else None
        if not isinstance(update, dict) or not update.get("messages"):
            return result
        messages = [self.meter.carry(m) if isinstance(m, ToolMessage) else m for m in update["messages"]]
        return dataclasses.replace(result, update={**update, "messages": messages})


def _tool_name(request: ToolCallRequest) -> str:
    return str(request.tool_call.get("name") or "tool")


__all__ = ["SLOT_NAME", "ContextWindowMiddleware"]
