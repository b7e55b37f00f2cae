"""Token ledgers: which messages of a thread showed each distinctive token, so a gist knows what is new.

A gist (`ctxwarden.core.gist`) weighs a token by how many messages before the output showed it. Asking the
whole thread on every clearing batch would re-read it; a ledger indexes each message once, as the thread grows,
and answers for any position.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctxwarden.core.gist import Seen
from ctxwarden.core.runtime import thread_key
from ctxwarden.core.text import TOKEN, message_text


class TokenLedger:
    """Which messages of a thread showed each distinctive token: for "new in this output" in O(new messages).

    Keeps the first three positions of every token, each in a dict of its own: a list per token made a 1M-token
    thread's first index allocate tens of thousands of containers, enough to set off a full pass of the garbage
    collector over the thread just loaded. `sync` indexes only the messages added since the last call (by identity),
    and starts over when the thread is another one. `sync` holds `lock`, which a reader in another thread holds too
    (`clip.pregist`).
    """

    __slots__ = ("_first", "_firsts", "_messages", "_places", "_second", "_third", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._messages: list[BaseMessage] = []
        self._first: dict[str, int] = {}
        self._second: dict[str, int] = {}
        self._third: dict[str, int] = {}
        self._places: dict[int, int] = {}
        self._firsts: dict[int, list[str]] = {}
        """The tokens each position was first to show (so `shown_again` reads no text)."""

    def sync(self, messages: Sequence[BaseMessage]) -> None:
        with self.lock:
            self._sync(messages)

    def _sync(self, messages: Sequence[BaseMessage]) -> None:
        known = len(self._messages)
        if known and (
            known > len(messages)
            or messages[0] is not self._messages[0]
            or messages[known - 1] is not self._messages[-1]
        ):
            self._messages, self._places, self._firsts = [], {}, {}
            self._first, self._second, self._third = {}, {}, {}
            known = 0
        first, second, third = self._first, self._second, self._third
        for position in range(known, len(messages)):
            message = messages[position]
            self._messages.append(message)
            self._places[id(message)] = position
            for token in set(TOKEN.findall(message_text(message))):
                if token not in first:
                    first[token] = position
                    self._firsts.setdefault(position, []).append(token)
                elif token not in second:
                    second[token] = position
                elif token not in third:
                    third[token] = position

    @property
    def size(self) -> int:
        """How many messages of the thread are indexed."""
        return len(self._messages)

    def position(self, message: BaseMessage) -> int | None:
        """Where `message` stands in the thread, or `None` when it is not one of its messages."""
        index = self._places.get(id(message))
        return index if index is not None and self._messages[index] is message else None

    def shown_again(self, message: BaseMessage, position: int) -> bool:
        """Whether every distinctive token `message` was first to show also appears in a later message."""
        if self.position(message) != position:
            return False
        return all(token in self._second for token in self._firsts.get(position, ()))

    def seen_before(self, position: int) -> Seen:
        """How many messages before `position` showed a token."""
        first, second, third = self._first, self._second, self._third

        def count(token: str) -> int:
            place = first.get(token)
            if place is None or place >= position:
                return 0
            place = second.get(token)
            if place is None or place >= position:
                return 1
            place = third.get(token)
            return 2 if place is None or place >= position else 3

        return count


class ThreadLedgers:
    """The token ledger of each of the last `cap` threads (and subagent namespaces) a layer shaped."""

    __slots__ = ("_by_thread", "cap")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._by_thread: OrderedDict[str, TokenLedger] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_thread)

    def here(self) -> TokenLedger:
        """The ledger of the thread of the step being run (an empty one the first time)."""
        key = thread_key()
        ledger = self._by_thread.pop(key, None) or TokenLedger()
        self._by_thread[key] = ledger
        while len(self._by_thread) > self.cap:
            self._by_thread.popitem(last=False)
        return ledger


__all__ = ["ThreadLedgers", "TokenLedger"]
