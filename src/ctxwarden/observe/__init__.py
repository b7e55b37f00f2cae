"""Observe: the append-only trace, the /context report and the usage plot."""

from ctxwarden.observe.recorder import TraceRecorder
from ctxwarden.observe.report import CATEGORIES, ContextReport, acontext_report, build_report, context_report
from ctxwarden.observe.thread import UnknownThreadError, read_messages
from ctxwarden.observe.trace import KINDS, TRACE_FILE, TraceError, TraceEvent, TraceStore

__all__ = [
    "CATEGORIES",
    "KINDS",
    "TRACE_FILE",
    "ContextReport",
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
