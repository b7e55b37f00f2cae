"""Per-call overhead of context management, state by state, against the stock middlewares.

    python -m ctxwarden.bench.overhead [--sizes 100000,200000,1000000] [--steps 25]
        [--cases roomy,clearing,...] [--in-process | --no-freeze] [--no-memory] [--json out.json] [--markdown out.md]

Two benchmarks:

- **By state** (`bench.resumed`): a real deep agent resumes a long thread and takes
  `--steps` tool-calling steps, in each state ctxwarden's per-call path can be in, and
  with stock deepagents summarization and langchain context editing in the same slot.
  Per size and case: the hook's own time (first call of the resumed run apart, then
  median and 95th percentile; wall and CPU) and the whole model step's overhead. Each
  case is resumed in a fresh process from a SQLite checkpoint, after warming up on a
  tiny thread (`bench.fresh`); `--in-process` resumes them all in this process instead.
- **Memory** (`bench.footprint`, each in a fresh process): resident memory after the first
  and the hundredth evicted 2 MB output, and the peak while one 50 MiB output is evicted.

`time_per_call` and `run` are the older microbenchmark the replay benchmark prints: each
hook alone on a request growing by one message, with a model that answers at once.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any, cast

from deepagents.backends import StateBackend
from deepagents.middleware.summarization import create_summarization_middleware
from langchain.agents.middleware import ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ctxwarden.bench.footprint import measure_in_subprocess
from ctxwarden.bench.fresh import run_case_fresh
from ctxwarden.bench.meter import synthetic_history
from ctxwarden.bench.resumed import CTXWARDEN_CASES, STOCK_CASES, run_all
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.replay.scripted import scripted_model
from ctxwarden.stack.build import context_middleware

SIZES = (100_000, 1_000_000)
"""History sizes of the older microbenchmark."""

STATE_SIZES = (100_000, 200_000, 1_000_000)
"""History sizes of the benchmark by state."""

CASE_LABELS = {
    "roomy": "ctxwarden, roomy (window 5x the history)",
    "clearing": "ctxwarden, clearing engaged, boundary reused",
    "deferred": "ctxwarden, clearing batch deferred as too small",
    "cost-first": "ctxwarden, cost-first preset (masking)",
    "folded": "ctxwarden, folded view",
    "admit": "ctxwarden, skills + memory + instruction sections",
    "switch": "ctxwarden, model switch on every call",
    "uncarried": "ctxwarden, roomy, thread without carried counts",
    "deepagents": "stock deepagents summarization (roomy)",
    "context-editing": "stock langchain context editing (defaults)",
}


def _middlewares(window: int) -> dict[str, Any]:
    model = scripted_model([], window=window)
    return {
        "ctxwarden": context_middleware(policy=ContextPolicy())[0],
        "deepagents summarization": create_summarization_middleware(model, StateBackend()),
        "langchain context editing": ContextEditingMiddleware(),
    }


def time_per_call(tokens: int, messages: int = 2_000, calls: int = 12) -> dict[str, float]:
    """Median milliseconds per call of each middleware's hook alone at a `tokens`-token history (roomy window)."""
    window = tokens * 4
    history: list[Any] = list(synthetic_history(tokens, messages))
    model = scripted_model([], window=window)
    reply = ModelResponse(result=[AIMessage("ok")])
    results = {}
    for name, middleware in _middlewares(window).items():
        grown = list(history)
        samples = []
        for i in range(calls):
            grown.append(HumanMessage(f"message {i}", id=f"extra-{name}-{i}"))
            request = ModelRequest(
                model=model,
                messages=list(grown),
                system_message=SystemMessage("You are a coding agent."),
                tool_choice=None,
                tools=[],
                response_format=None,
                state=cast(Any, {"messages": list(grown)}),
                runtime=Runtime(context=None),
            )
            started = time.perf_counter()
            middleware.wrap_model_call(request, lambda _request: reply)
            samples.append((time.perf_counter() - started) * 1000)
        results[name] = statistics.median(samples[1:])  # the first call fills caches every strategy may keep
    return results


def run() -> dict[int, dict[str, float]]:
    """The older microbenchmark at each of `SIZES`."""
    return {tokens: time_per_call(tokens) for tokens in SIZES}


# --- the report ---------------------------------------------------------------------------
def machine() -> str:
    """The machine and software the figures come from."""
    import deepagents
    import langchain
    import langgraph.version

    return (
        f"{platform.system()} {platform.machine()}, {_cores()} cores, Python {platform.python_version()}, "
        f"deepagents {deepagents.__version__}, langchain {langchain.__version__}, "
        f"langgraph {langgraph.version.__version__}, counter {TokenMeter().counter_name}"
    )


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def markdown(rows: Sequence[dict[str, Any]], memory: dict[str, Any] | None) -> str:
    """The by-state table (one per history size) and the memory figures, as markdown."""
    out: list[str] = []
    for tokens in sorted({int(r["tokens"]) for r in rows}):
        out.append(f"\n**{tokens:,}-token history**\n")
        out.append(
            "| case | hook first call | of it, collector | hook median | hook p95 | hook CPU median | step median "
            "| step p95 |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        )
        for r in (r for r in rows if r["tokens"] == tokens):
            out.append(
                f"| {CASE_LABELS.get(r['case'], r['case'])} | {_ms(r['hook_first_ms'])} "
                f"| {_ms(r.get('hook_first_gc_ms'))} | {_ms(r['hook_median_ms'])} "
                f"| {_ms(r['hook_p95_ms'])} | {_ms(r['hook_cpu_median_ms'])} | {_ms(r['step_median_ms'])} "
                f"| {_ms(r['step_p95_ms'])} |"
            )
    if memory:
        growth, peak = memory["growth"], memory["peak"]
        out.append(
            f"\nMemory: resident {growth['after_first_mib']} MiB after the first evicted "
            f"{growth['output_bytes'] / 1e6:g} MB output, {growth['after_last_mib']} MiB after the "
            f"{growth['outputs']}th (+{growth['growth_mib']} MiB). One {peak['output_mib']} MiB output evicted in "
            f"{peak['seconds']} s with a peak {peak['peak_above_start_mib']} MiB above the level before it existed "
            f"({peak['peak_ratio']}x its size)."
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench.overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in STATE_SIZES), help="history sizes in tokens")
    parser.add_argument("--steps", type=int, default=25, help="tool-calling steps of each resumed run")
    parser.add_argument("--cases", default=",".join(CTXWARDEN_CASES + STOCK_CASES), help="cases to run")
    parser.add_argument("--in-process", action="store_true", help="resume every case in this process (faster)")
    parser.add_argument(
        "--no-freeze", action="store_true", help="leave the warmed heap to the garbage collector (see bench.fresh)"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory benchmark")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--markdown", type=Path, help="write the tables here")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    cases = tuple(c for c in args.cases.split(",") if c)
    unknown = sorted(set(cases) - set(CASE_LABELS))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASE_LABELS)}")
    print(f"{machine()}; {date.today().isoformat()}\n", flush=True)
    runner = None if args.in_process else functools.partial(run_case_fresh, freeze=not args.no_freeze)
    rows = run_all(sizes, args.steps, cases, log=lambda line: print(line, flush=True), runner=runner)
    memory = None
    if not args.no_memory:
        memory = {"growth": measure_in_subprocess("growth"), "peak": measure_in_subprocess("peak")}
    table = markdown(rows, memory)
    print(table)
    if args.json:
        payload = {"machine": machine(), "date": date.today().isoformat(), "rows": rows, "memory": memory}
        args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["CASE_LABELS", "SIZES", "STATE_SIZES", "machine", "main", "markdown", "run", "time_per_call"]
