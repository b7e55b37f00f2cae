"""A window that cannot hold the system prompt and the tool schemas is refused at the first call, naming both sizes.

No layer can make room there: before, such a run went on to the end with every call at
thousands of percent of the window.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, WindowTooSmallError, create_context_agent
from ctxwarden.replay import scripted_model


@tool
def build(target: str) -> str:
    """Build a target and return its log."""
    return f"built {target}"


@pytest.mark.parametrize("window", [1, 100])
def test_a_window_smaller_than_the_fixed_prompt_is_refused_at_the_first_call(tmp_path: Path, window: int) -> None:
    model = scripted_model(["never sent"], window=200_000)
    agent = create_context_agent(model, [build], state_dir=tmp_path, policy=ContextPolicy(window=window))
    with pytest.raises(WindowTooSmallError) as raised:
        agent.invoke({"messages": [("user", "build it")]}, {"configurable": {"thread_id": "tiny"}})
    error = raised.value
    assert error.window == window
    assert error.fixed > window
    assert f"{window:,} tokens" in str(error)
    assert f"{error.fixed:,}" in str(error)
    assert "ContextPolicy(window=" in str(error)


async def test_the_async_path_refuses_it_too(tmp_path: Path) -> None:
    model = scripted_model(["never sent"], window=200_000)
    agent = create_context_agent(model, [build], state_dir=tmp_path, policy=ContextPolicy(window=50))
    with pytest.raises(WindowTooSmallError):
        await agent.ainvoke({"messages": [("user", "build it")]}, {"configurable": {"thread_id": "tiny"}})


def test_a_window_that_holds_the_fixed_prompt_runs(tmp_path: Path) -> None:
    model = scripted_model(["done"], window=200_000)
    agent = create_context_agent(model, [build], state_dir=tmp_path, policy=ContextPolicy(window=20_000))
    reply = agent.invoke({"messages": [("user", "build it")]}, {"configurable": {"thread_id": "roomy"}})
    assert reply["messages"][-1].content == "done"


def test_the_demo_refuses_a_tiny_window_at_the_start_and_names_the_flag(tmp_path: Path) -> None:
    trajectory = tmp_path / "mine.json"
    session = [{"role": "user", "content": "list files"}, {"role": "assistant", "content": "Two files."}]
    trajectory.write_text(json.dumps(session), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "ctxwarden", "demo", "--trajectory", str(trajectory), "--window", "100"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "--window 100 cannot hold" in done.stderr
    assert "Fix: pass --window" in done.stderr
    assert "Traceback" not in done.stderr
