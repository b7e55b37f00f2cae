"""One way in: `context_middleware()` with no argument evicts where the agent's own file tools read, records the
trace, and `context_report(agent, config)` finds that trace by itself — the backend and trace are given once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import (
    ThreadIsolatedBackend,
    UnknownThreadError,
    context_middleware,
    context_report,
    create_context_agent,
)
from ctxwarden.clip.names import call_key, result_path
from ctxwarden.replay import scripted_model
from ctxwarden.stack.discover import AgentBackend, backend_of, files_backend, trace_of
from ctxwarden.trace.store import TraceStore

LINES = 3_000
CONFIG = {"configurable": {"thread_id": "t"}}


@tool
def build_log(target: str) -> str:
    """Build a target and return its full log."""
    return "\n".join(f"step {i}: compiled {target}/module_{i}.py" for i in range(LINES))


BUILD_MESSAGE = "build-message"
EVICTED = result_path("t", "", "c1", call_key(BUILD_MESSAGE, 0))
"""Where the build log goes: the file name carries the key of the call that made it."""


def _call(name: str, args: dict[str, Any], call_id: str, message_id: str | None = None) -> AIMessage:
    return AIMessage("", id=message_id, tool_calls=[{"name": name, "args": args, "id": call_id}])


def _read_back_script() -> list[AIMessage | str]:
    """Build (the result is evicted), then read a line from the middle of the evicted file with `read_file`."""
    path = EVICTED
    return [
        _call("build_log", {"target": "app"}, "c1", BUILD_MESSAGE),
        _call("read_file", {"file_path": path, "offset": 1500, "limit": 2}, "c2"),
        "done",
    ]


def _tool_result(messages: list[Any], call_id: str) -> str:
    return next(str(m.content) for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id)


def test_readme_one_liner_evicts_where_read_file_reads_and_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    agent = create_deep_agent(
        scripted_model(_read_back_script(), window=200_000),
        [build_log],
        middleware=context_middleware(),
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "build the app")]}, CONFIG)
    messages = agent.get_state(CONFIG).values["messages"]
    assert "[ctxwarden: evicted build_log output" in _tool_result(messages, "c1")
    assert "step 1500: compiled app/module_1500.py" in _tool_result(messages, "c2")  # deepagents' read_file found it
    report = context_report(agent, CONFIG)  # no trace= argument: the agent's own trace is found
    assert report.lifecycle["eviction"]["count"] == 1
    assert report.spend["main"]["calls"] == 3
    assert (tmp_path / ".ctxwarden" / "trace.sqlite").is_file()


def test_a_backend_given_to_deepagents_is_the_one_ctxwarden_uses(tmp_path: Path) -> None:
    files = FilesystemBackend(root_dir=tmp_path / "files", virtual_mode=True)
    agent = create_deep_agent(
        scripted_model(_read_back_script(), window=200_000),
        [build_log],
        backend=files,
        middleware=context_middleware(state_dir=tmp_path / "state"),
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "build the app")]}, CONFIG)
    messages = agent.get_state(CONFIG).values["messages"]
    evicted = tmp_path / "files" / EVICTED.lstrip("/")
    assert evicted.read_text(encoding="utf-8").count("\n") == LINES - 1
    assert "step 1500: compiled app/module_1500.py" in _tool_result(messages, "c2")
    assert backend_of(agent) is files
    assert not (tmp_path / "state" / "large_tool_results").exists()


def test_an_agent_without_file_tools_evicts_under_the_state_dir(tmp_path: Path) -> None:
    build = _call("build_log", {"target": "lib"}, "c1", BUILD_MESSAGE)
    script = [build, _call("recall", {"call_id": "c1", "page": 1}, "c2"), "ok"]
    agent = create_agent(
        scripted_model(script, window=200_000),
        [build_log],
        middleware=context_middleware(state_dir=tmp_path / "state"),
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "build")]}, CONFIG)
    messages = agent.get_state(CONFIG).values["messages"]
    assert (tmp_path / "state" / EVICTED.lstrip("/")).is_file()
    assert "step 10: compiled lib/module_10.py" in _tool_result(messages, "c2")
    assert context_report(agent, CONFIG).lifecycle["eviction"]["count"] == 1


def test_discovery_finds_what_create_context_agent_was_built_with(tmp_path: Path) -> None:
    agent = create_context_agent(scripted_model(["hi"], window=8_000), state_dir=tmp_path)
    store = trace_of(agent)
    assert isinstance(store, TraceStore)
    assert store.path == tmp_path / "trace.sqlite"
    backend = backend_of(agent)
    assert isinstance(backend, ThreadIsolatedBackend)
    assert Path(backend.inner.cwd) == tmp_path.resolve()
    agent.checkpointer.conn.close()


def test_files_backend_finds_deepagents_backend_from_its_tools(tmp_path: Path) -> None:
    """Pins the deepagents detail the discovery relies on: its file tools lead to their middleware's backend."""
    files = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    agent = create_deep_agent(scripted_model(["hi"], window=8_000), backend=files, middleware=context_middleware())
    tools = list(agent.nodes["tools"].bound.tools_by_name.values())
    assert files_backend(tools) is files
    assert files_backend([build_log]) is None


def test_agent_backend_without_deepagents_is_a_folder_under_the_state_dir(tmp_path: Path) -> None:
    backend = AgentBackend(tmp_path)
    backend.upload_files([("/notes/a.txt", b"kept")])
    assert (tmp_path / "notes" / "a.txt").read_bytes() == b"kept"
    assert backend.download_files(["/notes/a.txt"])[0].content == b"kept"


def test_report_on_an_agent_without_a_checkpointer_says_how_to_keep_one(tmp_path: Path) -> None:
    agent = create_deep_agent(scripted_model(["hi"], window=8_000), middleware=context_middleware(state_dir=tmp_path))
    agent.invoke({"messages": [("user", "hello")]}, CONFIG)
    with pytest.raises(UnknownThreadError, match=r"no checkpointer.*Fix: build it with a checkpointer"):
        context_report(agent, CONFIG)
