"""Observe: the append-only trace, the /context report and the usage plot."""

from ctxwarden.observe.pg_trace import PostgresTraceStore  # registers the Postgres trace with TraceStore(target)
from ctxwarden.observe.recorder import TraceRecorder
from ctxwarden.observe.report import CATEGORIES, ContextReport, acontext_report, build_report, context_report
from ctxwarden.observe.thread import UnknownThreadError, read_messages
from ctxwarden.observe.trace import KINDS, TRACE_FILE, SqliteTraceStore, TraceError, TraceEvent, TraceStore

__all__ = [
    "CATEGORIES",
    "KINDS",
    "TRACE_FILE",
    "ContextReport",
    "PostgresTraceStore",
    "SqliteTraceStore",
    "TraceError",
    "TraceEvent",
    "TraceRecorder",
    "TraceStore",
    "UnknownThreadError",
    "acontext_report",
    "build_report",
    "context_report",
    "read_messages",
]
