"""Two worker processes, one Postgres: a thread started on one worker continues on the other, and nothing is lost.

The code under test is the recipe itself: the Postgres section of docs/recipes.md is written
to `worker.py` and imported by two real worker processes, each its own interpreter with its
own working directory, sharing only a throwaway Postgres (see `pg_server.py`). Worker A starts
a thread that evicts a large test log, clears and folds, then pauses for approval; worker B
approves, and the model's `recall` returns the whole log from the store; B compacts, forks and
reports; A runs the fork, which recalls the parent's log, while a third thread is refused it.
Then 8 threads run at once, 4 per worker. The test reads the database directly: the trace
holds exactly the events the steps made, none lost and none twice.

Run as a script (`python tests/test_postgres_deployment.py`, with `worker.py` importable and
DATABASE_URL set) it is one worker: JSON commands on stdin, one JSON answer per line on stdout.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import ContextPolicy
from ctxwarden.clip.names import call_key, result_path
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.curate.fork import list_units
from ctxwarden.fold import DETERMINISTIC, Folds
from ctxwarden.replay import scripted_model

ROOT = Path(__file__).resolve().parents[1]
RECIPE_MARK = "<!-- postgres-recipe: the test runs this block as worker.py -->"
ANSWER = "@@answer "
STEP_TIMEOUT_S = 120

WINDOW = 16_000
"""The scripted model's window: results over 1,600 tokens are evicted, clearing starts at 9,600, folding at 13,600."""

PAGES = 30
"""Pages the first turn reads, each with a long thought: enough to clear several times and fold."""

THREAD, CHILD, INTRUDER = "ticket-42", "ticket-42-retry", "someone-else"
FAILURE_LINE = "E   AssertionError: expected 'SELECT' got 'SELEKT' (lexer/keywords.py:88)"
TEST_LOG = "\n".join(
    [f"tests/test_parser.py::test_case_{i} PASSED" for i in range(250)]
    + [FAILURE_LINE]
    + [f"tests/test_lexer.py::test_token_{i} PASSED" for i in range(250)]
)
THOUGHT = "Let me read the next page of the parser design before deploying anything. " * 25
POLICY = ContextPolicy(clear_call_text=False)
"""Clearing keeps each page's THOUGHT in view, so the window fills and folds."""

LOAD_THREADS_PER_WORKER = 4
LOAD_TURNS = 4
LOAD_EVICTED_TURNS = (1, 3)


def recipe() -> str:
    """The Python block that follows the recipe mark in docs/recipes.md."""
    text = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8")
    after = text[text.index(RECIPE_MARK) + len(RECIPE_MARK) :]
    found = re.match(r"\s*```python\n(.+?)\n```", after, flags=re.S)
    assert found is not None, "the recipe mark must be followed by a python block"
    return found.group(1)


# --- the application: its tools and what the (scripted) model says -------------------------------
@tool
def run_tests(target: str) -> str:
    """Run the test suite of `target` and return its log."""
    return TEST_LOG


@tool
def fetch(page: int) -> str:
    """Fetch a page of the design notes."""
    return f"page {page}: " + "the parser reads tokens from the lexer. " * 30


@tool
def deploy(target: str) -> str:
    """Deploy `target`."""
    return f"deployed {target}"


def load_page(thread_id: str, turn: int) -> str:
    lines = 400 if turn in LOAD_EVICTED_TURNS else 3
    return "\n".join(f"{thread_id} turn {turn} line {k}: " + "payload " * 6 for k in range(lines))


@tool
def read_page(thread_id: str, turn: int) -> str:
    """Read the page of a turn."""
    return load_page(thread_id, turn)


TOOLS = [run_tests, fetch, deploy, read_page]


def _call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> AIMessage:
    return AIMessage(text, id=f"msg-{call_id}", tool_calls=[{"name": name, "args": args, "id": call_id}])


def evicted_path(thread_id: str, call_id: str) -> str:
    """Where a call's evicted result lives: its file name carries the key of the message that made the call."""
    return result_path(thread_id, "", call_id, call_key(f"msg-{call_id}", 0))


def start_replies() -> list[AIMessage]:
    return [
        _call("run_tests", {"target": "parser"}, "tests-1"),
        *(_call("fetch", {"page": i}, f"page-{i}", THOUGHT) for i in range(PAGES)),
        _call("deploy", {"target": "parser"}, "deploy-1"),
    ]


def recall_replies(call_id: str) -> list[AIMessage]:
    """The test log recalled whole: two pages, each what half the room the tools leave in the window holds."""
    return [
        _call("recall", {"call_id": "tests-1", "limit": 50_000}, call_id),
        _call("recall", {"call_id": "tests-1", "limit": 50_000, "page": 2}, f"{call_id}-page-2"),
        AIMessage("The lexer test failed."),
    ]


def intruder_replies() -> list[AIMessage]:
    return [_call("read_file", {"file_path": evicted_path(THREAD, "tests-1")}, "peek-1"), AIMessage("ok")]


def load_replies(thread_id: str) -> list[AIMessage]:
    replies = []
    for turn in range(LOAD_TURNS):
        replies += [_call("read_page", {"thread_id": thread_id, "turn": turn}, f"{thread_id}-{turn}"), AIMessage("ok")]
    return replies


def load_threads(worker: str) -> list[str]:
    return [f"load-{worker}-{n}" for n in range(LOAD_THREADS_PER_WORKER)]


# --- one worker process -------------------------------------------------------------------------
def _recalled(out: dict[str, Any], call_id: str) -> str:
    """The text of the pages the recalls `call_id` and `<call_id>-page-2` returned, without their notes."""
    pages = (_tool_result(out, call_id), _tool_result(out, f"{call_id}-page-2"))
    return "".join(page.rpartition("\n[ctxwarden: characters ")[0] for page in pages)


def _tool_result(out: dict[str, Any], call_id: str) -> str:
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    return str(message.content)


def _agent(worker: Any, replies: list[AIMessage]) -> Any:
    model = scripted_model(replies, window=WINDOW)
    return worker.worker_agent(model, TOOLS, interrupt_on={"deploy": True}, summarizer=DETERMINISTIC, policy=POLICY)


def handle(worker: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """What a worker does for one request of the test."""
    if op == "start":
        with _agent(worker, start_replies()) as (agent, _backend, _trace):
            out = worker.run_turn(agent, THREAD, "Run the parser tests, read the design notes, then deploy.")
        return {"paused": bool(out.get("__interrupt__"))}
    if op == "approve":
        with _agent(worker, recall_replies("recall-1")) as (agent, backend, trace):
            out = worker.approve(agent, THREAD)
            fold = worker.compact_thread(agent, backend, THREAD)
            values = agent.get_state(worker.config(THREAD)).values
            first_turn = next(u.index for u in list_units(values["messages"], values) if u.kind == "turn")
            worker.fork(agent, backend, THREAD, [first_turn], CHILD)
            report = worker.report(agent, trace, THREAD)
        return {
            "recalled": _recalled(out, "recall-1"),
            "fold": fold.number,
            "report": report.to_dict(),
            "report_text": report.to_text(),
        }
    if op == "child":
        with _agent(worker, recall_replies("recall-2")) as (agent, _backend, _trace):
            out = worker.run_turn(agent, CHILD, "What failed in the tests of the thread you were forked from?")
        return {"recalled": _recalled(out, "recall-2")}
    if op == "intrude":
        with _agent(worker, intruder_replies()) as (agent, _backend, _trace):
            out = worker.run_turn(agent, INTRUDER, "Look around.")
        return {"read": _tool_result(out, "peek-1")}
    if op == "load":
        barrier = threading.Barrier(LOAD_THREADS_PER_WORKER)

        def run(thread_id: str) -> None:
            with _agent(worker, load_replies(thread_id)) as (agent, _backend, _trace):
                barrier.wait(timeout=STEP_TIMEOUT_S)
                for turn in range(LOAD_TURNS):
                    worker.run_turn(agent, thread_id, f"{thread_id} turn {turn}")

        with ThreadPoolExecutor(max_workers=LOAD_THREADS_PER_WORKER) as pool:
            for done in [pool.submit(run, t) for t in load_threads(args["worker"])]:
                done.result(timeout=STEP_TIMEOUT_S)
        return {}
    raise ValueError(f"unknown op {op!r}")


def serve() -> None:
    """The worker loop: one JSON command per line on stdin, one answer per line on stdout."""
    import worker  # the recipe, written beside this process by the test

    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"ok": True, **handle(worker, request["op"], request)}
        except Exception as exc:  # reported to the test, which fails with it
            import traceback

            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        sys.stdout.write(ANSWER + json.dumps(answer) + "\n")
        sys.stdout.flush()


# --- the test -------------------------------------------------------------------------------------
class Worker:
    """A worker process driven over its stdin and stdout."""

    def __init__(self, name: str, folder: Path, url: str) -> None:
        self.name = name
        folder.mkdir()
        self.stderr_path = folder / "stderr.txt"
        env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(folder.parent)}
        with self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, __file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=folder,
                env=env,
            )
        self.answers: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(ANSWER):
                self.answers.put(line[len(ANSWER) :])

    def send(self, op: str, **args: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            answer = json.loads(self.answers.get(timeout=STEP_TIMEOUT_S))
        except queue.Empty:
            raise AssertionError(f"worker {self.name} did not answer: {self.stderr()[-3_000:]}") from None
        assert answer.pop("ok"), f"worker {self.name}: {answer['traceback']}"
        return answer

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        self.send(op, **args)
        return self.answer()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.reader.join(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code


def _stamps(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [m.response_metadata[METADATA_KEY] for m in messages if isinstance(m, AIMessage) and m.response_metadata]


def test_a_thread_moves_between_two_workers_and_nothing_is_lost(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from ctxwarden import ThreadIsolatedStoreBackend, TraceStore
    from ctxwarden.thread.read import read_values

    (tmp_path / "worker.py").write_text(recipe(), encoding="utf-8")
    a = Worker("A", tmp_path / "a", postgres_url)
    b = Worker("B", tmp_path / "b", postgres_url)
    try:
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("DATABASE_URL", postgres_url)
        import worker

        worker.setup()

        # worker A: the thread starts, evicts the log, clears and folds, and pauses before deploying
        assert a.ask("start") == {"paused": True}
        # worker B: approves; the model's recall returns the whole log A evicted; compact, fork, /context
        approved = b.ask("approve")
        assert approved["recalled"] == TEST_LOG
        # worker A again: the fork recalls its parent's log; another thread may not read it
        assert a.ask("child")["recalled"] == TEST_LOG
        peeked = a.ask("intrude")["read"]
        assert "permission_denied" in peeked
        assert FAILURE_LINE not in peeked
        # 8 threads at once, 4 on each worker
        a.send("load", worker="a")
        b.send("load", worker="b")
        assert a.answer() == {}
        assert b.answer() == {}
    finally:
        codes = [a.stop(), b.stop()]
        sys.modules.pop("worker", None)
    assert codes == [0, 0]
    assert a.stderr() == "", a.stderr()[-2_000:]
    assert b.stderr() == "", b.stderr()[-2_000:]

    trace = TraceStore(postgres_url)
    with PostgresSaver.from_conn_string(postgres_url) as saver, PostgresStore.from_conn_string(postgres_url) as store:
        values = read_values(saver, {"configurable": {"thread_id": THREAD}})
        backend = ThreadIsolatedStoreBackend(store)
        offloaded = backend.download_files([evicted_path(THREAD, "tests-1"), f"/conversation_history/{THREAD}.md"])
        load_values = {t: read_values(saver, {"configurable": {"thread_id": t}}) for w in "ab" for t in load_threads(w)}
        load_files = {
            t: backend.download_files([evicted_path(t, f"{t}-{turn}") for turn in LOAD_EVICTED_TURNS])
            for t in load_values
        }

    # the trace holds exactly the steps the thread took, across both workers
    messages = values["messages"]
    stamps = _stamps(messages)
    kinds = Counter(e.kind for e in trace.events(thread_id=THREAD))
    model_calls = len(start_replies()) + len(recall_replies("recall-1"))
    assert len(stamps) == model_calls
    assert kinds["model_usage"] == model_calls
    assert kinds["tool_call"] == PAGES + 4 == sum(isinstance(m, ToolMessage) for m in messages)  # with 2 recall pages
    assert kinds["eviction"] == 1
    assert kinds["context_clear"] == sum("context_clear" in s["events"] for s in stamps) >= 2
    folds = Folds.from_state(values).records
    automatic = sum("context_compaction" in s["events"] for s in stamps)
    assert automatic >= 1
    assert len(folds) == automatic + 1 == approved["fold"]  # the folds of the run, then compact()'s
    # compact() finds the trace the agent was built with, so its fold is traced like the automatic ones
    assert kinds["context_compaction"] == automatic + 1
    assert trace.verify() == []

    # offloaded files: the whole log, and a history file with every fold
    assert offloaded[0].content == TEST_LOG.encode()
    history = (offloaded[1].content or b"").decode()
    assert all(f"## fold {n}" in history for n in range(1, len(folds) + 1))

    # /context on worker B agrees with the trace and the checkpoints
    report = approved["report"]
    assert report["lifecycle"]["eviction"]["count"] == 1
    assert report["lifecycle"]["context_clear"]["count"] == kinds["context_clear"]
    assert report["spend"]["main"]["calls"] == model_calls
    assert report["calls"] == model_calls
    assert f"thread {THREAD}" in approved["report_text"]

    # the fork and the intruder are threads of their own in the trace
    assert Counter(e.kind for e in trace.events(thread_id=CHILD, kind=["model_usage", "tool_call"])) == {
        "model_usage": 3,
        "tool_call": 2,  # the two pages of the recall
    }

    # 8 concurrent threads: every event once, every checkpoint whole, every evicted page in the store
    ids = [e.id for e in trace.events()]
    assert len(ids) == len(set(ids))
    for thread_id, thread_values in load_values.items():
        counted = Counter(e.kind for e in trace.events(thread_id=thread_id))
        assert counted["model_usage"] == 2 * LOAD_TURNS, thread_id
        assert counted["tool_call"] == LOAD_TURNS, thread_id
        assert counted["eviction"] == len(LOAD_EVICTED_TURNS), thread_id
        assert len(thread_values["messages"]) == 4 * LOAD_TURNS
        assert [f.content for f in load_files[thread_id]] == [
            load_page(thread_id, turn).encode() for turn in LOAD_EVICTED_TURNS
        ]

    # deleting the thread: its checkpoints and files leave the database, the fork's relation to it too
    import worker

    with _agent(worker, []) as (agent, store_backend, _trace):
        deleted = worker.delete(agent, store_backend, THREAD)
    assert deleted.checkpoints
    assert {evicted_path(THREAD, "tests-1").rsplit("/", 1)[0], f"/conversation_history/{THREAD}.md"} <= set(
        deleted.paths
    )
    (event,) = trace.events(thread_id=THREAD, kind="thread_deleted")
    assert sorted(event.payload["paths"]) == sorted(deleted.paths)
    with PostgresSaver.from_conn_string(postgres_url) as saver, PostgresStore.from_conn_string(postgres_url) as store:
        assert saver.get_tuple({"configurable": {"thread_id": THREAD}}) is None
        backend = ThreadIsolatedStoreBackend(store)
        gone = backend.download_files([evicted_path(THREAD, "tests-1"), f"/conversation_history/{THREAD}.md"])
        assert [f.content for f in gone] == [None, None]
        assert backend.ancestors(CHILD) == []
        assert saver.get_tuple({"configurable": {"thread_id": CHILD}}) is not None  # the fork itself stays
        for thread_id, files in load_files.items():  # every other thread's files as they were
            paths = [evicted_path(thread_id, f"{thread_id}-{turn}") for turn in LOAD_EVICTED_TURNS]
            assert [f.content for f in backend.download_files(paths)] == [f.content for f in files]
    trace.close()


if __name__ == "__main__":
    serve()
