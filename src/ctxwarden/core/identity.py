"""Every message has an identity of ctxwarden's own, whatever id the caller gave it.

The layers find messages by id: the last message a fold covers, the task pinned above the
summary, the turns a prepared summary read, the message a search hit came from. LangGraph's
`add_messages` gives every message an id, but deepagents' messages channel appends a
`("user", ...)` tuple or a dict as it came, so a thread the README's own input built holds
one user message with `id=None` a turn, and anything indexed by id folds them all onto the
last one. A thread can also hold two messages with one id (a list a caller wrote whole).

So the lists the layers read are *identified* first: a message with no id, or with an id
an earlier message of the list already has, is replaced by a copy whose id is derived from
what it says and how many messages saying the same came before it in the list. The thread
itself is never edited, and the derivation depends only on the list, so every process, the
thread state and the call's view all agree on it, before and after a resume. A list that
needs nothing is returned as it is; `Identities` remembers the lists it identified, so a
thread that grew costs only its new messages on the per-call path.

The layers also find results by call id (clearing hides a call's result and arguments by
it). Many model servers number calls per reply (`call_0` in every turn), so the stack's
lists (`Identities(calls=True)`) give each call whose id an earlier call of the list
already had the id `<id>#<call key>`, and the results answering it the same: the reference
an eviction marker writes for it, which `recall` resolves on the thread itself. An earlier
call never changes when the thread grows, so a view's bytes stay stable from call to call.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxwarden.core.caches import ObjectCache
from ctxwarden.core.list_totals import starts_with

T = TypeVar("T")

KEY_SEPARATOR = "#"
"""Joins a call id and its call key in a recall reference: `call_0#1a2b3c4d`."""


def call_key(message_id: str | None, index: int | str) -> str:
    """A short key for the `index`-th tool call of the AI message `message_id`: the same call, the same key."""
    return hashlib.sha256(f"{message_id}\x00{index}".encode("utf-8", "surrogatepass")).hexdigest()[:8]


DERIVED_PREFIX = "ctxw-"
"""Ids ctxwarden derives start so; they live only in the lists the layers read, never in the thread."""

_FINGERPRINTS: ObjectCache[str] = ObjectCache(cap=50_000)
"""Digests by message object: a message object is not edited in place (an edit is a new message)."""


def fingerprint(message: BaseMessage) -> str:
    """A short digest of what a message says (type, content, tool calls, the call it answers)."""
    known = _FINGERPRINTS.get(message)
    if known is not None:
        return known
    body = [
        message.type,
        message.content,
        getattr(message, "tool_calls", None),
        getattr(message, "tool_call_id", None),
    ]
    text = json.dumps(body, default=str, sort_keys=True, ensure_ascii=False)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
    _FINGERPRINTS.put(message, digest)
    return digest


@dataclass(slots=True)
class _Identified:
    """One list identified before: its messages as given, as identified, the ids taken and the derivations made."""

    given: list[BaseMessage]
    out: list[BaseMessage]
    taken: set[str] = field(default_factory=set)
    derived: Counter[str] = field(default_factory=Counter)
    calls: bool = False
    """Whether a reused call id is told apart too (the stack's lists; see the module)."""
    issued: set[str] = field(default_factory=set)
    """Call ids of the list's calls so far."""
    waiting: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    """By call id as given, the calls not answered yet, each as (the index of its AI message, its id in the list), in
    order: a result answers the oldest of the newest message that has one (`_answered`)."""
    renamed: int = 0

    def extend(self, messages: Sequence[BaseMessage]) -> None:
        for message in messages:
            self.given.append(message)
            self.out.append(self._identify(message))

    def _identify(self, message: BaseMessage) -> BaseMessage:
        update = self._calls_of(message) if self.calls else {}
        self.renamed += bool(update)
        if message.id is None or message.id in self.taken:
            update["id"] = self._derived(message)
        else:
            self.taken.add(message.id)
        return message.model_copy(update=update) if update else message

    def _calls_of(self, message: BaseMessage) -> dict[str, Any]:
        """The call ids `message` takes in the list: a reused one as `<id>#<call key>`."""
        if isinstance(message, ToolMessage):
            named = self._answered(message.tool_call_id)
            return {} if named == message.tool_call_id else {"tool_call_id": named}
        if not isinstance(message, AIMessage) or not message.tool_calls:
            return {}
        calls: list[Any] = []
        for index, call in enumerate(message.tool_calls):
            given = str(call.get("id") or "")
            named = given if given not in self.issued else f"{given}{KEY_SEPARATOR}{call_key(message.id, index)}"
            self.issued.add(given)
            self.waiting.setdefault(given, []).append((len(self.given), named))
            calls.append(call if named == given else {**call, "id": named})
        if all(a is b for a, b in zip(calls, message.tool_calls, strict=True)):
            return {}
        return {"tool_calls": calls, "content": _renamed_blocks(message.content, message.tool_calls, calls)}

    def _answered(self, call_id: str) -> str:
        """The id in the list of the call a result with `call_id` answers: of the calls with that id not answered yet,
        the first of the newest AI message holding one. Results follow the message that asked for them, so a call
        left without one (its tool raised and the run stopped) is passed over, not given the next turn's result,
        which a queue of every call did, shifting every later result onto the call before its own."""
        waiting = self.waiting.get(call_id)
        return answered_call(waiting) if waiting else call_id

    def _derived(self, message: BaseMessage) -> str:
        digest = fingerprint(message)
        while True:  # a caller's id may already read like a derived one: take the next free
            nth = self.derived[digest]
            self.derived[digest] = nth + 1
            derived = f"{DERIVED_PREFIX}{message.type}-{digest}-{nth}"
            if derived not in self.taken:
                break
        self.taken.add(derived)
        return derived


def answered_call(waiting: list[tuple[int, T]]) -> T:
    """Take from `waiting` (calls not answered yet, each with the index of the AI message that made it, in order) the
    one a result answers: the first of the newest message's (see `_Identified._answered`)."""
    newest = waiting[-1][0]
    return waiting.pop(next(i for i, (owner, _call) in enumerate(waiting) if owner == newest))[1]


def _renamed_blocks(content: Any, given: list[Any], named: list[Any]) -> Any:
    """`content` with its `tool_use` blocks renamed as the calls were (a provider pairs blocks and calls by id)."""
    if not isinstance(content, list):
        return content
    renames: dict[str, deque[str]] = {}
    for before, after in zip(given, named, strict=True):
        renames.setdefault(str(before.get("id") or ""), deque()).append(str(after.get("id") or ""))
    out = []
    for block in content:
        queue = (
            renames.get(str(block.get("id"))) if isinstance(block, dict) and block.get("type") == "tool_use" else None
        )
        out.append({**block, "id": queue.popleft()} if queue else block)
    return out


def identified(messages: Sequence[BaseMessage], *, calls: bool = False) -> list[BaseMessage]:
    """`messages` with every message identified (see the module); the list itself when none needs it. `calls`: a
    reused call id is told apart too, as in the stack's lists."""
    record = _Identified([], [], calls=calls)
    record.extend(messages)
    return _result(messages, record)


class Identities:
    """Identifies lists on the per-call path: a list that extends one identified before costs only its new messages.

    Keeps the last `cap` lists (the thread and the views the layers make of it), most recent first.
    """

    __slots__ = ("_lists", "_lock", "calls", "cap")

    def __init__(self, cap: int = 4, *, calls: bool = False) -> None:
        self.cap = cap
        self.calls = calls
        self._lists: list[_Identified] = []
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        if not messages:
            return list(messages)
        with self._lock:
            for record in self._lists:
                if starts_with(messages, record.given):
                    record.extend(messages[len(record.given) :])
                    self._lists = [record, *(r for r in self._lists if r is not record)]
                    return _result(messages, record)
            record = _Identified([], [], calls=self.calls)
            record.extend(messages)
            self._lists = [record, *self._lists[: self.cap - 1]]
            return _result(messages, record)


def _result(messages: Sequence[BaseMessage], record: _Identified) -> list[BaseMessage]:
    if not (record.derived or record.renamed):
        return messages if isinstance(messages, list) else list(messages)
    return list(record.out)


def as_received(thread: list[BaseMessage], received: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`thread` with each message a middleware ahead of ctxwarden rewrote (the same id, another object in `received`,
    the request as it reached the stack) replaced by its rewrite: a redacting middleware's edit holds in what the
    layers read as the thread, so no fold summary, pinned task or gist quotes what it took out.

    Both lists are identified (`Identities`). The usual rewrite keeps the list's order, so messages are compared
    by position first and a lookup by id is built only when the lists do not line up."""
    if thread is received:
        return thread
    lined_up = len(thread) == len(received)
    if lined_up and _same(thread, received):  # nothing rewritten: the usual case, one comparison in C
        return thread
    out: list[BaseMessage] | None = None
    by_id: dict[str | None, BaseMessage] | None = None if lined_up else {m.id: m for m in received if m.id}
    for index, message in enumerate(thread):
        got = received[index] if by_id is None else by_id.get(message.id)
        if got is None or got is message or got.id != message.id:
            continue
        if out is None:
            out = list(thread)
        out[index] = got
    return thread if out is None else out


def _same(thread: list[BaseMessage], received: Sequence[BaseMessage]) -> bool:
    """Whether the lists hold the same messages (or equal ones): a list comparison takes an identical element without
    calling its `__eq__`, so a thread of thousands costs microseconds (`core.list_totals.starts_with`)."""
    try:
        return thread == list(received)
    except (TypeError, ValueError):  # a field whose `==` is not a bool (an array in a message's metadata)
        return False


__all__ = [
    "DERIVED_PREFIX",
    "KEY_SEPARATOR",
    "Identities",
    "answered_call",
    "as_received",
    "call_key",
    "fingerprint",
    "identified",
]
