"""The spend and the lifecycle the /context report shows: the trace events that are the thread as it stands.

A thread id can be reused (a new in-memory thread, the same script run again): only the
events recorded since this history's first model call are its own (`thread.history`). And a
thread resumed from an earlier checkpoint goes on in a branch of its own under the same id:
only the events whose checkpoint is on the branch read are its own (`thread.branch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwarden.thread.branch import Branch
from ctxwarden.thread.history import history_started
from ctxwarden.trace.recorder import CHECKPOINT_KEY
from ctxwarden.trace.store import LIFECYCLE_KINDS, TraceStore
from ctxwarden.trace.totals import lifecycle_of, spend_of

SPEND_KEYS = ("input_tokens", "output_tokens", "cached_input_tokens")
"""The `model_usage` payload figures the spend sums, in `spend_of`'s order."""


def trace_counts(
    store: TraceStore, thread: str, values: Mapping[str, Any] | None, branch: Branch | None = None
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """The spend and the lifecycle of the thread's current history: its trace events since the history began, of
    `branch` (`None`: every branch). A thread that never recorded its start counts every event of its id (of the
    branch)."""
    started = history_started(values)
    if started is None and branch is None:
        return store.spend(thread), store.lifecycle(thread)
    events = store.events(thread_id=thread, kind=("model_usage", *LIFECYCLE_KINDS), since=started)
    spend: dict[str, list[int]] = {}
    done: dict[str, list[int]] = {}
    for event in events:
        payload = event.payload
        checkpoint = payload.get(CHECKPOINT_KEY)
        if branch is not None and isinstance(checkpoint, str) and not branch.holds(checkpoint, event.ts):
            continue  # what another branch of the thread did
        if event.kind == "model_usage":
            row = spend.setdefault(str(payload.get("role") or "main"), [0, 0, 0, 0])
            figures = (1, *(payload.get(key) or 0 for key in SPEND_KEYS))
        elif payload.get("ok", True) in (True, 1):  # a failed fold freed nothing
            row = done.setdefault(event.kind, [0, 0, 0])
            figures = (1, payload.get("tokens") or 0, payload.get("freed") or 0)
        else:
            continue
        for i, value in enumerate(figures):
            row[i] += int(value)
    return (
        spend_of((role, *row) for role, row in sorted(spend.items())),
        lifecycle_of((kind, *row) for kind, row in done.items()),
    )


__all__ = ["SPEND_KEYS", "trace_counts"]
