"""What the agent keeps, against what it costs: the recall table and the recall-versus-cost chart.

Cheaper is better only at equal or higher quality, so the benchmark shows each strategy's
reference recall (and long-range and probe recall) beside its cache-aware cost relative
to stock deepagents at the same window, under every price model of `ctxwarden.bench.prices`
(a larger, better-cached view wins under one and can lose under another), as a table and
as one chart per window with the Pareto front: the strategies no other beats on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxwarden.bench.prices import PRICE_MODELS
from ctxwarden.core.extras import require

BASELINE = "deepagents"
"""Costs are shown relative to this strategy at the same window."""


def _cost(result: dict[str, Any], price: str | None) -> float:
    return float(result["cache_cost"] if price is None else result.get("costs", {}).get(price, result["cache_cost"]))


def relative_costs(results: Sequence[dict[str, Any]], price: str | None = None) -> dict[tuple[str, int], float | None]:
    """Each result's cost over the baseline's at its window (`None` without a baseline), under the price model named
    `price` (default: the base one, `cache_cost`)."""
    base = {r["window"]: _cost(r, price) for r in results if r["strategy"] == BASELINE and _cost(r, price)}
    return {
        (r["strategy"], r["window"]): (_cost(r, price) / base[r["window"]] if r["window"] in base else None)
        for r in results
    }


def pareto(points: dict[str, tuple[float, float]]) -> list[str]:
    """The names whose (cost, recall) no other point beats: cheaper or equal at higher or equal recall, one strictly."""
    return [
        name
        for name, (cost, recall) in points.items()
        if not any(
            c <= cost and r >= recall and (c < cost or r > recall) for other, (c, r) in points.items() if other != name
        )
    ]


def recall_markdown(results: Sequence[dict[str, Any]]) -> str:
    """One row per strategy and window: recall, long-range recall, probe recall, cost against the baseline."""
    relative = {price.name: relative_costs(results, price.name) for price in PRICE_MODELS}
    prices = " | ".join(f"cost vs {BASELINE} ({p.name}: {p.cached:g} / {p.uncached:g})" for p in PRICE_MODELS)
    head = (
        f"| strategy | window | reference recall | long-range recall | references | task recall (references) "
        "| probe recall (probes) "
        f"| {prices} | folds | over window |\n"
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(PRICE_MODELS) + "---:|---:|\n"
    )
    rows = []
    for r in results:
        costs = [relative[p.name][(r["strategy"], r["window"])] for p in PRICE_MODELS]
        shown = " | ".join("" if c is None else f"{c:.3f}×" for c in costs)
        rows.append(
            f"| {r['strategy']} | {r['window']:,} | {r['recall']:.3f} | {r['long_range_recall']:.3f} "
            f"| {r['references']:,} | {r['task_recall']:.3f} ({r['task_references']:,}) "
            f"| {r['probe_recall']:.3f} ({r['probes']:,}) "
            f"| {shown} | {r['folds']:,} | {r['overflows']:,} |"
        )
    return head + "\n".join(rows) + "\n"


def recall_cost_plot(results: Sequence[dict[str, Any]], path: Path, title: str | None = None) -> None:
    """One panel per window: a point per strategy, cost against the baseline across, recall up, and the Pareto
    front (the strategies that never overflow the window and that no other such is both cheaper and better than)
    joined by a line."""
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
        front = pareto(
            {
                r["strategy"]: (relative[(r["strategy"], window)] or 0.0, r["recall"])
                for r in results
                if r["window"] == window and relative[(r["strategy"], window)] is not None and not r["overflows"]
            }  # a strategy whose calls overflow the window is not a choice, whatever its recall
        )
        line = sorted(
            (
                relative[(n, window)] or 0.0,
                next(r["recall"] for r in results if r["strategy"] == n and r["window"] == window),
            )
            for n in front
        )
        ax.plot([c for c, _ in line], [r for _, r in line], color="#888888", linewidth=0.8, zorder=2)
        ax.legend(fontsize=6, loc="lower right")
        ax.set_title(f"{title + ' · ' if title else ''}{window:,}-token window", fontsize=9)
        ax.set_xlabel(f"cache cost vs {BASELINE}")
        ax.set_ylabel("reference recall")
        ax.grid(alpha=0.25)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


__all__ = ["BASELINE", "pareto", "recall_cost_plot", "recall_markdown", "relative_costs"]
