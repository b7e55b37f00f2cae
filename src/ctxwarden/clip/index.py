"""What clearing reads from one thread, indexed once per message and extended with the new ones.

Clearing runs on every model call, and between two calls a thread only grows, so what it
needs from the history — which calls were made, which results came back, what clearing
each would free, how many model turns called tools — is read from each message once. A
call that adds one message costs an identity check of the indexed prefix (done in C) plus
that message; a list that does not extend the indexed one (another thread, a fold's new
view, a fork) is indexed again from its start.

What clearing would free is an *estimate* (a result's tokens less its gist budget and its
pointer line, or nothing for a result smaller than that, plus the text of its call's message,
which leaves with it; a clipped argument's tokens less its pointer), the same one for every call, so
that weighing the candidates never builds a placeholder clearing may not make, and a
deferred batch is weighed in O(1): the batch's own placeholders are measured once made.

An index holds references to the messages of the list it indexes, as the thread's own state
does, and never a message that has left it; the clearing layer keeps one per thread it shaped
last (`MAX_THREADS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxwarden.clip.placeholders import has_text
from ctxwarden.clip.preview import CHARS_PER_TOKEN
from ctxwarden.core.list_totals import starts_with
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import text_of

T = TypeVar("T")

FRAMING_TOKENS = 8
"""About what a calling message costs besides its text and its arguments (framing, role, tool name)."""

POINTER_TOKENS = 60
"""About what a placeholder's pointer line costs (tool, size, line counts, the `recall` call, a file path)."""

MAX_THREADS = 16
"""Threads (thread id and namespace) whose index the clearing layer keeps."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A result clearing may replace, or a large argument it may clip: where, which call, and what it would free."""

    position: int
    call_id: str
    saving: int


def result_saving(tokens: int, policy: ContextPolicy) -> int:
    """Tokens clearing a `tokens`-token result would free, its gist estimated at its full budget."""
    return tokens - min(policy.gist_max_tokens, int(tokens * policy.gist_share)) - POINTER_TOKENS


class ThreadIndex:
    """The calls, results and clearing candidates of one message list, extended as the list grows."""

    __slots__ = (
        "_hidden",
        "_hidden_counted",
        "_hidden_saving",
        "args",
        "caller_at",
        "callers",
        "largest",
        "memo",
        "messages",
        "meter",
        "names",
        "policy",
        "result_at",
        "results",
        "running",
        "tool_results",
        "total",
    )

    def __init__(self, policy: ContextPolicy, meter: TokenMeter) -> None:
        self.policy, self.meter = policy, meter
        self._reset()

    def _reset(self) -> None:
        self.messages: list[BaseMessage] = []
        self.running: list[int] = []
        """Tokens of the messages up to each position, for the cost-first mask (`clip.mask`); empty otherwise."""
        self.tool_results: list[int] = []
        """Positions of every tool result."""
        self.callers: list[int] = []
        """Positions of every AI message that called tools (one model turn each)."""
        self.results: list[Candidate] = []
        """Results clearing may take: every one whose tool is not in `clear_exclude_tools`."""
        self.args: list[Candidate] = []
        """Arguments clearing may clip: at least `clip_args_min_tokens`, their tool not excluded."""
        self.names: dict[str, str] = {}
        self.result_at: dict[str, int] = {}
        """Position of each call's result, by call id."""
        self.caller_at: dict[str, int] = {}
        """Position of the AI message that made each call, by call id."""
        self.total = 0
        """What clearing every candidate would free."""
        self.largest = 0
        """What clearing the largest candidate would free: a batch overshoots what it needs by less."""
        self.memo: dict[str, Any] = {}
        """What the clearing layer derived from this list (its mask, its view): dropped when the index starts over."""
        self._hidden: tuple[Set[str], Set[str]] | None = None
        self._hidden_saving = 0
        self._hidden_counted = (0, 0)

    def read(self, name: str, raw: Any, parse: Callable[[], T]) -> T:
        """`parse()` of the thread's private state `raw`, parsed again only when `raw` is another object than the last
        time `name` was read (a state the call did not change is the same object)."""
        memo = self.memo.get(name)
        if memo is not None and memo[0] is raw:
            parsed: T = memo[1]
            return parsed
        parsed = parse()
        self.memo[name] = (raw, parsed)
        return parsed

    def sync(self, messages: Sequence[BaseMessage]) -> ThreadIndex:
        """Index the messages added since the last call; start over when `messages` does not extend the indexed."""
        known = len(self.messages)
        if known > len(messages) or not starts_with(messages, self.messages):
            self._reset()
            known = 0
        for position in range(known, len(messages)):
            self._add(position, messages[position])
        return self

    def _add(self, position: int, message: BaseMessage) -> None:
        self.messages.append(message)
        if self.policy.mask_after_turns is not None:  # counted already: the meter measured the list
            self.running.append((self.running[-1] if self.running else 0) + self.meter.message_tokens(message))
        excluded = self.policy.clear_exclude_tools
        if isinstance(message, ToolMessage):
            self.tool_results.append(position)
            self.result_at[message.tool_call_id] = position
            if (message.name or self.names.get(message.tool_call_id)) not in excluded:
                saving = max(0, self._result_saving(message))  # a result smaller than a placeholder stays whole
                self._take(self.results, position, message.tool_call_id, saving + self._caller_text(position))
        elif isinstance(message, AIMessage) and message.tool_calls:
            self.callers.append(position)
            sizes = self.meter.call_args_tokens(message)
            for call in message.tool_calls:
                call_id, name = str(call.get("id")), call.get("name")
                self.names[call_id] = name
                self.caller_at[call_id] = position
                if self.policy.clip_tool_args and name not in excluded:
                    size = sizes[call_id]
                    if size >= self.policy.clip_args_min_tokens:
                        self._take(self.args, position, call_id, size - POINTER_TOKENS)

    def _result_saving(self, message: ToolMessage) -> int:
        return result_saving(self.meter.message_tokens(message), self.policy)

    def _caller_text(self, result_at: int) -> int:
        """The text tokens of the message that made the result at `result_at`, when that is its only call: hiding the
        result hides the text too (`clip.placeholders`). Estimated from counts the meter has: it tokenizes nothing."""
        message = self.messages[result_at]
        assert isinstance(message, ToolMessage)
        position = self.caller_at.get(message.tool_call_id)
        if position is None or not self.policy.clear_call_text:
            return 0
        caller = self.messages[position]
        assert isinstance(caller, AIMessage)
        if len(caller.tool_calls) != 1 or not has_text(caller):
            return 0
        if not isinstance(caller.content, str):  # a provider's blocks repeat the arguments: judged by the text's length
            return len(text_of(caller)) // CHARS_PER_TOKEN
        calls = sum(self.meter.call_args_tokens(caller).values())
        return max(0, self.meter.message_tokens(caller) - calls - FRAMING_TOKENS)

    def _take(self, into: list[Candidate], position: int, call_id: str, saving: int) -> None:
        if saving > 0:
            into.append(Candidate(position, call_id, saving))
            self.total += saving
            self.largest = max(self.largest, saving)

    # --- what the newest turns keep ------------------------------------------------
    def kept_results(self, keep: int) -> set[str]:
        """Call ids of the results clearing never touches (`order.kept_results`, read from the index)."""
        if keep <= 0:
            return set()
        ids = {self._call_id(p) for p in self.tool_results[-keep:]}
        if self.callers:
            ids |= {str(c.get("id")) for c in self._caller(self.callers[-1]).tool_calls}
        return ids

    def kept_callers_from(self, keep: int) -> int:
        """Position of the oldest of the newest `keep` tool-calling turns, whose arguments stay whole."""
        return self.callers[-keep] if 0 < keep <= len(self.callers) else (0 if keep > 0 else len(self.messages))

    def disposable(self, cleared: Set[str], clipped: Set[str], keep: int) -> int:
        """What clearing every candidate not yet cleared, and not kept, would free (estimated).

        O(1) per call while the cleared sets are the same objects: what they hide is summed
        once, then only for candidates added since; the kept newest are a few at the tail.
        """
        if self._hidden is None or self._hidden[0] is not cleared or self._hidden[1] is not clipped:
            self._hidden, self._hidden_saving, self._hidden_counted = (cleared, clipped), 0, (0, 0)
        results_seen, args_seen = self._hidden_counted
        self._hidden_saving += sum(c.saving for c in self.results[results_seen:] if c.call_id in cleared)
        self._hidden_saving += sum(c.saving for c in self.args[args_seen:] if c.call_id in clipped)
        self._hidden_counted = (len(self.results), len(self.args))
        kept = self.kept_results(keep)
        floor = min(self.tool_results[-keep:][:1] + self.callers[-1:], default=len(self.messages))
        floor = floor if kept else len(self.messages)
        held = 0
        for candidate in reversed(self.results):
            if candidate.position < floor:
                break
            if candidate.call_id in kept and candidate.call_id not in cleared:
                held += candidate.saving
        start = self.kept_callers_from(keep)
        for candidate in reversed(self.args):
            if candidate.position < start:
                break
            if candidate.call_id not in clipped:
                held += candidate.saving
        return self.total - self._hidden_saving - held

    def tokens_from(self, position: int) -> int:
        """Tokens of the messages from `position` to the end (cost-first only: see `running`)."""
        return self.running[-1] - (self.running[position - 1] if position > 0 else 0) if self.running else 0

    def _call_id(self, position: int) -> str:
        message = self.messages[position]
        assert isinstance(message, ToolMessage)
        return message.tool_call_id

    def _caller(self, position: int) -> AIMessage:
        message = self.messages[position]
        assert isinstance(message, AIMessage)
        return message


__all__ = ["FRAMING_TOKENS", "MAX_THREADS", "POINTER_TOKENS", "Candidate", "ThreadIndex", "result_saving"]
