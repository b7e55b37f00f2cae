"""`python -m ctxwarden.bench`: every strategy on every recorded session, side by side, in one run.

    python -m ctxwarden.bench [PATH ...] [--windows 32000,128000] [--strategies a,b] [--demo-in system|user] \\
        [--json results.json] [--markdown results.md] [--plot usage.png] [--recall-plot recall.png] \\
        [--title NAME] [--no-overhead]

PATH is a trajectory file or a folder of them (default: ../shared/trajectories beside
the working directory, else the trajectory shipped with the package). Files that
cannot be read are reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ctxwarden.bench.cost_parts import CostParts, parts_markdown, priced_parts
from ctxwarden.bench.harness import replay
from ctxwarden.bench.metrics import RunFigures, figures, median, percentile
from ctxwarden.bench.overhead import run as run_overhead
from ctxwarden.bench.prices import PRICE_MODELS
from ctxwarden.bench.quality import recall_cost_plot, recall_markdown
from ctxwarden.bench.recall import RecallCounts
from ctxwarden.bench.strategies import STRATEGIES
from ctxwarden.core.meter import TokenMeter
from ctxwarden.demo.run import default_trajectory
from ctxwarden.errors import TrajectoryFormatError
from ctxwarden.replay.recording import Recording, load_recording
from ctxwarden.replay.sweagent import DemoPlace

DEFAULT_WINDOWS = (32_000, 128_000)


@dataclass(slots=True)
class Aggregate:
    strategy: str
    window: int
    runs: list[RunFigures]

    def as_dict(self) -> dict[str, Any]:
        ok = [r for r in self.runs if r.error is None]
        shares = [s for r in ok for s in r.visible_shares]
        overheads = [o for r in ok for o in r.overheads_ms]
        total = sum(r.original_bytes for r in ok)
        recall, parts = RecallCounts(), CostParts()
        for r in ok:
            recall.add(r.recall)
            parts.add(r.parts)
        return {
            "strategy": self.strategy,
            "window": self.window,
            "trajectories": len(ok),
            "calls": sum(r.calls for r in ok),
            "overflows": sum(r.overflows for r in ok),
            "input_tokens": sum(r.input_tokens for r in ok),
            "cache_cost": round(sum(r.cache_cost for r in ok)),
            "cache_cost_calls": round(sum(r.cache_cost_calls for r in ok)),
            "cached_tokens": sum(r.cached_tokens for r in ok),
            "uncached_tokens": sum(r.uncached_tokens for r in ok),
            "costs": {
                price.name: round(price.cost(sum(r.cached_tokens for r in ok), sum(r.uncached_tokens for r in ok)))
                for price in PRICE_MODELS
            },
            "cost_parts": priced_parts(parts),
            "peak_fraction": round(max((r.peak_fraction for r in ok), default=0.0), 4),
            "folds": sum(r.folds for r in ok),
            "summarizer_input_tokens": sum(r.summarizer_input_tokens for r in ok),
            "visible_share": round(sum(shares) / len(shares), 4) if shares else 0.0,
            "overhead_ms_median": round(median(overheads), 3),
            "overhead_ms_p95": round(percentile(overheads, 0.95), 3),
            "recoverability": round(sum(r.reachable_bytes for r in ok) / total, 6) if total else 1.0,
            "recall": round(recall.recall, 4),
            "long_range_recall": round(recall.long_range_recall, 4),
            "references": recall.references,
            "task_recall": round(recall.task_recall, 4),
            "task_references": recall.task_references,
            "probe_recall": round(recall.probe_recall, 4),
            "probes": recall.probes,
            "errors": [f"{Path(r.trajectory).name}: {r.error}" for r in self.runs if r.error],
        }


def find_trajectories(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in (".json", ".traj") and p.is_file()))
        else:
            found.append(path)
    return found


def default_paths() -> list[Path]:
    shared = Path.cwd().parent / "shared" / "trajectories"
    if shared.is_dir():
        return [shared]
    return [default_trajectory()]


def load_all(paths: Sequence[Path], console: Console, demo_in: DemoPlace = "system") -> list[Recording]:
    recordings = []
    for path in find_trajectories(paths):
        try:
            recordings.append(load_recording(path, demo_in=demo_in))
        except TrajectoryFormatError as exc:
            console.print(f"[yellow]skipped[/yellow] {exc}", highlight=False)
    return recordings


def run_all(
    recordings: Sequence[Recording],
    strategies: Sequence[str],
    windows: Sequence[int],
    console: Console | None = None,
    keep: Path | None = None,
) -> tuple[list[Aggregate], dict[tuple[str, int, str], RunFigures]]:
    meter = TokenMeter()
    workdir = Path(tempfile.mkdtemp(prefix="ctxwarden-bench-", dir=keep))
    aggregates = {(s, w): Aggregate(s, w, []) for w in windows for s in strategies}
    per_run: dict[tuple[str, int, str], RunFigures] = {}
    total = len(recordings) * len(strategies) * len(windows)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True, disable=console is None) as bar:
        task = bar.add_task("replaying", total=total)
        for window in windows:
            for recording in recordings:
                for strategy in strategies:
                    name = Path(recording.source).name.removesuffix(".traj.json")
                    bar.update(task, description=f"{strategy} · {window:,} · {name}")
                    run = replay(recording, strategy, window, workdir)
                    result = figures(run, meter)
                    aggregates[(strategy, window)].runs.append(result)
                    per_run[(strategy, window, recording.source)] = result
                    bar.advance(task)
    if keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return list(aggregates.values()), per_run


def markdown(results: Sequence[dict[str, Any]]) -> str:
    head = (
        "| strategy | window | calls | over window | peak | input tokens | cache cost | folds | summarizer in "
        "| visible share | overhead median / p95 ms | recoverable |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = [
        f"| {r['strategy']} | {r['window']:,} | {r['calls']:,} | {r['overflows']:,} | {r['peak_fraction']:.2f} "
        f"| {r['input_tokens']:,} | {r['cache_cost']:,} | {r['folds']:,} | {r['summarizer_input_tokens']:,} "
        f"| {r['visible_share']:.2f} | {r['overhead_ms_median']:.2f} / {r['overhead_ms_p95']:.2f} "
        f"| {r['recoverability']:.1%} |"
        for r in results
    ]
    return head + "\n".join(rows) + "\n"


def overhead_markdown(overhead: dict[int, dict[str, float]]) -> str:
    names = list(next(iter(overhead.values())))
    head = "| history | " + " | ".join(names) + " |\n|---:|" + "---:|" * len(names) + "\n"
    rows = [
        f"| {tokens:,} tokens | " + " | ".join(f"{ms:.2f} ms" for ms in row.values()) + " |"
        for tokens, row in overhead.items()
    ]
    return head + "\n".join(rows) + "\n"


def plot(per_run: dict[tuple[str, int, str], RunFigures], trajectory: str, window: int, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.5), dpi=110)
    ax = fig.add_subplot()
    for (strategy, w, source), result in per_run.items():
        if w == window and source == trajectory and result.per_call_tokens:
            ax.plot(range(1, len(result.per_call_tokens) + 1), result.per_call_tokens, label=strategy, linewidth=1.4)
    ax.axhline(window, color="#c62828", linewidth=1, linestyle="--", label=f"window {window:,}")
    ax.set_xlabel("model call")
    ax.set_ylabel("input tokens")
    ax.set_title(f"{Path(trajectory).name.removesuffix('.traj.json')} at a {window:,}-token window")
    ax.grid(alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench", description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="trajectory files or folders")
    parser.add_argument("--windows", default=",".join(str(w) for w in DEFAULT_WINDOWS))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument("--markdown", type=Path, help="write the tables to this markdown file")
    parser.add_argument(
        "--plot",
        type=Path,
        help="PNG of input tokens per call (one trajectory, every strategy); beside it, <name>-recall.png: "
        "reference recall against cost, one panel per window",
    )
    parser.add_argument(
        "--recall-plot",
        type=Path,
        help="PNG of reference recall against cost (vs stock deepagents), one panel per window, every strategy",
    )
    parser.add_argument("--title", help="corpus name for the recall plot's panels")
    parser.add_argument(
        "--demo-in",
        choices=("system", "user"),
        default="system",
        help="where an original SWE-agent .traj's demonstration goes",
    )
    parser.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead microbenchmark")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        windows = [int(w.replace("_", "")) for w in args.windows.split(",") if w]
    except ValueError:
        parser.error(f"--windows {args.windows!r}: give whole numbers of tokens separated by commas, e.g. 32000,128000")
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    recordings = load_all(args.paths or default_paths(), console, demo_in=args.demo_in)
    if not recordings:
        console.print("no trajectory could be read; nothing to run")
        return 2
    aggregates, per_run = run_all(recordings, strategies, windows, console)
    results = [a.as_dict() for a in aggregates]
    tables = markdown(results) + "\nWhat the agent keeps, against what it costs:\n\n" + recall_markdown(results)
    tables += f"\nWhere the cost goes ({PRICE_MODELS[0].name} price):\n\n" + parts_markdown(results)
    overhead = None
    if not args.no_overhead:
        overhead = run_overhead()
        tables += "\nPer-call overhead of the model-call hook (median):\n\n" + overhead_markdown(overhead)
    print(tables)
    if args.json:
        payload = {"windows": windows, "results": results, "overhead_ms": overhead}
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(tables, encoding="utf-8")
    if args.plot:
        longest = max(recordings, key=lambda r: len(r.steps))
        plot(per_run, longest.source, windows[0], args.plot)
        recall_cost_plot(results, args.plot.with_name(f"{args.plot.stem}-recall{args.plot.suffix}"), args.title)
    if args.recall_plot:
        recall_cost_plot(results, args.recall_plot, args.title)
    return 0


__all__ = ["Aggregate", "find_trajectories", "main", "markdown", "run_all"]
