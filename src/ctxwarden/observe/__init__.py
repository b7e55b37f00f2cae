"""Deprecated: `ctxwarden.observe` was split by layer.

The trace (store, recorder) is `ctxwarden.trace`, low enough for every layer; reading a
thread is `ctxwarden.thread`; the /context report and the usage plot are
`ctxwarden.report`, above the layers they describe. Every name that was here still
works, with a `DeprecationWarning` naming its new home; the public ones are also in
`ctxwarden` itself.
"""

from ctxwarden.core.moved import moved_names

__getattr__ = moved_names(
    __name__,
    {
        "CATEGORIES": "ctxwarden.report",
        "ContextReport": "ctxwarden.report",
        "acontext_report": "ctxwarden.report",
        "build_report": "ctxwarden.report",
        "context_report": "ctxwarden.report",
        "KINDS": "ctxwarden.trace",
        "PostgresTraceStore": "ctxwarden.trace",
        "SqliteTraceStore": "ctxwarden.trace",
        "TraceError": "ctxwarden.errors",
        "TraceEvent": "ctxwarden.trace",
        "TraceRecorder": "ctxwarden.trace",
        "TraceStore": "ctxwarden.trace",
        "TRACE_FILE": "ctxwarden.core.layout",
        "UnknownThreadError": "ctxwarden.errors",
        "read_messages": "ctxwarden.thread",
    },
)

__all__: list[str] = []
