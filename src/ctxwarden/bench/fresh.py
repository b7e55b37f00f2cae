"""The resumed-thread benchmark with each case resumed in a fresh process, as a worker picks up a long thread.

A case resumed in the process that built its thread shares that process's heap and
caches: the messages it resumes are objects the process already made, and a garbage
collector pass over them may or may not land on the timed call. A served worker loads
the thread from the checkpointer instead, into a process that has run other threads.
So here one process seeds and settles the case's thread into a SQLite checkpoint, and a
fresh interpreter first runs the same case on a tiny thread of its own (its imports,
tokenizer and code paths warmed, so their first-use cost is not timed), then loads the
long thread from the checkpoint and resumes it, timed call by call as in
`bench.resumed`. Only what the resumed thread's size costs is in its first call.

The warmed heap is frozen first (`gc.freeze()`, as a server does once it has imported
everything): a full pass of the garbage collector over the imported modules takes about
90 ms on a 2-core machine whatever the thread, and lands on whichever call allocates when
the thread just loaded tips it over its threshold. Passes over what the thread and the
calls added are still timed; `hook_first_gc_ms` is the collector's share of the first call.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxwarden.bench.harness import StepTimer
from ctxwarden.bench.resumed import Timings, build, run_case, seed_values, session, steps_script
from ctxwarden.core.meter import TokenMeter

WARM_TOKENS = 6_000
"""The size of the thread a fresh process runs first, to warm its imports and code paths."""

CHECKPOINTS = "checkpoints.sqlite"


def _config(case: str, tokens: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{case}-{tokens}"}, "recursion_limit": 10_000}


def seed(case: str, tokens: int, history: list[BaseMessage], folder: Path) -> Path:
    """Seed `case`'s thread with `history`, settle it with one short run, checkpointed in SQLite under `folder`."""
    path = folder / CHECKPOINTS
    with closing(sqlite3.connect(path, check_same_thread=False)) as connection:
        settle = build(case, tokens, steps_script(1, "settle"), SqliteSaver(connection), folder)
        config = _config(case, tokens)
        settle.agent.update_state(config, seed_values(case, history), as_node="model")
        settle.agent.invoke({"messages": [HumanMessage("Run the first check.", id="settle-ask")]}, config)
    return path


def resume(case: str, tokens: int, steps: int, folder: Path, *, freeze: bool = True) -> dict[str, Any]:
    """In this process: warm up on a tiny thread, then resume the thread `seed` left under `folder` (one row).

    Without `freeze`, the warmed heap is left to the collector as it is (see the module)."""
    warm = folder / "warm"
    warm.mkdir(exist_ok=True)
    carried = case not in {"uncarried", "deepagents", "context-editing"}
    run_case(case, WARM_TOKENS, 2, session(WARM_TOKENS, TokenMeter(), carried=carried), warm)
    gc.collect()
    if freeze:
        gc.freeze()
    with closing(sqlite3.connect(folder / CHECKPOINTS, check_same_thread=False)) as connection:
        resumed = build(case, tokens, steps_script(steps, "step"), SqliteSaver(connection), folder, collector=True)
        timer = StepTimer()
        config = {**_config(case, tokens), "callbacks": [timer]}
        resumed.agent.invoke({"messages": [HumanMessage("Now run every check.", id="resume-ask")]}, config)
    step_ms = [max(0.0, s - m) for s, m in zip(timer.durations_ms, resumed.model.took_ms, strict=False)]
    row = Timings(case, tokens, resumed.hook_ms, resumed.hook_cpu_ms, step_ms).row()
    return row | {"hook_first_gc_ms": round(resumed.hook_gc_ms[0], 3) if resumed.hook_gc_ms else None}


def run_case_fresh(
    case: str, tokens: int, steps: int, history: list[BaseMessage], folder: Path, *, freeze: bool = True
) -> dict[str, Any]:
    """Seed `case` here, resume it in a fresh interpreter; the row of the resumed run."""
    seed(case, tokens, history, folder)
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom ctxwarden.bench.fresh import resume\n"
        f"print(json.dumps(resume({case!r}, {tokens}, {steps}, Path({str(folder)!r}), freeze={freeze})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=1_800)
    if done.returncode != 0:
        raise RuntimeError(f"the resumed run of {case!r} at {tokens:,} tokens failed:\n{done.stderr[-4_000:]}")
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


__all__ = ["CHECKPOINTS", "WARM_TOKENS", "resume", "run_case_fresh", "seed"]
