"""The peers a user would pick instead of ctxwarden, replayed client-side in the bench.

Each peer is a middleware in deepagents' summarization slot that rewrites what one model
call receives, following the peer's own published semantics (read from its source or its
API documentation; docs/benchmarks.md names the source of every setting):

- `AnthropicClearing`: Anthropic's server-side tool-result clearing
  (`clear_tool_uses_20250919`). The API is stateless, so every request is edited afresh:
  when the request's input passes `trigger`, every tool result but the newest `keep` is
  replaced by a placeholder (tools in `exclude_tools` never), and, with
  `clear_tool_inputs`, the calls' arguments too; if that would free less than
  `clear_at_least`, nothing is cleared.
- `AnthropicCompaction`: Anthropic's compaction (`compact_20260112`). When the input passes
  `trigger`, the same request summarizes the conversation (so its prefix is cached) and
  every later request starts from the summary: what came before it is dropped. The newest
  step (the call and the results the compacting request answers) stays after the summary,
  here and in `CodexCompaction`: a replay must show every call its newest results.
- `ObservationMasking`: OpenHands' `ObservationMaskingCondenser`: observations older than
  the newest `attention_window` events read `<MASKED>`. It does not answer a context-window
  error itself; OpenHands' controller then forgets the older half of the events, keeping
  the first user message.
- `SummarizingCondenser`: OpenHands' `LLMSummarizingCondenser`: when the events number more
  than `max_size`, or a call would overflow (OpenHands' condensation request), the first
  `keep_first` events stay, the newest `max_size // 2 - keep_first - 1` stay, and the rest
  is summarized (with the previous summary) from a prompt of the events as text.
- `CodexCompaction`: Codex's auto-compaction: at `token_limit` the history is summarized by
  a request of its own (the history plus the compaction prompt, no tools), and the history
  becomes the initial context, the most recent user messages up to `user_budget` tokens,
  and the summary as a user message.

Summaries come from the bench's fixed summarizer, as for every strategy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxwarden.core.meter import TokenMeter

CLEARED = "[cleared]"
MASKED = "<MASKED>"
SUMMARY_PROMPT = "Summarize the conversation so far for a continuation: goals, files, decisions, errors, next steps."


class _Peer(AgentMiddleware):
    """Occupies deepagents' summarization slot and rewrites each call's messages with `view`."""

    def __init__(self, window: int, summarizer: Any, meter: TokenMeter | None = None) -> None:
        super().__init__()
        self.window = window
        self.summarizer = summarizer
        self.meter = meter or TokenMeter()

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"

    def view(self, request: ModelRequest) -> list[Any]:
        raise NotImplementedError

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(request.override(messages=self.view(request)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        return await handler(request.override(messages=self.view(request)))

    def tokens(self, request: ModelRequest, messages: Sequence[BaseMessage]) -> int:
        fixed = self.meter.tools_tokens(request.tools)
        if request.system_message is not None:
            fixed += self.meter.message_tokens(request.system_message)
        return fixed + sum(self.meter.message_tokens(m) for m in messages)

    def summarize(self, request: ModelRequest, messages: Sequence[BaseMessage], *, with_tools: bool) -> str:
        """Ask the summarizer; `with_tools` sends the call's own tools and system prompt first (a request that
        continues the call, as a server-side compaction does), else the messages alone."""
        tools = [convert_to_openai_tool(t) for t in request.tools] if with_tools else []
        head: list[BaseMessage] = []
        if with_tools and request.system_message is not None:
            head = [request.system_message]
        reply = self.summarizer.invoke([*head, *messages], tools=tools)
        return str(reply.content)


def _tool_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    return {str(c["id"]): c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}


class AnthropicClearing(_Peer):
    def __init__(
        self,
        window: int,
        summarizer: Any,
        *,
        trigger: int,
        keep: int = 3,
        clear_at_least: int = 0,
        exclude_tools: Sequence[str] = (),
        clear_tool_inputs: bool = False,
    ) -> None:
        super().__init__(window, summarizer)
        self.trigger, self.keep, self.clear_at_least = trigger, keep, clear_at_least
        self.exclude_tools, self.clear_tool_inputs = frozenset(exclude_tools), clear_tool_inputs

    def view(self, request: ModelRequest) -> list[Any]:
        messages: list[Any] = list(request.messages)
        if self.tokens(request, messages) <= self.trigger:
            return messages
        names = _tool_names(messages)
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        candidates = results[: max(0, len(results) - self.keep)]
        chosen = [i for i in candidates if names.get(str(messages[i].tool_call_id), "") not in self.exclude_tools]
        if not chosen:
            return messages
        cleared_ids = {str(messages[i].tool_call_id) for i in chosen}
        edited = list(messages)
        for i in chosen:
            old = messages[i]
            edited[i] = ToolMessage(CLEARED, tool_call_id=old.tool_call_id, name=old.name, id=old.id)
        if self.clear_tool_inputs:
            for i, m in enumerate(messages):
                if isinstance(m, AIMessage) and any(str(c["id"]) in cleared_ids for c in m.tool_calls):
                    calls = [{**c, "args": {}} if str(c["id"]) in cleared_ids else c for c in m.tool_calls]
                    edited[i] = m.model_copy(update={"tool_calls": calls})
        pairs = zip(messages, edited, strict=True)
        freed = sum(self.meter.message_tokens(a) - self.meter.message_tokens(b) for a, b in pairs)
        return edited if freed >= self.clear_at_least else messages


class AnthropicCompaction(_Peer):
    def __init__(self, window: int, summarizer: Any, *, trigger: int) -> None:
        super().__init__(window, summarizer)
        self.trigger = trigger
        self.summary: str | None = None
        self.cut = 0

    def _current(self, request: ModelRequest) -> list[Any]:
        rest: list[Any] = list(request.messages[self.cut :])
        return rest if self.summary is None else [HumanMessage(self.summary), *rest]

    def view(self, request: ModelRequest) -> list[Any]:
        current = self._current(request)
        if self.tokens(request, current) > self.trigger:
            self.summary = self.summarize(request, [*current, HumanMessage(SUMMARY_PROMPT)], with_tools=True)
            self.cut = max(self.cut, _last_step(request.messages))
            current = self._current(request)
        return current


def _last_step(messages: Sequence[BaseMessage]) -> int:
    """Where the newest step (an AI message and the results of its calls) begins: it stays after a summary, since
    the call that compacts is the one answering it (the replay checks that every call shows the newest results)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], AIMessage):
            return index
    return len(messages)


def _safe_cut(messages: Sequence[BaseMessage], index: int) -> int:
    """The first index at or after `index` that does not separate a tool result from its call."""
    while index < len(messages) and isinstance(messages[index], ToolMessage):
        index += 1
    return index


class ObservationMasking(_Peer):
    def __init__(self, window: int, summarizer: Any, *, attention_window: int = 100) -> None:
        super().__init__(window, summarizer)
        self.attention_window = attention_window
        self.forgotten = 0  # events after the first forgotten by the controller's truncation
        self.truncations = 0

    def _masked(self, request: ModelRequest) -> list[Any]:
        events: list[Any] = list(request.messages)
        events = events[:1] + events[1 + self.forgotten :]
        last = len(events) - self.attention_window
        return [
            ToolMessage(MASKED, tool_call_id=e.tool_call_id, name=e.name, id=e.id)
            if isinstance(e, ToolMessage) and i < last
            else e
            for i, e in enumerate(events)
        ]

    def view(self, request: ModelRequest) -> list[Any]:
        events = self._masked(request)
        while self.tokens(request, events) > self.window and len(events) > 3:
            rest = list(request.messages)[1 + self.forgotten :]
            self.forgotten += _safe_cut(rest, len(rest) // 2)
            self.truncations += 1
            events = self._masked(request)
        return events


class SummarizingCondenser(_Peer):
    def __init__(
        self, window: int, summarizer: Any, *, keep_first: int = 1, max_size: int = 100, max_event_length: int = 10_000
    ) -> None:
        super().__init__(window, summarizer)
        self.keep_first, self.max_size, self.max_event_length = keep_first, max_size, max_event_length
        self.summary: str | None = None
        self.forgotten_to = keep_first  # events before this index (after the head) are summarized

    def _current(self, request: ModelRequest) -> list[Any]:
        events: list[Any] = list(request.messages)
        head, rest = events[: self.keep_first], events[self.forgotten_to :]
        return head + ([HumanMessage(self.summary)] if self.summary is not None else []) + rest

    def view(self, request: ModelRequest) -> list[Any]:
        current = self._current(request)
        if len(current) > self.max_size or self.tokens(request, current) > self.window:
            events: list[Any] = list(request.messages)
            from_tail = self.max_size // 2 - self.keep_first - 1
            start = _safe_cut(events, max(self.forgotten_to, len(events) - from_tail))
            forgotten = events[self.forgotten_to : start]
            if forgotten:
                prompt = "\n\n".join([SUMMARY_PROMPT, self.summary or "", *(self._event_text(e) for e in forgotten)])
                self.summary = self.summarize(request, [HumanMessage(prompt)], with_tools=False)
                self.forgotten_to = start
                current = self._current(request)
        return current

    def _event_text(self, event: BaseMessage) -> str:
        text = f"{event.type}: {event.content}"
        if isinstance(event, AIMessage) and event.tool_calls:
            text += " " + " ".join(f"{c['name']}({c['args']})" for c in event.tool_calls)
        return text[: self.max_event_length]


@dataclass(slots=True)
class _CodexState:
    summary: str | None = None
    cut: int = 0
    kept_users: list[str] = field(default_factory=list)


class CodexCompaction(_Peer):
    def __init__(self, window: int, summarizer: Any, *, token_limit: int, user_budget: int = 20_000) -> None:
        super().__init__(window, summarizer)
        self.token_limit, self.user_budget = token_limit, user_budget
        self.state = _CodexState()

    def _current(self, request: ModelRequest) -> list[Any]:
        rest: list[Any] = list(request.messages[self.state.cut :])
        if self.state.summary is None:
            return rest
        return [*(HumanMessage(u) for u in self.state.kept_users), HumanMessage(self.state.summary), *rest]

    def view(self, request: ModelRequest) -> list[Any]:
        current = self._current(request)
        if self.tokens(request, current) >= self.token_limit:
            system = [request.system_message] if request.system_message is not None else []
            summary = self.summarize(request, [*system, *current, HumanMessage(SUMMARY_PROMPT)], with_tools=False)
            users = [str(m.content) for m in request.messages if isinstance(m, HumanMessage)]
            cut = max(self.state.cut, _last_step(request.messages))
            self.state = _CodexState(summary, cut, self._recent_users(users))
            current = self._current(request)
        return current

    def _recent_users(self, users: Sequence[str]) -> list[str]:
        """The newest user messages up to the budget, the one that crosses it cut to fit (as Codex does)."""
        kept: list[str] = []
        remaining = self.user_budget
        for text in reversed(users):
            if remaining <= 0:
                break
            tokens = self.meter.counter(text)
            if tokens <= remaining:
                kept.append(text)
                remaining -= tokens
            else:
                kept.append(text[: remaining * 4] + "\n…tokens truncated…")
                break
        return list(reversed(kept))


__all__ = [
    "CLEARED",
    "MASKED",
    "AnthropicClearing",
    "AnthropicCompaction",
    "CodexCompaction",
    "ObservationMasking",
    "SummarizingCondenser",
]
