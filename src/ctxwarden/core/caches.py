"""Bounded caches for the meter and the layers: by object identity (weakly) or by key.

Both run on every model call, so both are bounded: at `cap` entries the oldest quarter
is dropped. The identity cache holds only a weak reference to each object, so it never
keeps a message alive (an evicted 50 MB original is freed as soon as the stack lets go).
"""

from __future__ import annotations

import threading
import weakref
from itertools import islice
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ObjectCache(Generic[V]):
    """Values computed for objects, found by identity, holding only a weak reference to each object.

    At `cap` entries the oldest quarter is dropped; an entry whose object was freed is
    never returned (its weak reference is dead) and is overwritten when the id is reused.
    References and values sit in two dicts keyed by id, so an entry adds one weak reference
    and no tuple to the collector's heap (a resumed thread remembers thousands at once).
    """

    __slots__ = ("_lock", "_refs", "_values", "cap")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._values: dict[int, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._refs)

    def get(self, obj: object) -> V | None:
        key = id(obj)
        ref = self._refs.get(key)
        if ref is None or ref() is not obj:
            return None
        return self._values.get(key)  # None if another thread trimmed it meanwhile: a miss

    def put(self, obj: object, value: V) -> None:
        try:
            ref = weakref.ref(obj)
        except TypeError:  # an object that cannot be weakly referenced is simply not cached
            return
        if len(self._refs) >= self.cap:
            with self._lock:
                _trim(self._refs, self.cap)
                _trim(self._values, self.cap)
        key = id(obj)
        self._values[key] = value
        self._refs[key] = ref


class BoundedDict(Generic[V]):
    """A dict that drops its oldest quarter at `cap` entries."""

    __slots__ = ("_entries", "_lock", "cap")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._entries: dict[Any, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any) -> V | None:
        return self._entries.get(key)

    def put(self, key: Any, value: V) -> None:
        if len(self._entries) >= self.cap:
            with self._lock:
                _trim(self._entries, self.cap)
        self._entries[key] = value


def _trim(entries: dict[Any, Any], cap: int) -> None:
    if len(entries) < cap:
        return
    for key in list(islice(entries, max(1, len(entries) // 4))):
        entries.pop(key, None)


__all__ = ["BoundedDict", "ObjectCache"]
