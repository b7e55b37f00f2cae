"""Faults around the stack — a hanging summarizer, a full disk, a locked or read-only trace, a refusing provider.

Each must cost at most the feature that failed, never the run and never a byte of the
conversation: the run finishes, what could not be offloaded stays in the message, and
the trace says what happened.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import DETERMINISTIC, ContextPolicy, ThreadIsolatedBackend, TraceRecorder, TraceStore, context_middleware
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import is_summary
from ctxwarden.fold.summarize import amodel_summary, model_summary
from ctxwarden.replay import ScriptedChatModel, scripted_model

WINDOW = 4_000
HANG_S = 5.0
# ~400 tokens of assistant text per step; clear_call_text=False (`_hanging_run`) keeps it in view: the window folds
THOUGHT = "Let me think about the parser carefully. " * 40


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


@tool
def dump(part: int) -> str:
    """Dump a large log."""
    return "\n".join(f"part {part} line {i}: value={i * part}" for i in range(400))


def _steps(n: int, tool_name: str = "fetch", arg: str = "page") -> list[AIMessage]:
    return [
        AIMessage(THOUGHT, tool_calls=[{"name": tool_name, "args": {arg: i}, "id": f"{tool_name}{i}"}])
        for i in range(n)
    ]


def _agent(tmp_path: Path, model: Any, *, tools: list | None = None, **kwargs: Any) -> Any:
    kwargs.setdefault("trace", tmp_path / "trace.sqlite")
    kwargs.setdefault("backend", ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True)))
    return create_agent(model, tools or [fetch], middleware=context_middleware(**kwargs), checkpointer=InMemorySaver())


def _events(tmp_path: Path, kind: str) -> list[dict]:
    return [e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind=kind)]


# --- the summarizer -----------------------------------------------------------------
class HangingSummarizer(ScriptedChatModel):
    """A summarizer whose provider never answers in time."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(HANG_S)
        raise AssertionError("a hung summarizer must have been given up")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(HANG_S)
        raise AssertionError("a hung summarizer must have been given up")


def _hanging_run(tmp_path: Path) -> tuple[Any, dict, ContextPolicy]:
    hung = HangingSummarizer(messages=iter([]), profile={"max_input_tokens": 100_000})
    policy = ContextPolicy(summarizer_timeout=0.2, summarizer_retries=1, clear_call_text=False)  # THOUGHT fills
    model = scripted_model([*_steps(14), AIMessage("done")], window=WINDOW)
    agent = _agent(tmp_path, model, summarizer=hung, policy=policy)
    return agent, {"messages": [HumanMessage("go")]}, policy


def _assert_fell_back_on_timeout(tmp_path: Path, out: dict, elapsed: float) -> None:
    assert out["messages"][-1].content == "done"
    folds = [e for e in _events(tmp_path, "context_compaction") if e["ok"]]
    assert folds
    assert all(f["fallback"] and f["summarizer"] == DETERMINISTIC for f in folds)
    assert "did not answer within 0.2 s" in folds[0]["error"]
    assert elapsed < HANG_S * len(folds)  # each fold gave the summarizer up, it did not wait it out


def test_a_summarizer_that_hangs_is_given_up_and_the_fold_goes_on(tmp_path: Path) -> None:
    agent, given, _policy = _hanging_run(tmp_path)
    started = time.perf_counter()
    out = agent.invoke(given, {"configurable": {"thread_id": "hang"}})
    _assert_fell_back_on_timeout(tmp_path, out, time.perf_counter() - started)


async def test_an_async_summarizer_that_hangs_is_cancelled(tmp_path: Path) -> None:
    agent, given, _policy = _hanging_run(tmp_path)
    started = time.perf_counter()
    out = await agent.ainvoke(given, {"configurable": {"thread_id": "hang"}})
    _assert_fell_back_on_timeout(tmp_path, out, time.perf_counter() - started)


class ClientTimeoutSummarizer(ScriptedChatModel):
    """A summarizer whose own client gives up at once, with a `TimeoutError` of its own."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise TimeoutError("read timed out")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        raise TimeoutError("read timed out")


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_summarizers_own_timeout_error_is_passed_on_alike_by_both_paths(timeout: float | None) -> None:
    """Only `summarizer_timeout` running out is the summarizer's timeout: not a provider's error that says timeout."""
    model = ClientTimeoutSummarizer(messages=iter([]))
    with pytest.raises(TimeoutError) as blocking:
        model_summary(model, "summarize", retries=0, timeout=timeout)
    with pytest.raises(TimeoutError) as awaited:
        await amodel_summary(model, "summarize", retries=0, timeout=timeout)
    assert type(blocking.value) is type(awaited.value) is TimeoutError
    assert str(blocking.value) == str(awaited.value) == "read timed out"


@pytest.mark.parametrize("bad", [0, -1, "60", True])
def test_a_bad_summarizer_timeout_names_the_fix(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"summarizer_timeout.*pass e\.g\. 120, or None"):
        ContextPolicy(summarizer_timeout=bad)


# --- the disk -----------------------------------------------------------------------
class FillingDisk(FilesystemBackend):
    """A filesystem backend on a disk that is full until `free()` is called."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full = True

    def upload_files(self, files: list[tuple[str, bytes]]) -> list:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), files[0][0])
        return super().upload_files(files)


def test_a_full_disk_keeps_every_result_in_the_message_and_the_run_goes_on(tmp_path: Path) -> None:
    disk = FillingDisk(root_dir=tmp_path, virtual_mode=True)
    model = scripted_model([*_steps(10, "dump", "part"), AIMessage("done")])
    # the window as a budget the provider does not hold to: calls past it are sent (past a window the model declares,
    # the forced round comes first, as after a refusal, and its fold goes on without its history file)
    budget = ContextPolicy(window=WINDOW)
    backend = ThreadIsolatedBackend(disk)
    agent = _agent(tmp_path, model, tools=[dump], backend=backend, summarizer=DETERMINISTIC, policy=budget)
    config = {"configurable": {"thread_id": "full"}}
    out = agent.invoke({"messages": [HumanMessage("go")]}, config)
    assert out["messages"][-1].content == "done"
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == [dump.invoke({"part": i}) for i in range(10)]  # nothing lost
    failed = [e for e in _events(tmp_path, "eviction") if not e["ok"]]
    assert len(failed) == 10
    assert all("No space left on device" in e["error"] for e in failed)
    assert not any(e["ok"] for e in _events(tmp_path, "context_compaction"))  # no fold without its history file
    assert not (tmp_path / "large_tool_results").exists()

    disk.full = False  # space was freed: the next large result is offloaded again
    agent = _agent(
        tmp_path,
        scripted_model([*_steps(1, "dump", "part"), AIMessage("again")], window=WINDOW),
        tools=[dump],
        backend=ThreadIsolatedBackend(disk),
        summarizer=DETERMINISTIC,
    )
    agent.invoke({"messages": [HumanMessage("once more")]}, {"configurable": {"thread_id": "freed"}})
    (written,) = (tmp_path / "large_tool_results" / "freed").glob("dump0-*")
    assert written.read_text(encoding="utf-8") == dump.invoke({"part": 0})


# --- the trace ----------------------------------------------------------------------
@pytest.fixture
def locked_trace(tmp_path: Path) -> Iterator[Path]:
    """A trace file another process holds an exclusive write lock on."""
    path = tmp_path / "trace.sqlite"
    TraceStore(path).verify()  # created and migrated
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    yield path
    holder.execute("ROLLBACK")
    holder.close()


def test_a_locked_trace_costs_the_events_not_the_run(tmp_path: Path, locked_trace: Path) -> None:
    recorder = TraceRecorder(TraceStore(locked_trace, busy_timeout_s=0.05, retries=0))
    model = scripted_model([*_steps(3), AIMessage("done")], window=WINDOW)
    out = _agent(tmp_path, model, trace=recorder).invoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "locked"}}
    )
    assert out["messages"][-1].content == "done"
    assert recorder.failures >= 7  # four model calls and three tool calls
    assert "locked" in (recorder.last_error or "")
    stamped = [m for m in out["messages"] if isinstance(m, AIMessage)]
    assert all(METADATA_KEY in m.response_metadata for m in stamped)  # the checkpointed record is complete


def test_after_the_lock_is_released_the_trace_resumes_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    store = TraceStore(path, busy_timeout_s=0.05, retries=0)
    recorder = TraceRecorder(store)
    holder = sqlite3.connect(str(path), isolation_level=None)
    store.verify()
    holder.execute("BEGIN EXCLUSIVE")
    _agent(tmp_path, scripted_model([*_steps(2), AIMessage("a")], window=WINDOW), trace=recorder).invoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}}
    )
    lost = recorder.failures
    holder.execute("ROLLBACK")
    holder.close()
    _agent(tmp_path, scripted_model([*_steps(2), AIMessage("b")], window=WINDOW), trace=recorder).invoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "u"}}
    )
    assert lost > 0
    assert recorder.failures == lost
    assert store.events(thread_id="t") == []  # no half-written batch
    assert len(store.events(thread_id="u", kind="model_usage")) == 3
    assert store.verify() == []


READ_ONLY_RUN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from langchain_core.messages import AIMessage
    from ctxwarden import TraceRecorder, create_context_agent
    from ctxwarden.replay import scripted_model

    state = Path(sys.argv[1])
    recorder = TraceRecorder(state / "trace.sqlite")
    calls = [AIMessage("", tool_calls=[{"name": "ls", "args": {"path": "/"}, "id": "c1"}]), AIMessage("done")]
    agent = create_context_agent(scripted_model(calls, window=32_000), state_dir=state, trace=recorder)
    out = agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "ro"}})
    last = out["messages"][-1].content
    print(json.dumps({"last": last, "failures": recorder.failures, "error": recorder.last_error}))
    """
)


def _unprivileged() -> list[str]:
    """A command prefix under which file permissions apply (root ignores them), or skip."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") and subprocess.run(["unshare", "--user", "true"], capture_output=True).returncode == 0:
        return ["unshare", "--user"]
    pytest.skip("running as root without user namespaces: a read-only file cannot be made here")


def test_a_read_only_trace_costs_the_events_not_the_run() -> None:
    prefix = _unprivileged()
    state = Path(tempfile.mkdtemp(prefix="ctxwarden-ro-"))
    try:
        TraceStore(state / "trace.sqlite").verify()
        for path in (state, *state.iterdir()):
            path.chmod(0o777 if path == state else 0o666)  # the run may write its checkpoints and files ...
        (state / "trace.sqlite").chmod(0o444)  # ... but not the trace
        probe = subprocess.run([*prefix, sys.executable, "-c", "import ctxwarden"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"the unprivileged user cannot import the package: {probe.stderr.decode()[-300:]}")
        run = subprocess.run(
            [*prefix, sys.executable, "-c", READ_ONLY_RUN, str(state)], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr[-2000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
        assert result["last"] == "done"
        assert result["failures"] >= 3
        assert "readonly" in result["error"].replace("-", "").replace(" ", "").lower()
        assert TraceStore(state / "trace.sqlite").events() == []
    finally:
        shutil.rmtree(state, ignore_errors=True)


# --- the provider -------------------------------------------------------------------
class RefusesOnce(ScriptedChatModel):
    """A provider that refuses the first call as too long (its real limit is below the advertised window), without
    naming the limit (a refusal that names one is shaped for it: `test_stated_window.py`)."""

    refused: int = 0

    async def _agenerate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if not self.refused:
            self.refused += 1
            raise ContextOverflowError("Your input exceeds the context window of this model.")
        return self._generate(messages, stop, None, **kwargs)


async def test_an_async_provider_overflow_is_retried_once_after_forced_clearing_and_folding(tmp_path: Path) -> None:
    model = RefusesOnce(messages=iter([AIMessage("done")]), profile={"max_input_tokens": 100_000})
    agent = _agent(tmp_path, model, summarizer=DETERMINISTIC)
    history = [HumanMessage("question " * 50), *[AIMessage(THOUGHT) for _ in range(2)], HumanMessage("and now?")]
    out = await agent.ainvoke({"messages": history}, {"configurable": {"thread_id": "refused"}})
    assert out["messages"][-1].content == "done"
    assert model.refused == 1
    overflow = _events(tmp_path, "context_overflow")
    assert [e["stage"] for e in overflow] == ["provider"]
    forced = [e for e in _events(tmp_path, "context_compaction") if e.get("forced")]
    assert forced
    assert forced[0]["ok"]
    assert not any(is_summary(m) for m in out["messages"])  # the fold is in the view only: state keeps every message
