"""The one recorder API every layer writes trace events through.

Recording must never break the agent: a trace that cannot be written (read-only file,
full disk) costs the event, counted in `failures` and logged, never the run. Thread,
checkpoint namespace and run are read from the LangGraph config of the step being
run, so callers pass only the kind and the payload; a subagent's events carry its
namespace. An event recorded in a step also names, in its payload (`checkpoint`), the
checkpoint the step was computed from: the /context report counts only the events of the
thread's current branch (`ctxwarden.thread.branch`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxwarden.core.layers import PendingEvent
from ctxwarden.core.runtime import step_checkpoint, step_context
from ctxwarden.trace.store import TraceEvent, TraceStore
from ctxwarden.trace.writer import LaterWriter

logger = logging.getLogger("ctxwarden.trace")

CHECKPOINT_KEY = "checkpoint"
"""The payload key naming the checkpoint the step that recorded an event was computed from."""


class TraceRecorder:
    """Records events to a `TraceStore`; `TraceRecorder(None)` records nothing."""

    def __init__(self, store: TraceStore | str | Path | Any | None) -> None:
        """Record to `store`: a `TraceStore`, or what `TraceStore(...)` opens (a path, a `postgresql://` URL, a psycopg
        connection or pool); `None` records nothing.
        """
        self.store = store if store is None or isinstance(store, TraceStore) else TraceStore(store)
        self._failures = 0
        self._last_error: str | None = None
        self._later = LaterWriter(self._write_all)

    @property
    def failures(self) -> int:
        """Events given up so far (queued ones included: it waits for them to be written first)."""
        self.flush()
        return self._failures

    @property
    def last_error(self) -> str | None:
        """The last write error, after waiting for the queued events."""
        self.flush()
        return self._last_error

    @property
    def enabled(self) -> bool:
        """Whether events go anywhere."""
        return self.store is not None

    def event(
        self, kind: str, payload: Mapping[str, Any], *, model: str | None = None, thread_id: str | None = None
    ) -> TraceEvent:
        """The event `record` would write now, with thread, namespace and run filled in.

        Outside a LangGraph step (e.g. `compact()` from a script) pass `thread_id`.
        """
        thread, namespace, run = step_context()
        checkpoint = step_checkpoint()
        body = {**payload, CHECKPOINT_KEY: checkpoint} if checkpoint is not None else dict(payload)
        return TraceEvent(kind, body, thread_id or thread, namespace, run, model)

    def record(self, kind: str, payload: Mapping[str, Any], *, model: str | None = None) -> TraceEvent | None:
        """Append one event; returns it, or `None` when disabled or the write failed."""
        built = self._built([(kind, payload, model)], None)
        return self._write(built[0]) if built else None

    async def arecord(self, kind: str, payload: Mapping[str, Any], *, model: str | None = None) -> TraceEvent | None:
        """`record` off the event loop (the config is read here, in the step's context)."""
        built = self._built([(kind, payload, model)], None)
        return await asyncio.to_thread(self._write, built[0]) if built else None

    def record_all(self, events: list[PendingEvent], *, thread_id: str | None = None) -> int:
        """Append `(kind, payload, model)` triples in one transaction; returns how many were written."""
        built = self._built(events, thread_id)
        return self._write_all(built) if built else 0

    async def arecord_all(self, events: list[PendingEvent], *, thread_id: str | None = None) -> int:
        """`record_all` off the event loop (the config is read here, in the step's context)."""
        built = self._built(events, thread_id)
        return await asyncio.to_thread(self._write_all, built) if built else 0

    def record_later(self, events: list[PendingEvent]) -> int:
        """Queue observations (usage, model switches) for the background writer; returns how many were queued.

        The config is read here, in the step's context; the write happens off the caller's
        path (see `ctxwarden.trace.writer`). `flush` waits for them; every read of a trace does.
        """
        built = self._built(events, None)
        if built:
            self._later.put(built)
        return len(built)

    def flush(self) -> bool:
        """Wait until every queued event is written (or counted as a failure); False on timeout."""
        return self._later.flush()

    def _built(self, events: list[PendingEvent], thread_id: str | None) -> list[TraceEvent]:
        """The events to write now (none when disabled)."""
        if self.store is None:
            return []
        # ids sort by when an event happened, not when it is written (a later event may be written first)
        return [
            self.event(kind, payload, model=model, thread_id=thread_id).with_id() for kind, payload, model in events
        ]

    def _write(self, event: TraceEvent) -> TraceEvent | None:
        return event if self._write_all([event]) else None

    def _write_all(self, events: list[TraceEvent]) -> int:
        assert self.store is not None
        try:
            return len(self.store.append(events))
        except Exception as exc:  # a trace failure must never end the run
            self._failures += len(events)
            self._last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("%d trace event(s) not recorded (%s)", len(events), self._last_error)
            return 0


__all__ = ["CHECKPOINT_KEY", "PendingEvent", "TraceRecorder", "step_context"]
