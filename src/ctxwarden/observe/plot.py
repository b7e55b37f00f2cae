"""The usage plot: input tokens per model call, against the window and the clear and fold lines.

Built from the thread itself — each AI message's stamp gives the call's input tokens,
model and window, and the layers that acted — so it needs no trace. The window line
is a step line: after a model switch it follows the new model's window. Markers show
evictions, clears, folds and model switches.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.core.extras import require
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import is_evicted, stamp_of
from ctxwarden.observe.thread import read_messages


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
    """
    Figure = require("matplotlib.figure", "usage_plot").Figure
    if isinstance(source, list | tuple):
        messages = list(source)
    else:
        if config is None:
            raise TypeError("usage_plot needs config={'configurable': {'thread_id': ...}} to read a thread")
        messages = read_messages(source, config)
    rows = call_series(messages)
    if not rows:
        raise ValueError("the thread has no model call measured by ctxwarden, so there is nothing to plot")

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
    _markers(ax, rows, "evictions", "v", "#6a1b9a", "eviction")
    _markers(ax, rows, "clear", "o", "#2e7d32", "clear")
    _markers(ax, rows, "fold", "s", "#000000", "fold")
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
    ax.set_ylim(0, max(max(tokens), max(windows)) * 1.15)
    ax.yaxis.set_major_formatter(lambda value, _pos: f"{value / 1000:,.0f}k")
    ax.set_title(title or f"{len(rows)} model calls · peak {max(tokens):,} tokens")
    ax.grid(alpha=0.25)
    ax.legend(loc="upper left", fontsize=8, ncols=2)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig


def _markers(ax: Any, rows: list[dict[str, Any]], key: str, marker: str, color: str, label: str) -> None:
    hits = [r for r in rows if r[key]]
    if hits:
        ax.scatter(
            [r["call"] for r in hits],
            [r["input_tokens"] for r in hits],
            marker=marker,
            color=color,
            zorder=3,
            s=28,
            label=f"{label} ({sum(int(r[key]) for r in hits)})",
        )


__all__ = ["call_series", "usage_plot"]
