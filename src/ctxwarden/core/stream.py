"""What ctxwarden is doing, told to a client as it happens: custom stream events.

A fold can take a summarizer call; a UI that shows nothing meanwhile looks stuck. So
every fold and clearing batch is also written to LangGraph's custom stream
(`stream_mode="custom"`), where a client can show "compacting…" and then what it freed.
Each event is a dict whose `"ctxwarden"` key names it:

- `fold_start`: a fold begins (`fold`, `tokens_before`, `window`, `prepared`, `forced`);
- `fold_end`: it ended (`fold`, `ok`, `tokens_before`, `tokens_after`, `path` of the history
  file, `source` of the summary: `prepared`, `model`, `deterministic` or `fallback`);
- `clear`: a clearing batch (`results`, `args`, `tokens_before`, `tokens_after`);
- `gauge_note`: the model was told how full its window is (`gauge`, `fraction`).

Outside a graph run (a notebook calling `compact()`) there is no stream, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.config import get_stream_writer

from ctxwarden.core.layers import PendingEvent

STREAM_KEY = "ctxwarden"
"""The key of every ctxwarden event on the custom stream; its value names the event."""

CLEAR_FIELDS = ("results", "args", "tokens_before", "tokens_after", "freed", "forced")
FOLD_FIELDS = ("fold", "ok", "tokens_before", "tokens_after", "freed", "path", "error")


def emit(event: str, payload: Mapping[str, Any]) -> None:
    """Write `{"ctxwarden": event, **payload}` to the running graph's custom stream (nothing outside a run)."""
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # no graph run here
        return
    writer({STREAM_KEY: event, **payload})


def summary_source(payload: Mapping[str, Any]) -> str:
    """Where a fold's summary came from: `prepared`, `fallback`, `deterministic` or `model`."""
    if payload.get("prepared"):
        return "prepared"
    if payload.get("fallback"):
        return "fallback"
    return "deterministic" if payload.get("summarizer") == "deterministic" else "model"


def emit_layer_events(events: Iterable[PendingEvent]) -> None:
    """The stream events for a layer's trace events: each clearing batch, the end of each fold, each gauge note."""
    for kind, payload, _model in events:
        if kind == "context_clear":
            emit("clear", {k: payload[k] for k in CLEAR_FIELDS if k in payload})
        elif kind == "context_compaction":
            source = summary_source(payload) if payload.get("ok") else None
            emit("fold_end", {**{k: payload[k] for k in FOLD_FIELDS if k in payload}, "source": source})
        elif kind == "fold_held":  # a fold that began and was not made: it would have freed too little
            fields = {k: payload[k] for k in (*FOLD_FIELDS, "hold_until") if k in payload}
            emit("fold_end", {**fields, "ok": False, "source": None})
        elif kind == "gauge_note":
            emit("gauge_note", payload)


__all__ = ["STREAM_KEY", "emit", "emit_layer_events", "summary_source"]
