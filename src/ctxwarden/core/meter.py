"""The token meter: what one model call will receive, counted in O(new messages).

Every layer decides from this number, so it has to count what the model actually
receives — system prompt, tool schemas and messages — and it runs on every call,
so it must not recount a million-token history each time, nor keep that history
alive. What it remembers, and the bound on each:

- **per message object** (`max_cached_messages` entries, ~150 bytes each): its tokens
  and its tool calls' argument tokens, found by identity through a *weak* reference, so
  the meter never keeps a message alive — an evicted 50 MB original is freed as soon as
  the stack lets go of it;
- **per message content** (`max_cached_messages` entries): tokens by type, id, name
  and a hash of the content, so a message loaded again is not recounted even when it
  carries no count of its own;
- **recently measured lists** (`max_sequences` lists, each a copy of the list and one
  running total per message, `core.list_totals`): a call that extends, or shares a
  prefix with, a list measured before costs an identity check of the prefix plus the
  new messages. These hold the messages of the threads measured last (as their
  checkpointed state does), never a message that left every list, such as an evicted
  original;
- **tool schemas** (`MAX_TOOLS` tools by weak reference, and as many schema keys: a
  tool's class, name, description and argument schema class; the keys also in one memo
  for every meter of the process with the same counter, so an agent built anew to resume
  a thread does not convert the tools the agents before it converted).

A message that carries its own count (`core.stamp`: replies and tool results stamped
by the stack) is never tokenized again, by this process or by the next one that loads
the thread — a cold start reads counts instead of recounting the history.

An image is counted by its width and height and a PDF by its pages (`core.media`), as providers bill them;
`tokens_per_image` sets a flat count per image instead. Counts are calibrated per model against the provider's reported
`usage_metadata["input_tokens"]`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.core.caches import BoundedDict, ObjectCache
from ctxwarden.core.counters import (
    EXACT_UP_TO_CHARS,
    OFFLINE_ENCODING,
    TOKENIZER_ENV,
    ApproximateCounter,
    TextCounter,
    TiktokenCounter,
    counter_key,
    default_counter,
    sampled_count,
)
from ctxwarden.core.list_totals import ListTotals
from ctxwarden.core.measurement import Measurement
from ctxwarden.core.media import is_image, is_media, media_tokens
from ctxwarden.core.stamp import COUNT_KEY, carried, count_record

MEDIA_BY_SIZE = "media-by-size-and-length"
"""The rule a carried count of a message with images, PDFs, audio or video was made by, when they were counted by
their size and length (a count carried under the rule before, which read audio as the text of its base64, is made
again)."""

MAX_TOOLS = 256
"""Tool schemas whose counts are kept."""


class TokenMeter:
    """Counts what a model call receives, cached per message and calibrated per model."""

    def __init__(
        self,
        counter: TextCounter | Callable[[str], int] | None = None,
        *,
        tokens_per_message: int = 3,
        tokens_per_image: int | None = None,
        max_cached_messages: int = 100_000,
        max_sequences: int = 16,
        calibration_weight: float = 0.5,
    ) -> None:
        self.counter: Callable[[str], int] = counter or default_counter()
        self.tokens_per_message = tokens_per_message
        self.tokens_per_image = tokens_per_image
        self.max_cached_messages = max_cached_messages
        self.max_sequences = max_sequences
        self.calibration_weight = calibration_weight
        key = counter_key(self.counter)
        self.count_key: str | None = None if key is None else f"{key}/{tokens_per_message}/85"
        """What identifies this meter's counts in the counts messages carry (`None`: not carried). A message holding
        an image, a PDF, audio or video carries it with the rule that counted them (`MEDIA_BY_SIZE`): a thread counted
        before media were counted by size and length reads its other counts as they are, and recounts only those."""
        rule = MEDIA_BY_SIZE if tokens_per_image is None else f"media-flat-{tokens_per_image}"
        self._media_key = None if key is None else f"{self.count_key}+{rule}"
        self._by_object: ObjectCache[int] = ObjectCache(max_cached_messages)
        self._args_by_object: ObjectCache[list[int]] = ObjectCache(max_cached_messages)
        self._by_content: BoundedDict[int] = BoundedDict(max_cached_messages)
        self._by_tool: ObjectCache[int] = ObjectCache(MAX_TOOLS)
        self._by_tool_key: BoundedDict[int] = BoundedDict(MAX_TOOLS)
        self._lists = ListTotals(max_sequences)
        self._factors: dict[str, float] = {}
        self._roles: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def counter_name(self) -> str:
        """Which counter this meter uses (`approximate` or `tiktoken:<encoding>`)."""
        return str(getattr(self.counter, "name", type(self.counter).__name__))

    # --- messages -------------------------------------------------------------
    def message_tokens(self, message: BaseMessage) -> int:
        """Tokens of one message: from the object cache, the count it carries, the content cache, or counted."""
        tokens = self._by_object.get(message)
        if tokens is not None:
            return tokens
        counted_by = self._key_of(message)
        record = carried(message, counted_by) if counted_by is not None else None
        if record is not None:
            tokens = int(record["tokens"])
            args = record.get("args")
            if isinstance(args, list) and len(args) == len(getattr(message, "tool_calls", None) or ()):
                self._args_by_object.put(message, [int(a) for a in args])
        else:
            key = _content_key(message)
            tokens = self._by_content.get(key)
            if tokens is None:
                tokens = self._count_message(message)
                self._by_content.put(key, tokens)
        self._by_object.put(message, tokens)
        return tokens

    def estimate_tokens(self, message: BaseMessage) -> tuple[int, bool]:
        """`(tokens, exact)` of a message without tool calls: its count when known (cached or carried) or its text
        short, else an estimate from samples of its text (`core.counters.sampled_count`), neither counted whole nor
        cached. For an output that arrives huge and leaves the view at once, whose count is only reported."""
        if _text_chars(message.content) <= EXACT_UP_TO_CHARS or getattr(message, "tool_calls", None):
            return self.message_tokens(message), True  # what every message but a huge one takes, caches and all
        known = self._by_object.get(message)
        if known is not None:
            return known, True
        counted_by = self._key_of(message)
        if counted_by is not None and carried(message, counted_by) is not None:
            return self.message_tokens(message), True
        exact = True

        def count(text: str) -> int:
            nonlocal exact
            tokens, whole = sampled_count(self.counter, text)
            exact = exact and whole
            return tokens

        tokens = self._count_message(message, count)
        if exact:
            self._by_object.put(message, tokens)
        return tokens, exact

    def count_apart(self, message: BaseMessage) -> int:
        """Tokens of a message without tool calls, counted without reading or filling a cache: what a background
        thread may ask while a call uses the meter (`remember` takes the result on the call's thread)."""
        if isinstance(message, AIMessage) and message.tool_calls:
            raise ValueError("count_apart counts messages without tool calls; use message_tokens for an AI message")
        return self._count_message(message)

    def remember(self, message: BaseMessage, tokens: int) -> None:
        """Take `tokens` as the count of `message` (one counted before, by this meter's counter, in another process)."""
        self._by_object.put(message, tokens)

    def messages_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a message list; only the part past the longest prefix shared with a list measured before
        is looked at message by message (`core.list_totals`)."""
        return self._lists.total(messages, self.message_tokens)

    def call_args_tokens(self, message: AIMessage) -> dict[str, int]:
        """Tokens of each tool call's arguments (as JSON), keyed by call id (`str(call["id"])`).

        Computed once per message object, or read from the count the message carries, and
        reused; the result is a fresh dict the caller may keep. A message without tool calls
        gives `{}`.
        """
        calls = message.tool_calls
        if not calls:
            return {}
        sizes = self._call_sizes(message)
        return {str(call.get("id")): size for call, size in zip(calls, sizes, strict=True)}

    def carry(self, message: BaseMessage, metadata: Mapping[str, Any] | None = None) -> BaseMessage:
        """`message` with its token count attached, for the next process that loads it (see `core.stamp`).

        The copy is known to this meter already, so carrying costs no second count. A meter
        whose counter has no name (an anonymous callable) carries nothing. `metadata` is
        added to the copy's response metadata too (one copy for both, as the stamp of a reply).
        """
        added = dict(metadata or {})
        counted_by = self._key_of(message)
        if counted_by is None:
            return _with_metadata(message, added) if added else message
        tokens = self.message_tokens(message)
        args = self._call_sizes(message) if getattr(message, "tool_calls", None) else None
        added[COUNT_KEY] = count_record(tokens, counted_by, message, args)
        copy = _with_metadata(message, added)
        self._by_object.put(copy, tokens)
        if args is not None:
            self._args_by_object.put(copy, args)
        return copy

    # --- system prompt and tools ---------------------------------------------
    def system_tokens(self, system_message: BaseMessage | str | None) -> int:
        """Tokens of the system prompt (0 when there is none)."""
        if system_message is None:
            return 0
        if isinstance(system_message, str):
            return self.counter(system_message) + self.tokens_per_message
        return self.message_tokens(system_message)

    def tools_tokens(self, tools: Sequence[Any]) -> int:
        """Tokens of the tool schemas the model is given.

        Found by object, else by what the schema is made of (a middleware may hand over a
        copy of a tool on every call, as deepagents does for `grep`), else converted once.
        """
        total = 0
        for tool in tools:
            tokens = self._by_tool.get(tool)
            if tokens is None:
                key = _tool_key(tool)
                shared = (self.count_key, key) if key is not None and self.count_key is not None else None
                tokens = self._by_tool_key.get(key) if key is not None else None
                if tokens is None and shared is not None:  # converted by another agent of this process
                    tokens = _SCHEMA_TOKENS.get(shared)
                if tokens is None:
                    tokens = self.counter(_tool_schema_text(tool))
                    if shared is not None:
                        _SCHEMA_TOKENS.put(shared, tokens)
                if key is not None:
                    self._by_tool_key.put(key, tokens)
                self._by_tool.put(tool, tokens)
            total += tokens
        return total

    def measure(
        self,
        messages: Sequence[BaseMessage],
        *,
        system_message: BaseMessage | str | None = None,
        tools: Sequence[Any] = (),
        model: str | None = None,
    ) -> Measurement:
        """Count one call; `model` selects the calibration learned for that model."""
        return Measurement(
            system=self.system_tokens(system_message),
            tools=self.tools_tokens(tools),
            messages=self.messages_tokens(messages),
            factor=self.factor(model),
        )

    # --- calibration ----------------------------------------------------------
    def factor(self, model: str | None) -> float:
        """Provider tokens per counted token learned for `model` (1.0 until calibrated)."""
        if model is None:
            return 1.0
        return self._factors.get(model, 1.0)

    def calibrate(self, model: str, *, estimated: int, reported: int) -> float:
        """Learn from a provider's reported input tokens for a call whose raw count was `estimated`.

        The ratio is clamped to [0.25, 4] so one odd report cannot derail the meter,
        and blended with what was learned before. Returns the new factor.
        """
        if estimated <= 0 or reported <= 0:
            return self.factor(model)
        ratio = min(4.0, max(0.25, reported / estimated))
        with self._lock:
            previous = self._factors.get(model)
            new = ratio if previous is None else previous + self.calibration_weight * (ratio - previous)
            self._factors[model] = new
        return new

    # --- counting -------------------------------------------------------------
    def _key_of(self, message: BaseMessage) -> str | None:
        """The key a count of `message` is carried under: the meter's, with the media rule when it holds any."""
        content = message.content
        if self.count_key is None or isinstance(content, str) or not any(is_media(b) for b in content):
            return self.count_key
        return self._media_key

    def _call_sizes(self, message: BaseMessage) -> list[int]:
        """Tokens of each tool call's arguments, in order: cached, carried, or counted once."""
        sizes = self._args_by_object.get(message)
        if sizes is not None:
            return sizes
        calls = getattr(message, "tool_calls", None) or []
        counted_by = self._key_of(message)
        record = carried(message, counted_by) if counted_by is not None else None
        args = record.get("args") if record is not None else None
        if isinstance(args, list) and len(args) == len(calls):
            sizes = [int(a) for a in args]
        else:
            sizes = [self.counter(_json(call.get("args", {}))) for call in calls]
        self._args_by_object.put(message, sizes)
        return sizes

    def _count_message(self, message: BaseMessage, count: Callable[[str], int] | None = None) -> int:
        role = _ROLES.get(message.type, message.type)
        role_tokens = self._roles.get(role)
        if role_tokens is None:
            role_tokens = self._roles[role] = self.counter(role)
        tokens = self.tokens_per_message + role_tokens + self._content_tokens(message.content, count or self.counter)
        if message.name:
            tokens += self.counter(message.name)
        calls = getattr(message, "tool_calls", None)
        if calls:
            sizes = self._call_sizes(message)
            tokens += sum(self.counter(str(call.get("name", ""))) for call in calls) + sum(sizes)
        return tokens

    def _content_tokens(self, content: str | list[Any], count: Callable[[str], int]) -> int:
        if isinstance(content, str):
            return count(content)
        tokens = 0
        for block in content:
            if isinstance(block, str):
                tokens += count(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                tokens += count(str(block.get("text", "")))
            elif is_media(block):  # by its size, not as the text of its bytes
                fixed = self.tokens_per_image if is_image(block) else None
                tokens += media_tokens(block) if fixed is None else fixed
            else:
                tokens += self.counter(_json(block))
        return tokens


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
"""Role names as providers send them; each costs a few tokens per message."""


_SCHEMA_TOKENS: BoundedDict[int] = BoundedDict(4 * MAX_TOOLS)
"""Tool schema tokens by counter and schema key, for every meter of the process: an agent built anew (a worker
resuming a thread) meets the same tools as the agents before it, whose schemas cost a conversion each to count."""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _text_chars(content: str | list[Any]) -> int:
    """Characters of a message's text (its string, or its text blocks), without copying any."""
    if isinstance(content, str):
        return len(content)
    sizes = (b if isinstance(b, str) else b.get("text", "") if isinstance(b, dict) else "" for b in content)
    return sum(len(size) if isinstance(size, str) else 0 for size in sizes)


def _content_key(message: BaseMessage) -> tuple[Any, ...]:
    content = message.content
    content_hash = hash(content) if isinstance(content, str) else hash(_json(content))
    calls = getattr(message, "tool_calls", None)
    calls_hash = hash(_json(calls)) if calls else 0
    return (message.type, message.id, message.name, content_hash, calls_hash)


def _with_metadata(message: BaseMessage, added: Mapping[str, Any]) -> BaseMessage:
    return message.model_copy(update={"response_metadata": {**message.response_metadata, **added}})


def _tool_key(tool: Any) -> tuple[Any, ...] | None:
    """What a tool's schema is made of: a dict tool's JSON, a tool object's class, name, description and
    argument schema class (copies of one tool share it); `None` when there is no such key."""
    if isinstance(tool, dict):
        return ("dict", _json(tool))
    name, description = getattr(tool, "name", None), getattr(tool, "description", None)
    schema = getattr(tool, "args_schema", None)
    if isinstance(name, str) and isinstance(description, str) and isinstance(schema, type):
        extras = getattr(tool, "extras", None)
        return (type(tool), name, description, schema, _json(extras) if extras else None)
    return None


def _tool_schema_text(tool: Any) -> str:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        schema = convert_to_openai_tool(tool)
    except Exception:  # provider-native tool dicts (e.g. server tools) have no OpenAI form
        schema = tool if isinstance(tool, dict) else {"name": getattr(tool, "name", repr(tool))}
    return _json(schema)


__all__ = [
    "MAX_TOOLS",
    "OFFLINE_ENCODING",
    "TOKENIZER_ENV",
    "ApproximateCounter",
    "Measurement",
    "TextCounter",
    "TiktokenCounter",
    "TokenMeter",
    "default_counter",
]
