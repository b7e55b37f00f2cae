"""Fold latency on the critical path: how long a run stands still when a fold fires, with a slow summarizer.

A fold that asks a summarizer model when it fires makes the user wait for that model:
stock deepagents does, and so did ctxwarden before it prepared summaries ahead. This
benchmark replays recorded sessions with a paced model (each agent call takes
`--model-seconds`, as a real model does) and a summarizer that takes
`--summarizer-seconds` per call (2 s by default), then measures, for every call that
folded, the time the model step spent outside the model itself: the summarizer call
when it is made there, the history write and the rest of the middleware. That is the
time a fold adds to the run.

    python -m ctxwarden.bench.fold_latency [trajectory files or folders] --window 16000

Without files it replays the session shipped with the package. Strategies: `ctxwarden`
(the default policy: summaries prepared past `summarize_at - fold_prepare_ahead`),
`ctxwarden-inline` (`fold_prepare_ahead=0`: the summary is written when the fold fires)
and `deepagents` (its summarization middleware). The target: at most 50 ms on the
critical path for at least 90% of ctxwarden's folds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from ctxwarden.bench.harness import StepTimer
from ctxwarden.bench.strategies import STRATEGIES, FixedSummarizer, ctxwarden_builder
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import stamp_of
from ctxwarden.demo import default_trajectory
from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay.driver import replay_into
from ctxwarden.replay.model import ReplayChatModel
from ctxwarden.replay.recording import Recording, load_recording
from ctxwarden.replay.tools import replay_tools
from ctxwarden.trace.store import TraceStore

TARGET_MS = 50.0
"""The critical-path budget of a fold."""

TARGET_SHARE = 0.90
"""The share of folds that must stay within `TARGET_MS`."""

STRATEGY_NAMES = ("ctxwarden", "ctxwarden-inline", "deepagents")


class PacedReplay(ReplayChatModel):
    """A replay model that takes `seconds` per call, and keeps how long each call took."""

    seconds: float = 1.0
    _took: list[float] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if is_fold_request(messages):  # answered by the slow summarizer, at its own pace
            return super()._generate(messages, stop, run_manager, **kwargs)
        started = time.perf_counter()
        result = super()._generate(messages, stop, run_manager, **kwargs)
        time.sleep(self.seconds)
        self._took.append((time.perf_counter() - started) * 1000)
        return result


class SlowSummarizer(FixedSummarizer):
    """The benchmark's fixed summarizer, taking `seconds` per call like a real model."""

    seconds: float = 2.0

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        time.sleep(self.seconds)
        return super()._generate(messages, stop, run_manager, **kwargs)


@dataclass(frozen=True, slots=True)
class Measured:
    """One replay: the critical-path milliseconds of each fold, and what the summarizer was asked."""

    session: str
    strategy: str
    calls: int
    fold_ms: list[float]
    summarizer_calls: int
    error: str | None = None
    waited_ms: list[float] | None = None
    """ctxwarden only: per fold, how long it waited for a summary still being prepared (from the trace)."""
    drafted: list[bool] | None = None
    """ctxwarden only: per fold, whether its facts section was drafted ahead (else it was built on the call)."""


def _agent(strategy: str, model: Any, tools: list[Any], folder: Path, summarizer: Any, recording: Recording) -> Any:
    if strategy == "deepagents":
        build = STRATEGIES["deepagents"].build
    else:
        build = ctxwarden_builder(ContextPolicy() if strategy == "ctxwarden" else ContextPolicy(fold_prepare_ahead=0))
    return build(model, tools, folder, summarizer, int(model.profile["max_input_tokens"]), recording.system_prompt)


def _fold_calls(strategy: str, messages: list[BaseMessage], summarizer: FixedSummarizer) -> list[int]:
    """Which model calls (counted from 0) folded."""
    if strategy == "deepagents":  # it summarizes inside the call that folds: the calls made before it are counted
        return [int(at) for at in summarizer.at]
    replies = [m for m in messages if isinstance(m, AIMessage)]
    return [i for i, m in enumerate(replies) if "context_compaction" in ((stamp_of(m) or {}).get("events") or [])]


def measure(
    recording: Recording,
    strategy: str,
    window: int,
    *,
    model_seconds: float,
    summarizer_seconds: float,
    workdir: Path | None = None,
) -> Measured:
    """Replay `recording` under `strategy`; per fold, the model step's time outside the model, in ms."""
    folder = Path(tempfile.mkdtemp(prefix=f"fold-latency-{strategy}-", dir=workdir))
    summarizer = SlowSummarizer(counter=TokenMeter().counter, name="slow-summarizer", seconds=summarizer_seconds)
    model = PacedReplay(
        recording=recording,
        usage="received",
        profile={"max_input_tokens": window},
        seconds=model_seconds,
        summaries=summarizer,
    )
    summarizer.tick = lambda: len(model._took)
    agent = _agent(strategy, model, replay_tools(recording), folder, summarizer, recording)
    timer = StepTimer()
    config: Any = {"configurable": {"thread_id": "bench"}, "callbacks": [timer], "recursion_limit": 10_000}
    error, messages = None, []
    try:
        messages = replay_into(agent, recording, config)
    except Exception as exc:  # one failing replay is reported, not fatal
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        saver = getattr(agent, "checkpointer", None)
        if saver is not None and hasattr(saver, "conn"):
            saver.conn.close()
    took = model._took
    folds = [
        round(timer.durations_ms[i] - took[i], 3)
        for i in _fold_calls(strategy, messages, summarizer)
        if i < min(len(timer.durations_ms), len(took))
    ]
    waited, drafted = _waits(folder / "trace.sqlite") if strategy != "deepagents" else (None, None)
    name = Path(recording.source).name
    return Measured(name, strategy, len(took), folds, len(summarizer.calls), error, waited, drafted)


def _waits(trace: Path) -> tuple[list[float], list[bool]]:
    """Per successful fold in the trace, how long it waited for its prepared summary (0 when it was not prepared),
    and whether its facts section was drafted ahead."""
    store = TraceStore(trace)
    try:
        events = [e for e in store.events(kind="context_compaction") if e.payload.get("ok")]
        return [float(e.payload.get("prepare_wait_ms") or 0) for e in events], [
            bool(e.payload.get("drafted")) for e in events
        ]
    finally:
        store.close()


def summary(results: Sequence[Measured]) -> dict[str, dict[str, Any]]:
    """Per strategy: folds, critical-path milliseconds (median, p90, max), share within the target, summarizer calls."""
    out: dict[str, dict[str, Any]] = {}
    for strategy in dict.fromkeys(r.strategy for r in results):
        mine = [r for r in results if r.strategy == strategy]
        folds = sorted(ms for r in mine for ms in r.fold_ms)
        within = sum(ms <= TARGET_MS for ms in folds)
        out[strategy] = {
            "sessions": len(mine),
            "calls": sum(r.calls for r in mine),
            "folds": len(folds),
            "median_ms": round(statistics.median(folds), 1) if folds else None,
            "p90_ms": round(folds[max(0, -(-len(folds) * 9 // 10) - 1)], 1) if folds else None,
            "max_ms": round(folds[-1], 1) if folds else None,
            "within_target": round(within / len(folds), 3) if folds else None,
            "summarizer_calls": sum(r.summarizer_calls for r in mine),
            "waited_for_summary": sum(ms >= 1 for r in mine for ms in r.waited_ms or ()),
            "drafted": sum(sum(r.drafted or ()) for r in mine),
            "errors": [r.error for r in mine if r.error],
        }
    return out


def table(figures: dict[str, dict[str, Any]]) -> str:
    """The summary as a markdown table."""
    lines = [
        f"| strategy | sessions | calls | folds | per fold: median / p90 / max ms | within {TARGET_MS:g} ms "
        "| summarizer calls |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in figures.items():
        share = f"{f['within_target']:.0%}" if f["within_target"] is not None else "-"
        lines.append(
            f"| {name} | {f['sessions']} | {f['calls']:,} | {f['folds']} | {f['median_ms']} / {f['p90_ms']} / "
            f"{f['max_ms']} | {share} | {f['summarizer_calls']} |"
        )
    return "\n".join(lines)


def _recordings(paths: Sequence[str]) -> list[Recording]:
    files: list[Path] = []
    for given in paths or [str(default_trajectory())]:
        path = Path(given)
        files += sorted(path.rglob("*.traj.json")) if path.is_dir() else [path]
    return [load_recording(f) for f in files]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench.fold_latency", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help="trajectory files or folders (default: the shipped session)")
    parser.add_argument("--window", type=int, default=16_000, help="window in tokens (default 16000)")
    parser.add_argument("--model-seconds", type=float, default=1.0, help="seconds per agent model call (default 1)")
    parser.add_argument("--summarizer-seconds", type=float, default=2.0, help="seconds per summary (default 2)")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGY_NAMES, default=["ctxwarden", "deepagents"])
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    results = []
    for recording in _recordings(args.paths):
        for strategy in args.strategies:
            result = measure(
                recording,
                strategy,
                args.window,
                model_seconds=args.model_seconds,
                summarizer_seconds=args.summarizer_seconds,
            )
            waits = f", waited for the summary {result.waited_ms}" if result.waited_ms is not None else ""
            waits += f", drafted {result.drafted}" if result.drafted is not None else ""
            print(f"{result.session} {strategy}: {len(result.fold_ms)} folds, {result.fold_ms}{waits}", file=sys.stderr)
            results.append(result)
    figures = summary(results)
    print(table(figures))
    if args.json is not None:
        payload = {
            "settings": vars(args) | {"json": str(args.json)},
            "summary": figures,
            "runs": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["TARGET_MS", "TARGET_SHARE", "Measured", "PacedReplay", "SlowSummarizer", "main", "measure", "summary"]
