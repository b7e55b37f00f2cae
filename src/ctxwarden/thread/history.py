"""When a thread's current history began, kept in its own state, so its report counts only what happened to it.

The trace is keyed by thread id, and a thread id is the caller's: a new in-memory thread
that reuses an id (the same script run twice, `InMemorySaver` each time) would otherwise
be credited with every eviction, fold and model call of every earlier thread of that id
in the same `trace.sqlite`. The first model call through the stack writes the time it
started into the thread's private state; the report counts the trace events of that
thread from then on. The start lives in the checkpoints, so a resumed checkpointed thread
keeps its whole record, and a thread that starts again from nothing starts from zero.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

HISTORY_KEY = "ctxwarden_history"
"""Private state key holding `{"started": <unix time>}`: when this thread's history reached the stack first."""


class HistoryState(AgentState):
    """When the thread's current history began (see the module docstring)."""

    ctxwarden_history: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


def history_started(values: Mapping[str, Any] | None) -> float | None:
    """When the thread in `values` began, or `None` for a thread that never recorded it (count all its events)."""
    record = (values or {}).get(HISTORY_KEY)
    started = record.get("started") if isinstance(record, Mapping) else None
    return float(started) if isinstance(started, int | float) and not isinstance(started, bool) else None


def history_start(state: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state update that marks the history's start now, or `{}` when the thread already has one."""
    if history_started(state) is not None:
        return {}
    return {HISTORY_KEY: {"started": time.time()}}


__all__ = ["HISTORY_KEY", "HistoryState", "history_start", "history_started"]
