"""The usage plot: input tokens per model call, against the window and the clear and fold lines.

Built from the thread itself — each AI message's stamp gives the call's input tokens,
model and window, and the layers that acted — so it needs no trace. The window line
is a step line: after a model switch it follows the new model's window. Markers show
evictions, clears, folds and model switches.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.core.extras import require
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import is_evicted, stamp_of
from ctxwarden.errors import NothingMeasuredError, ThreadSourceError
from ctxwarden.thread.read import read_messages


def call_series(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """One row per stamped model call: index, input tokens, window, model and what happened before it."""
    rows: list[dict[str, Any]] = []
    evicted_since = 0
    previous_model = None
    for message in messages:
        if isinstance(message, ToolMessage) and is_evicted(message):
            evicted_since += 1
        stamp = stamp_of(message)
        if stamp is None:
            continue
        happened = set(stamp.get("events") or ())
        rows.append(
            {
                "call": len(rows) + 1,
                "input_tokens": int(stamp.get("reported_input_tokens") or stamp.get("input_tokens") or 0),
                "window": int(stamp["window"]),
                "model": stamp.get("model"),
                "switch": previous_model is not None and stamp.get("model") != previous_model,
                "evictions": evicted_since,
                "clear": "context_clear" in happened,
                "fold": "context_compaction" in happened,
            }
        )
        previous_model, evicted_since = stamp.get("model"), 0
    return rows


def usage_plot(
    source: Any,
    config: RunnableConfig | None = None,
    *,
    path: str | Path | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    title: str | None = None,
) -> Any:
    """A matplotlib `Figure` of a thread's input tokens per call; saved as PNG when `path` is given.

    `source` is a list of messages, or an agent, checkpointer or state dir with `config`.
    The figure shows itself as an image when it is a notebook cell's value (no pyplot needed).
    Needs matplotlib: `pip install 'ctxwarden[plot]'`.
    """
    Figure = require("matplotlib.figure", "usage_plot").Figure
    MaxNLocator = require("matplotlib.ticker", "usage_plot").MaxNLocator
    if isinstance(source, list | tuple):
        messages = list(source)
    else:
        if config is None:
            raise ThreadSourceError(
                f"usage_plot needs config={{'configurable': {{'thread_id': ...}}}} to read a thread from "
                f"{type(source).__name__}. Fix: pass config=, or pass the thread's messages as a list."
            )
        messages = read_messages(source, config)
    rows = call_series(messages)
    if not rows:
        raise NothingMeasuredError(
            "the thread has no model call measured by ctxwarden, so there is nothing to plot. "
            "Fix: plot a thread after the agent's first model call through the ctxwarden stack."
        )

    calls = [r["call"] for r in rows]
    tokens = [r["input_tokens"] for r in rows]
    windows = [r["window"] for r in rows]
    fig = Figure(figsize=(10, 4.5), dpi=110)
    ax = fig.add_subplot()
    ax.plot(calls, tokens, color="#1f77b4", linewidth=1.6, label="input tokens per call")
    ax.step(calls, windows, where="mid", color="#c62828", linewidth=1.2, label="window")
    ax.step(
        calls,
        [w * policy.summarize_at for w in windows],
        where="mid",
        color="#ef6c00",
        linestyle="--",
        linewidth=1,
        label=f"fold at {policy.summarize_at:.0%}",
    )
    ax.step(
        calls,
        [w * policy.clear_at for w in windows],
        where="mid",
        color="#f9a825",
        linestyle=":",
        linewidth=1,
        label=f"clear at {policy.clear_at:.0%}",
    )
    top = max(max(tokens), max(windows)) * 1.15
    _markers(
        ax, rows, "clear", {"marker": "o", "s": 70, "facecolors": "none", "edgecolors": "#2e7d32", "linewidths": 1.6}
    )
    _markers(ax, rows, "fold", {"marker": "s", "s": 30, "color": "#000000"})
    _markers(ax, rows, "evictions", {"marker": "v", "s": 36, "color": "#6a1b9a"}, lift=top * 0.045)
    for row in rows:
        if row["switch"]:
            ax.axvline(row["call"] - 0.5, color="#555555", linestyle="-.", linewidth=1)
            ax.annotate(
                f"→ {row['model']}",
                (row["call"] - 0.5, max(windows) * 1.02),
                fontsize=8,
                rotation=90,
                va="bottom",
                ha="right",
            )
    ax.set_xlabel("model call")
    ax.set_ylabel("input tokens")
    ax.set_xlim(0.5, max(calls) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # calls are counted: no tick at call 1.5
    ax.set_ylim(0, top)
    ax.yaxis.set_major_formatter(lambda value, _pos: tokens_label(value))
    ax.set_title(title or f"{len(rows)} model calls · peak {max(tokens):,} tokens")
    ax.grid(alpha=0.25)
    ax.legend(loc="upper left", fontsize=8, ncols=2)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    fig._repr_png_ = lambda: _png(fig)  # a notebook shows the image, not `<Figure size ...>`
    return fig


MARKER_LABELS = {"clear": "clear", "fold": "fold", "evictions": "eviction"}


def tokens_label(value: float) -> str:
    """An exact, short tick label: 2.5k, 12.5k, 200k, 1.5M (never 2k for 2,500)."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if abs(value) >= size:
            return f"{value / size:,.3f}".rstrip("0").rstrip(".") + unit
    return f"{value:,.0f}"


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _markers(ax: Any, rows: list[dict[str, Any]], key: str, style: dict[str, Any], *, lift: float = 0.0) -> None:
    """Markers for the calls where `key` happened; `lift` draws them above the line so none hides another."""
    hits = [r for r in rows if r[key]]
    if hits:
        ax.scatter(
            [r["call"] for r in hits],
            [r["input_tokens"] + lift for r in hits],
            zorder=4,
            label=f"{MARKER_LABELS[key]} ({sum(int(r[key]) for r in hits)})",
            **style,
        )


__all__ = ["call_series", "tokens_label", "usage_plot"]
