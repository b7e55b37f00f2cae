"""Trace events written by a background thread, off the model call's path.

Every model call ends with a `model_usage` event. Written in the call, one short SQLite
transaction costs about 0.3 ms of the call's own time once the model's reply has pushed
SQLite out of the processor's caches (a Postgres round trip costs more). Observations
like it (usage, model switches) of a step that goes on to its tools are handed to a
`LaterWriter` instead: one daemon thread per recorder writes them, in as few
transactions as it can, while the tools run. The call that may end the run waits for
them (the middleware decides). Lifecycle events (evictions, clearing batches, folds) are
still written in the call: they are rare, and a thread killed right after one must
still show it.

Nothing read in this process misses a handed-over event: every read of a trace store
first waits for the writers of this process (`flush_writes`), and so does the end of
the process. A process killed outright loses at most the events of its last
milliseconds. A child process forked with events pending starts with none and its own
thread (the parent writes them).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("ctxwarden.trace")

FLUSH_TIMEOUT_S = 30.0
"""How long a read waits for pending events (a trace locked longer than this has bigger problems)."""

IDLE_S = 5.0
"""A writer thread with nothing to write for this long ends."""

_WRITERS: weakref.WeakSet[LaterWriter] = weakref.WeakSet()


class LaterWriter:
    """Writes handed-over events in order on one daemon thread (ended when idle); `flush` waits for them."""

    def __init__(self, write: Callable[[list[Any]], int]) -> None:
        self._write = write
        self._ready = threading.Condition()
        self._queue: list[Any] = []
        self._busy = False
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        _WRITERS.add(self)

    def put(self, events: list[Any]) -> None:
        """Queue `events` for the writer thread (started on first use, and again in a forked child)."""
        with self._ready:
            if self._pid != os.getpid():  # forked: the parent's thread and queue are not ours
                self._pid, self._queue, self._busy, self._thread = os.getpid(), [], False, None
            self._queue.extend(events)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxwarden-trace", daemon=True)
                self._thread.start()
            self._ready.notify_all()

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait until every event queued so far is written (or given up); False on timeout."""
        with self._ready:
            if self._pid != os.getpid():
                return True
            return self._ready.wait_for(lambda: not self._queue and not self._busy, timeout)

    @property
    def pending(self) -> int:
        """Events queued and not yet taken by the thread."""
        with self._ready:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._ready.wait_for(lambda: bool(self._queue), IDLE_S):
                    self._thread = None  # idle: the next `put` starts another
                    return
                batch, self._queue, self._busy = self._queue, [], True
            try:
                self._write(batch)  # counts and logs its own failures
            except Exception:  # a bug, not a store problem: the thread must outlive it
                logger.exception("%d trace event(s) not recorded", len(batch))
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()


def flush_writes(timeout: float = FLUSH_TIMEOUT_S) -> None:
    """Wait for every background writer of this process (each read of a trace calls this first)."""
    for writer in list(_WRITERS):
        writer.flush(timeout)


atexit.register(flush_writes)

__all__ = ["LaterWriter", "flush_writes"]
