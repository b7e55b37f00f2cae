"""Calls first: the stack's background work waits while a model call is being shaped.

CPython runs one thread at a time. When a thread that was waiting for the interpreter gets
it (the shaping thread lets it go whenever tiktoken counts), the other thread waits to
get it back until the holder blocks or the switch interval passes (5 ms by default). So
gists made ahead in a background thread, while a call counts its new messages, could add
milliseconds to that call. Background workers therefore ask `FOREGROUND.wait_idle` before
each piece of work: it returns at once when no call is being shaped, and otherwise when
the last one ends or after `timeout` (a busy server never starves them). A piece already
started finishes first, so pieces are kept small: one gist each. The stack holds the gate
for the call's own work after the model answers too: the stamp, and the trace it writes
in the call (SQLite lets the interpreter go at each step).

One gate serves the whole process, as the interpreter is one for the whole process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Foreground:
    """How many model calls are being shaped now, for background work to wait on (see the module)."""

    __slots__ = ("_active", "_idle")

    def __init__(self) -> None:
        self._active = 0
        self._idle = threading.Condition()

    @contextmanager
    def call(self) -> Iterator[None]:
        """Mark a call as being shaped for the duration of the block."""
        with self._idle:
            self._active += 1
        try:
            yield
        finally:
            with self._idle:
                self._active -= 1
                if not self._active:
                    self._idle.notify_all()

    @property
    def busy(self) -> bool:
        """Whether a call is being shaped now."""
        return self._active > 0

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no call is being shaped, at most `timeout` seconds; whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._active, timeout)


FOREGROUND = Foreground()
"""The process's gate (see the module)."""

__all__ = ["FOREGROUND", "Foreground"]
