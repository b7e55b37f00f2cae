"""Trace: the append-only record of what happened to a thread's context, and the one recorder that writes it.

The lowest package above `core`: every layer and the stack may record to it, and nothing
here knows about the layers. The /context report reads it from above (`ctxwarden.report`).
"""

from ctxwarden.errors import TraceError
from ctxwarden.trace.chain import ChainHead
from ctxwarden.trace.postgres import PostgresTraceStore  # registers the Postgres trace with TraceStore(target)
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import KINDS, SqliteTraceStore, TraceEvent, TraceStore

__all__ = [
    "KINDS",
    "ChainHead",
    "PostgresTraceStore",
    "SqliteTraceStore",
    "TraceError",
    "TraceEvent",
    "TraceRecorder",
    "TraceStore",
]
