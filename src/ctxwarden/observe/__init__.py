"""Observe: the append-only trace, the /context report and the usage plot.

The trace side (store, recorder) is used by the layers below; the report sits above the
stack it describes. So the report's names are loaded on first use: importing the recorder
from a layer must not pull in the stack that imports that layer.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ctxwarden.core.layout import TRACE_FILE
from ctxwarden.errors import UnknownThreadError
from ctxwarden.thread.read import read_messages
from ctxwarden.trace import (
    KINDS,
    PostgresTraceStore,
    SqliteTraceStore,
    TraceError,
    TraceEvent,
    TraceRecorder,
    TraceStore,
)

if TYPE_CHECKING:
    from ctxwarden.observe.report import CATEGORIES, ContextReport, acontext_report, build_report, context_report

_REPORT_NAMES = frozenset({"CATEGORIES", "ContextReport", "acontext_report", "build_report", "context_report"})


def __getattr__(name: str) -> Any:
    if name in _REPORT_NAMES:
        return getattr(import_module("ctxwarden.observe.report"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
