"""The one recorder API every layer writes trace events through.

Recording must never break the agent: a trace that cannot be written (read-only file,
full disk) costs the event, counted in `failures` and logged, never the run. Thread,
checkpoint namespace and run are read from the LangGraph config of the step being
run, so callers pass only the kind and the payload; a subagent's events carry its
namespace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxwarden.core.layers import PendingEvent
from ctxwarden.observe.trace import TraceEvent, TraceStore

logger = logging.getLogger("ctxwarden.trace")


def step_context() -> tuple[str | None, str, str | None]:
    """`(thread_id, namespace, run_id)` of the LangGraph step running now, or `(None, "", None)` outside one.

    The namespace is the checkpoint namespace without the running node itself: `""` for
    the top-level agent, `"tools:<task id>"` inside a subagent called by a tool.
    """
    try:
        from langgraph.config import get_config

        config = get_config()
    except RuntimeError:
        return None, "", None
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread = configurable.get("thread_id")
    checkpoint_ns = str(configurable.get("checkpoint_ns") or metadata.get("langgraph_checkpoint_ns") or "")
    namespace = checkpoint_ns.rsplit("|", 1)[0] if "|" in checkpoint_ns else ""
    run = config.get("run_id") or metadata.get("run_id")
    return (str(thread) if thread is not None else None), namespace, (str(run) if run is not None else None)


class TraceRecorder:
    """Records events to a `TraceStore`; `TraceRecorder(None)` records nothing."""

    def __init__(self, store: TraceStore | str | Path | None) -> None:
        self.store = TraceStore(store) if isinstance(store, str | Path) else store
        self.failures = 0
        self.last_error: str | None = None

    @property
    def enabled(self) -> bool:
        """Whether events go anywhere."""
        return self.store is not None

    def event(self, kind: str, payload: Mapping[str, Any], *, model: str | None = None) -> TraceEvent:
        """The event `record` would write now, with thread, namespace and run filled in."""
        thread, namespace, run = step_context()
        return TraceEvent(kind, dict(payload), thread, namespace, run, model)

    def record(self, kind: str, payload: Mapping[str, Any], *, model: str | None = None) -> TraceEvent | None:
        """Append one event; returns it, or `None` when disabled or the write failed."""
        if self.store is None:
            return None
        return self._write(self.event(kind, payload, model=model))

    async def arecord(self, kind: str, payload: Mapping[str, Any], *, model: str | None = None) -> TraceEvent | None:
        """`record` off the event loop (the config is read here, in the step's context)."""
        if self.store is None:
            return None
        return await asyncio.to_thread(self._write, self.event(kind, payload, model=model))

    def record_all(self, events: list[PendingEvent]) -> int:
        """Append `(kind, payload, model)` triples in one transaction; returns how many were written."""
        if self.store is None or not events:
            return 0
        return self._write_all([self.event(kind, payload, model=model) for kind, payload, model in events])

    async def arecord_all(self, events: list[PendingEvent]) -> int:
        """`record_all` off the event loop."""
        if self.store is None or not events:
            return 0
        built = [self.event(kind, payload, model=model) for kind, payload, model in events]
        return await asyncio.to_thread(self._write_all, built)

    def _write(self, event: TraceEvent) -> TraceEvent | None:
        return event if self._write_all([event]) else None

    def _write_all(self, events: list[TraceEvent]) -> int:
        assert self.store is not None
        try:
            return len(self.store.append(events))
        except Exception as exc:  # a trace failure must never end the run
            self.failures += len(events)
            self.last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("%d trace event(s) not recorded (%s)", len(events), self.last_error)
            return 0


__all__ = ["PendingEvent", "TraceRecorder", "step_context"]
