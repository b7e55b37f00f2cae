"""The whole stack under concurrent load: threads and processes share one state directory.

An embedded agent's state lives in two SQLite files (checkpoints and trace) and one folder of
evicted results. Several agents on one state dir — threads of a server, worker processes —
write all of them at once. This test runs the real stack (deep agent, ctxwarden middleware,
SQLite checkpointer, trace, eviction to files) from 8 threads and 4 processes at the same time,
then checks that nothing was lost: no "database is locked", every model call and tool call in
the trace, every thread's checkpointed conversation complete, every evicted result on disk, and
the /context report's spend in agreement with the trace and the checkpoints.

Run as a script (`python tests/test_load.py STATE_DIR WORKER BARRIER_DIR`) it is one worker
process; the test starts its processes that way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from ctxwarden import create_context_agent, open_checkpointer
from ctxwarden.replay import scripted_model
from ctxwarden.report import ContextReport, context_report
from ctxwarden.thread import read_messages
from ctxwarden.trace import TraceRecorder, TraceStore

THREADS = 8
"""Workers running as Python threads in the test process."""

PROCESSES = 4
"""Workers running as separate OS processes."""

THREAD_IDS_PER_WORKER = 10
"""Conversations (LangGraph thread ids) each worker runs, one after the other."""

TURNS_PER_THREAD = 10
"""Turns per conversation; a turn is a model call asking for a tool, the tool, and a final model call."""

WINDOW = 32_000
"""The scripted model's window: results above 10% of it (3,200 tokens) are evicted; nothing is cleared or folded."""

LARGE_EVERY = 4
"""Every fourth turn's tool result is large enough to be evicted."""

LARGE_LINES = 300
"""Lines of a large tool result (about 5,000 tokens)."""

WORKERS = [f"thread{n}" for n in range(THREADS)] + [f"process{n}" for n in range(PROCESSES)]
MODEL_CALLS = len(WORKERS) * THREAD_IDS_PER_WORKER * TURNS_PER_THREAD * 2
TOOL_CALLS = MODEL_CALLS // 2
EVICTED_TURNS = [turn for turn in range(TURNS_PER_THREAD) if turn % LARGE_EVERY == LARGE_EVERY - 1]
EVICTIONS = len(WORKERS) * THREAD_IDS_PER_WORKER * len(EVICTED_TURNS)
STARTUP_TIMEOUT_S = 120
RUN_TIMEOUT_S = 300


# --- one worker: the same code in a thread or in a process -------------------------------
def thread_ids(worker: str) -> list[str]:
    return [f"{worker}-conv{n}" for n in range(THREAD_IDS_PER_WORKER)]


def page_text(thread_id: str, turn: int) -> str:
    """What the tool returns: a few lines, or on every `LARGE_EVERY`th turn enough to be evicted."""
    lines = LARGE_LINES if turn in EVICTED_TURNS else 2
    return "\n".join(f"{thread_id} turn {turn} line {k}: " + "data " * 8 for k in range(lines))


def final_reply(thread_id: str, turn: int) -> str:
    return f"{thread_id} turn {turn} done"


def call_id(thread_id: str, turn: int) -> str:
    return f"{thread_id}-call{turn}"


@tool
def fetch_page(thread_id: str, turn: int) -> str:
    """Fetch the page of a turn."""
    return page_text(thread_id, turn)


def script(worker: str) -> list[AIMessage]:
    """The model's replies for all of a worker's conversations, in the order it runs them."""
    replies = []
    for thread_id in thread_ids(worker):
        for turn in range(TURNS_PER_THREAD):
            args = {"thread_id": thread_id, "turn": turn}
            replies.append(
                AIMessage("", tool_calls=[{"name": "fetch_page", "args": args, "id": call_id(thread_id, turn)}])
            )
            replies.append(AIMessage(final_reply(thread_id, turn)))
    return replies


@dataclass(frozen=True)
class WorkerRun:
    """When a worker ran its turns, and what its trace recorder could not write (must be nothing)."""

    worker: str
    started: float
    finished: float
    trace_failures: int
    last_trace_error: str | None


def wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.02)


def run_worker(state_dir: Path, worker: str, barrier: Path) -> WorkerRun:
    """Build an agent on the shared state dir, wait until every worker is ready, then run all turns."""
    recorder = TraceRecorder(state_dir / "trace.sqlite")
    agent = create_context_agent(
        scripted_model(script(worker), window=WINDOW), [fetch_page], state_dir=state_dir, trace=recorder
    )
    (barrier / f"{worker}.ready").touch()
    wait_for(barrier / "go", STARTUP_TIMEOUT_S)
    started = time.time()
    try:
        for thread_id in thread_ids(worker):
            config = {"configurable": {"thread_id": thread_id}}
            for turn in range(TURNS_PER_THREAD):
                agent.invoke({"messages": [HumanMessage(f"{thread_id} turn {turn}")]}, config)
    finally:
        agent.checkpointer.conn.close()
        assert recorder.store is not None
        recorder.store.close()
    return WorkerRun(worker, started, time.time(), recorder.failures, recorder.last_error)


# --- the test ----------------------------------------------------------------------------
def start_process(state_dir: Path, worker: str, barrier: Path, logs: Path) -> subprocess.Popen[str]:
    """A worker in its own interpreter; output goes to files so a chatty child never blocks on a pipe."""
    stdout = (logs / f"{worker}.out").open("w")
    stderr = (logs / f"{worker}.err").open("w")
    with stdout, stderr:
        return subprocess.Popen(
            [sys.executable, "-W", "error", __file__, str(state_dir), worker, str(barrier)],
            stdout=stdout,
            stderr=stderr,
            text=True,
        )


def release_when_ready(barrier: Path, processes: list[subprocess.Popen[str]], threads: list[Future[WorkerRun]]) -> None:
    """Open the barrier once every worker has built its agent.

    A worker that ended before the start, or a timeout, opens it at once: the others run, and the
    failure is reported with the results instead of as a hang.
    """
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while len(list(barrier.glob("*.ready"))) < len(WORKERS) and time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes) or any(f.done() for f in threads):
            break
        time.sleep(0.02)
    (barrier / "go").touch()


def run_everything(tmp_path: Path) -> tuple[Path, list[WorkerRun], list[str], float]:
    """Run all workers at once; returns the state dir, their runs, the errors seen and the wall time."""
    state_dir, barrier, logs = tmp_path / "state", tmp_path / "barrier", tmp_path / "logs"
    for folder in (state_dir, barrier, logs):
        folder.mkdir()
    started = time.perf_counter()
    errors: list[str] = []
    runs: list[WorkerRun] = []
    in_processes = [w for w in WORKERS if w.startswith("process")]
    in_threads = [w for w in WORKERS if w.startswith("thread")]
    processes = [start_process(state_dir, w, barrier, logs) for w in in_processes]
    try:
        with ThreadPoolExecutor(max_workers=len(in_threads)) as pool:
            futures = {w: pool.submit(run_worker, state_dir, w, barrier) for w in in_threads}
            release_when_ready(barrier, processes, list(futures.values()))
            for worker, future in futures.items():
                try:
                    runs.append(future.result(timeout=RUN_TIMEOUT_S))
                except Exception as exc:  # collected and asserted by the test
                    errors.append(f"{worker}: {type(exc).__name__}: {exc}")
        for worker, process in zip(in_processes, processes, strict=True):
            code = process.wait(timeout=RUN_TIMEOUT_S)
            out, err = (logs / f"{worker}.out").read_text(), (logs / f"{worker}.err").read_text()
            if code != 0 or err.strip():
                errors.append(f"{worker}: exit {code}: {err[-2_000:]}")
            if code == 0:
                runs.append(WorkerRun(**json.loads(out)))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return state_dir, runs, errors, time.perf_counter() - started


def expected_kinds() -> Counter[str]:
    """The events one conversation writes: one per model call, one per tool call, one per evicted result."""
    return Counter({"model_usage": 2 * TURNS_PER_THREAD, "tool_call": TURNS_PER_THREAD, "eviction": len(EVICTED_TURNS)})


def check_conversation(thread_id: str, messages: list[BaseMessage], state_dir: Path) -> None:
    """Every turn is checkpointed in order, and every evicted result is on disk, exactly."""
    assert len(messages) == 4 * TURNS_PER_THREAD, thread_id
    assert messages[-1].content == final_reply(thread_id, TURNS_PER_THREAD - 1)
    assert [m.content for m in messages if isinstance(m, HumanMessage)] == [
        f"{thread_id} turn {turn}" for turn in range(TURNS_PER_THREAD)
    ]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == [call_id(thread_id, turn) for turn in range(TURNS_PER_THREAD)]
    for turn, result in enumerate(results):
        record = result.response_metadata.get("ctxwarden") or {}
        assert bool(record.get("evicted")) == (turn in EVICTED_TURNS), (thread_id, turn)
        if record.get("evicted"):
            assert (state_dir / record["path"].lstrip("/")).read_text() == page_text(thread_id, turn)
        else:
            assert result.content == page_text(thread_id, turn)


def check_report_agrees(thread_id: str, report: ContextReport, messages: list[BaseMessage], store: TraceStore) -> None:
    """The /context report, the raw trace rows and the checkpointed call stamps tell the same totals."""
    usage = store.events(thread_id=thread_id, kind="model_usage")
    evictions = store.events(thread_id=thread_id, kind="eviction")
    stamps = [m.response_metadata["ctxwarden"] for m in messages if isinstance(m, AIMessage)]

    assert report.calls == len(usage) == len(stamps) == 2 * TURNS_PER_THREAD
    assert report.spend == {
        "main": {
            "calls": len(usage),
            "input_tokens": sum(e.payload["input_tokens"] for e in usage),
            "output_tokens": sum(e.payload["output_tokens"] for e in usage),
            "cached_input_tokens": 0,
        }
    }
    assert report.spend["main"]["input_tokens"] == sum(s["input_tokens"] for s in stamps)
    assert report.last_input_tokens == usage[-1].payload["input_tokens"] == stamps[-1]["input_tokens"]
    assert report.window == WINDOW
    assert report.lifecycle == {
        "eviction": {"count": len(EVICTED_TURNS), "tokens": sum(e.payload["tokens"] for e in evictions), "freed": 0}
    }
    assert [e.payload["call_id"] for e in evictions] == [call_id(thread_id, turn) for turn in EVICTED_TURNS]


# langchain's `ModelRequest.__init__` silences its own deprecation warning with `warnings.catch_warnings()`, which is
# not thread-safe: with requests built in several threads at once, one thread can restore the filters while another is
# inside the block, and the warning escapes (as an error here, where warnings are errors). Nothing of ours assigns to a
# request; this one warning, from that race, is let through. The same race lets out the warning langchain-core silences
# when it infers a tool's argument schema (`create_schema_from_function`, as every agent build does for its tools,
# here in several threads at once): nothing of ours defines a class-based pydantic config.
@pytest.mark.filterwarnings("ignore:Direct attribute assignment to ModelRequest:DeprecationWarning")
@pytest.mark.filterwarnings(
    "ignore:Support for class-based `config` is deprecated:pydantic.warnings.PydanticDeprecatedSince20"
)
def test_threads_and_processes_share_one_state_dir_without_losing_anything(tmp_path: Path) -> None:
    state_dir, runs, errors, seconds = run_everything(tmp_path)

    assert errors == []
    assert sorted(r.worker for r in runs) == sorted(WORKERS)
    assert [(r.worker, r.trace_failures, r.last_trace_error) for r in runs if r.trace_failures] == []
    assert max(r.started for r in runs) < min(r.finished for r in runs), "the workers did not all run at once"

    every_thread = [t for w in WORKERS for t in thread_ids(w)]
    store = TraceStore(state_dir / "trace.sqlite")
    checkpoints = open_checkpointer(state_dir / "checkpoints.sqlite")
    try:
        assert store.verify() == []
        assert store.threads() == sorted(every_thread)
        events = store.events()
        assert len({e.id for e in events}) == len(events)
        kinds_by_thread: dict[str, Counter[str]] = {t: Counter() for t in every_thread}
        for event in events:
            kinds_by_thread[str(event.thread_id)][event.kind] += 1
        assert {t: kinds for t, kinds in kinds_by_thread.items() if kinds != expected_kinds()} == {}

        reports = []
        for thread_id in every_thread:
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            messages = read_messages(checkpoints, config)
            check_conversation(thread_id, messages, state_dir)
            reports.append(context_report(checkpoints, config, trace=store))
            check_report_agrees(thread_id, reports[-1], messages, store)
    finally:
        checkpoints.conn.close()
        store.close()

    kinds = Counter(e.kind for e in events)
    assert kinds["model_usage"] == sum(r.spend["main"]["calls"] for r in reports) == MODEL_CALLS
    assert kinds["tool_call"] == TOOL_CALLS
    assert kinds["eviction"] == sum(r.lifecycle["eviction"]["count"] for r in reports) == EVICTIONS
    assert len(events) == MODEL_CALLS + TOOL_CALLS + EVICTIONS
    print(
        f"\nload: {THREADS} threads + {PROCESSES} processes, {len(every_thread)} conversations, "
        f"{MODEL_CALLS} model calls, {TOOL_CALLS} tool calls, {EVICTIONS} evictions, "
        f"{len(events)} trace events, {seconds:.1f} s"
    )


if __name__ == "__main__":
    state, name, gate = sys.argv[1:4]
    print(json.dumps(asdict(run_worker(Path(state), name, Path(gate)))))
