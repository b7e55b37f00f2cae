"""What the agent keeps, against what it costs: the recall table and the recall-versus-cost chart.

Cheaper is better only at equal or higher quality, so the benchmark shows each strategy's
reference recall (and long-range and probe recall) beside its cache-aware cost relative
to stock deepagents at the same window, as a table and as one chart per window.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxwarden.core.extras import require

BASELINE = "deepagents"
"""Costs are shown relative to this strategy at the same window."""


def relative_costs(results: Sequence[dict[str, Any]]) -> dict[tuple[str, int], float | None]:
    """Each result's cache cost over the baseline's at its window (`None` without a baseline)."""
    base = {r["window"]: r["cache_cost"] for r in results if r["strategy"] == BASELINE and r["cache_cost"]}
    return {
        (r["strategy"], r["window"]): (r["cache_cost"] / base[r["window"]] if r["window"] in base else None)
        for r in results
    }


def recall_markdown(results: Sequence[dict[str, Any]]) -> str:
    """One row per strategy and window: recall, long-range recall, probe recall, cost against the baseline."""
    relative = relative_costs(results)
    head = (
        f"| strategy | window | reference recall | long-range recall | references | probe recall (probes) "
        f"| cache cost vs {BASELINE} | folds | over window |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = []
    for r in results:
        cost = relative[(r["strategy"], r["window"])]
        rows.append(
            f"| {r['strategy']} | {r['window']:,} | {r['recall']:.3f} | {r['long_range_recall']:.3f} "
            f"| {r['references']:,} | {r['probe_recall']:.3f} ({r['probes']:,}) "
            f"| {'' if cost is None else f'{cost:.3f}×'} | {r['folds']:,} | {r['overflows']:,} |"
        )
    return head + "\n".join(rows) + "\n"


def recall_cost_plot(results: Sequence[dict[str, Any]], path: Path) -> None:
    """One panel per window: a point per strategy, cost against the baseline across, recall up."""
    figure = require("matplotlib.figure", "the recall-versus-cost chart").Figure

    relative = relative_costs(results)
    windows = sorted({r["window"] for r in results})
    fig = figure(figsize=(4.2 * len(windows), 4.2), dpi=110)
    for index, window in enumerate(windows, start=1):
        ax = fig.add_subplot(1, len(windows), index)
        points: dict[tuple[float, float], list[str]] = {}
        for r in (r for r in results if r["window"] == window):
            cost = relative[(r["strategy"], window)]
            if cost is not None:  # strategies on the same point share one label
                points.setdefault((round(cost, 3), round(r["recall"], 3)), []).append(r["strategy"])
        order = {name: rank for rank, name in enumerate(dict.fromkeys(r["strategy"] for r in results))}
        for (cost, recall), names in sorted(points.items(), key=lambda item: order[item[1][0]]):
            # a legend, not labels beside the points: where nothing needs managing the points all but coincide
            color = f"C{order[names[0]] % 10}"  # a strategy keeps its color in every panel
            ax.scatter([cost], [recall], s=40, color=color, label=", ".join(names), zorder=3)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title(f"{window:,}-token window", fontsize=10)
        ax.set_xlabel(f"cache cost vs {BASELINE}")
        ax.set_ylabel("reference recall")
        ax.grid(alpha=0.25)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


__all__ = ["BASELINE", "recall_cost_plot", "recall_markdown", "relative_costs"]
