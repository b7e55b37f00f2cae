"""Tool output is rendered as a terminal shows it on every path a result arrives by.

deepagents' own `execute` on a shell backend, a subagent's tool, and a streamed run: each
progress-bar output enters the view collapsed to its final frame, and its raw bytes come
back exactly with `recall(part="raw")`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import LocalShellBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.clip.recall import lookup_result
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

FRAMES = "".join(f"\r\x1b[32mdownloading {i:3d}%\x1b[0m" for i in range(0, 101)) + "\ndone\n"
SHOWN = "downloading 100%\ndone"


@tool
def download(url: str) -> str:
    """Download a file, printing a progress bar."""
    return FRAMES


def _rendered(messages: list[Any]) -> list[ToolMessage]:
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    return [m for m in tools if (m.response_metadata.get(METADATA_KEY) or {}).get("raw_path")]


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_deepagents_execute_on_a_shell_backend_is_rendered_and_its_raw_bytes_kept(tmp_path: Path) -> None:
    """deepagents' shell backend reads output as text (a bare carriage return becomes a line end), so what is left to
    render of a coloured test log is its escape codes: they leave the view, and the raw keeps them."""
    command = "i=0; while [ $i -lt 200 ]; do printf '\\033[32mPASSED\\033[0m tests/test_%s.py\\n' $i; i=$((i+1)); done"
    call = AIMessage("", tool_calls=[{"name": "execute", "args": {"command": command}, "id": "x1"}])
    (tmp_path / "work").mkdir()
    backend = LocalShellBackend(root_dir=tmp_path / "work", virtual_mode=True, inherit_env=True)
    agent = create_context_agent(
        scripted_model([call, "built"], window=200_000), state_dir=tmp_path / "state", backend=backend
    )
    out = agent.invoke({"messages": [("user", "test")]}, {"configurable": {"thread_id": "shell"}})
    (message,) = _rendered(out["messages"])
    text = str(message.content)
    assert "PASSED tests/test_199.py" in text
    assert "\x1b" not in text
    raw, why = lookup_result(out["messages"], "x1", agent.ctxwarden_parts.backend, raw=True)
    assert why is None
    assert raw is not None
    assert "\x1b[32mPASSED\x1b[0m tests/test_0.py" in raw


def _worker(tmp_path: Path) -> dict[str, Any]:
    call = AIMessage("", tool_calls=[{"name": "download", "args": {"url": "u"}, "id": "w1"}])
    return {
        "name": "worker",
        "description": "Downloads files.",
        "system_prompt": "You download files.",
        "model": scripted_model([call, "downloaded"], window=200_000, name="worker-model"),
        "tools": [download],
    }


def test_a_subagents_tool_output_is_rendered_and_traced_under_its_namespace(tmp_path: Path) -> None:
    task = {"name": "task", "args": {"description": "download u", "subagent_type": "worker"}, "id": "t1"}
    model = scripted_model([AIMessage("", tool_calls=[task]), "done"], window=200_000)
    agent = create_context_agent(model, [download], state_dir=tmp_path, subagents=[_worker(tmp_path)])
    agent.invoke({"messages": [("user", "get u")]}, {"configurable": {"thread_id": "sub"}})
    renders = [e for e in TraceStore(tmp_path / "trace.sqlite").events(thread_id="sub") if e.kind == "tool_render"]
    assert len(renders) == 1
    assert renders[0].namespace  # the subagent's, not the main agent's
    assert renders[0].payload["freed"] > 0
    raw = tmp_path / renders[0].payload["raw_path"].lstrip("/")
    assert raw.read_bytes() == FRAMES.encode("utf-8")


async def test_a_streamed_run_renders_and_streams_no_frame(tmp_path: Path) -> None:
    call = AIMessage("", tool_calls=[{"name": "download", "args": {"url": "u"}, "id": "s1"}])
    agent = create_context_agent(scripted_model([call, "done"], window=200_000), [download], state_dir=tmp_path)
    config = {"configurable": {"thread_id": "stream"}}
    parts = agent.astream({"messages": [("user", "get u")]}, config, stream_mode="messages")
    streamed = [m async for m, _meta in parts]
    tool_messages = [m for m in streamed if isinstance(m, ToolMessage)]
    assert tool_messages
    assert all("downloading 50%" not in str(m.content) for m in tool_messages)
    assert any(SHOWN in str(m.content) for m in tool_messages)
    (message,) = _rendered((await agent.aget_state(config)).values["messages"])
    raw, _why = lookup_result([message], "s1", agent.ctxwarden_parts.backend, raw=True)
    assert raw == FRAMES


@tool
def status(name: str) -> str:
    """Print a short coloured status."""
    return "\x1b[32mok\x1b[0m all good"


def test_an_output_whose_note_would_cost_more_than_its_codes_enters_as_it_is(tmp_path: Path) -> None:
    """Rendering pays for its note: a few colour codes are cheaper to keep than the note that would replace them."""
    call = AIMessage("", tool_calls=[{"name": "status", "args": {"name": "x"}, "id": "c1"}])
    agent = create_context_agent(scripted_model([call, "fine"], window=200_000), [status], state_dir=tmp_path)
    out = agent.invoke({"messages": [("user", "status")]}, {"configurable": {"thread_id": "small"}})
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.content == "\x1b[32mok\x1b[0m all good"  # the original, whole, in view
    assert not _rendered(out["messages"])
    assert not [e for e in TraceStore(tmp_path / "trace.sqlite").events(thread_id="small") if e.kind == "tool_render"]
