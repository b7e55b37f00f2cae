"""A custom subagent of `create_context_agent` runs with the ctxwarden stack, under its own namespace, traced.

deepagents fills a declarative subagent's summarization slot with its own middleware
unless the spec says otherwise; that middleware's history offload was refused by the
isolating backend, losing the summarized messages. Here a custom `worker` evicts, clears
and folds: its events are in the trace under its namespace and its history file is whole.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ctxwarden import (
    DETERMINISTIC,
    ContextPolicy,
    ThreadIsolatedBackend,
    context_middleware,
    create_context_agent,
    managed_subagents,
)
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.thread.checkpoints import open_checkpointer
from ctxwarden.trace import TraceStore

WORKER_WINDOW = 8_000
THOUGHT = "Checking the next page of the report before moving on. " * 20  # kept in view by POLICY
POLICY = ContextPolicy(clear_call_text=False)  # clearing leaves THOUGHT, so the worker's window fills and folds
LOG = "\n".join(f"build line {i}: compiled module_{i}" for i in range(1_500))


@tool
def fetch(page: int) -> str:
    """Fetch a page of the report."""
    return f"page {page}: " + "figures " * 160


@tool
def build(target: str) -> str:
    """Run the build and return its log."""
    return LOG


def _worker_script() -> list[AIMessage]:
    steps = [AIMessage(THOUGHT, tool_calls=[{"name": "build", "args": {"target": "all"}, "id": "w-build"}])]
    steps += [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"w-fetch-{i}"}]) for i in range(16)
    ]
    return [*steps, AIMessage("worker finished: report read")]


def _main_script() -> list[AIMessage]:
    call = {"name": "task", "args": {"description": "read the report", "subagent_type": "worker"}, "id": "t1"}
    return [AIMessage("", tool_calls=[call]), AIMessage("the worker is done")]


def _worker_spec() -> dict[str, Any]:
    return {
        "name": "worker",
        "description": "Reads reports page by page.",
        "system_prompt": "You read reports.",
        "model": scripted_model(_worker_script(), window=WORKER_WINDOW, name="worker-model"),
        "tools": [build, fetch],
    }


def _check(state_dir: Path, thread: str, messages: list, *, logged: list[str]) -> None:
    assert messages[-1].content == "the worker is done"
    events = TraceStore(state_dir / "trace.sqlite").events(thread_id=thread)
    worker = [e for e in events if e.namespace]
    assert worker, "the subagent's calls must be traced"
    namespaces = {e.namespace for e in worker}
    assert len(namespaces) == 1
    kinds = Counter(e.kind for e in worker)
    assert kinds["model_usage"] >= len(_worker_script())
    assert kinds["eviction"] >= 1
    assert kinds["context_clear"] >= 1
    folds = [e for e in worker if e.kind == "context_compaction" and e.payload["ok"]]
    assert folds
    (path,) = {e.payload["path"] for e in folds}
    assert path.startswith(f"/conversation_history/{thread}/")  # the subagent's own history file
    history = (state_dir / path.lstrip("/")).read_text(encoding="utf-8")
    assert "w-fetch-0" in history  # the folded turns are whole in it
    assert "page 0: figures" in history
    (evicted,) = [e for e in worker if e.kind == "eviction"]
    assert evicted.payload["ok"]
    assert (state_dir / evicted.payload["path"].lstrip("/")).read_text(encoding="utf-8") == LOG
    assert not any("Failed to offload" in line or "not be recoverable" in line for line in logged)
    assert not list((state_dir / "conversation_history").glob("session_*.md"))  # deepagents' own never ran


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level("WARNING")
    return caplog.messages


def test_a_custom_subagent_evicts_clears_and_folds_under_its_namespace(state_dir: Path, logged: list[str]) -> None:
    agent = create_context_agent(
        scripted_model(_main_script(), window=200_000),
        [],
        state_dir=state_dir,
        summarizer=DETERMINISTIC,
        policy=POLICY,
        subagents=[_worker_spec()],
    )
    config = {"configurable": {"thread_id": "boss"}}
    out = agent.invoke({"messages": [("user", "have the worker read the report")]}, config)
    agent.checkpointer.conn.close()
    _check(state_dir, "boss", out["messages"], logged=logged)


def test_with_create_deep_agent_managed_subagents_does_the_same(state_dir: Path, logged: list[str]) -> None:
    """The documented way for callers who build their own deep agent."""
    state_dir.mkdir(parents=True)
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=state_dir, virtual_mode=True))
    stack = context_middleware(
        backend=backend, trace=state_dir / "trace.sqlite", summarizer=DETERMINISTIC, policy=POLICY
    )
    agent = create_deep_agent(
        scripted_model(_main_script(), window=200_000),
        [],
        backend=backend,
        middleware=stack,
        subagents=managed_subagents([_worker_spec()], stack[0]),
        checkpointer=open_checkpointer(state_dir / "checkpoints.sqlite"),
    )
    config = {"configurable": {"thread_id": "boss"}}
    out = agent.invoke({"messages": [("user", "have the worker read the report")]}, config)
    agent.checkpointer.conn.close()
    assert any(isinstance(m, ToolMessage) and m.name == "task" for m in out["messages"])
    _check(state_dir, "boss", out["messages"], logged=logged)


class SummarizingWorker(ScriptedChatModel):
    """The worker's model, which also answers deepagents' summarization prompt (with a fixed summary)."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if "Messages to summarize" in str(messages[-1].content):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("the worker read some pages"))])
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_deepagents_own_history_offload_is_not_refused_when_a_subagent_is_left_unmanaged(
    state_dir: Path, logged: list[str]
) -> None:
    """Without `managed_subagents`, deepagents' own summarization runs in the worker: its history file is written."""
    state_dir.mkdir(parents=True)
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=state_dir, virtual_mode=True))
    stack = context_middleware(backend=backend, trace=state_dir / "trace.sqlite", summarizer=DETERMINISTIC)
    spec = _worker_spec()
    reads = [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"w-fetch-{i}"}]) for i in range(40)
    ]
    spec["model"] = SummarizingWorker(
        messages=iter([*reads, AIMessage("worker finished")]), profile={"max_input_tokens": 16_000}, name="worker-model"
    )
    agent = create_deep_agent(
        scripted_model(_main_script(), window=200_000),
        [],
        backend=backend,
        middleware=stack,
        subagents=[spec],
        checkpointer=open_checkpointer(state_dir / "checkpoints.sqlite"),
    )
    agent.invoke({"messages": [("user", "have the worker read the report")]}, {"configurable": {"thread_id": "boss"}})
    agent.checkpointer.conn.close()
    offloaded = list((state_dir / "conversation_history").glob("session_*.md"))
    assert offloaded, "deepagents' summarization must have run for this test to prove anything"
    assert "page 0: figures" in offloaded[0].read_text(encoding="utf-8")
    assert not any("Failed to offload" in line or "not be recoverable" in line for line in logged)
    # another thread can neither list nor search it (it could open it only by its random name)
    other = ThreadIsolatedBackend(FilesystemBackend(root_dir=state_dir, virtual_mode=True), current_thread=lambda: "x")
    assert offloaded[0].name not in str(other.ls("/conversation_history").entries)
    assert not other.grep("page 0: figures", "/").matches
    assert not other.glob("**/*.md").matches
