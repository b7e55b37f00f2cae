"""`ctxwarden context` and `ctxwarden trace`, run as a person runs them; bad input exits 2 with a message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.replay import scripted_model


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("cli") / "state"
    replies = [AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}]), AIMessage("3")]
    agent = create_context_agent(scripted_model(replies, window=8_000, name="fake"), [add], state_dir=state)
    agent.invoke({"messages": [("user", "1+2")]}, {"configurable": {"thread_id": "cli-thread"}})
    agent.checkpointer.conn.close()
    return state


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxwarden", *args], capture_output=True, text=True, timeout=120)


def test_context_prints_the_report(state_dir: Path) -> None:
    done = _run("context", "--state-dir", str(state_dir), "--thread", "cli-thread")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Context · thread cli-thread · model fake · window 8,000 tokens (profile)")
    assert "tool results" in done.stdout
    assert "spend: main 2 calls" in done.stdout


def test_context_json(state_dir: Path) -> None:
    done = _run("context", "--state-dir", str(state_dir), "--thread", "cli-thread", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["window"] == 8_000
    assert figures["gauge"] in {"ok", "warn", "critical"}
    assert sum(figures["categories"].values()) == 8_000


def test_trace_lists_events_and_filters_by_kind(state_dir: Path) -> None:
    done = _run("trace", "--state-dir", str(state_dir), "--thread", "cli-thread")
    assert done.returncode == 0, done.stderr
    kinds = [line.split()[2] for line in done.stdout.splitlines()]
    assert kinds == ["model_usage", "tool_call", "model_usage"]
    only = _run("trace", "--state-dir", str(state_dir), "--thread", "cli-thread", "--kind", "tool_call", "--json")
    rows = [json.loads(line) for line in only.stdout.splitlines()]
    assert [r["kind"] for r in rows] == ["tool_call"]
    assert rows[0]["payload"]["name"] == "add"


@pytest.mark.parametrize("command", ["context", "trace"])
def test_unknown_thread_exits_2_with_the_known_ones(state_dir: Path, command: str) -> None:
    done = _run(command, "--state-dir", str(state_dir), "--thread", "missing")
    assert done.returncode == 2
    assert "'missing'" in done.stderr
    assert "Known threads: cli-thread" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["context", "trace"])
def test_missing_state_dir_exits_2(tmp_path: Path, command: str) -> None:
    done = _run(command, "--state-dir", str(tmp_path / "nowhere"), "--thread", "t")
    assert done.returncode == 2
    assert "Fix: pass the --state-dir the agent ran with" in done.stderr
    assert not (tmp_path / "nowhere").exists()


HOSTILE = "victim\x1b]0;PWNED\x07\x1b[2J\r\nfake-thread  fake  1  1  1  ok (1%)\u202eevil"
"""A thread id a client chose: it retitles the window, clears the screen, adds a row, reverses the text after it."""


def test_a_thread_id_reaches_the_terminal_as_escapes_never_as_codes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    agent = create_context_agent(
        scripted_model([AIMessage("hi")], window=8_000, name="fake\x1b[31m"), [], state_dir=state
    )
    agent.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": HOSTILE}})
    agent.checkpointer.conn.close()
    done = [
        _run("threads", "--state-dir", str(state)),
        _run("context", "--state-dir", str(state), "--thread", HOSTILE),
        _run("trace", "--state-dir", str(state), "--thread", HOSTILE),
        _run("trace", "--state-dir", str(state), "--thread", "unknown"),  # lists the known threads
    ]
    for result in done:
        for text in (result.stdout, result.stderr):
            assert not any(code in text for code in ("\x1b", "\x07", "\r", "\u202e")), text
    assert done[0].returncode == 0
    assert done[0].stdout.count("\n") == 2  # the header and one row: no fake row
    assert "victim\\x1b]0;PWNED\\x07\\x1b[2J\\r\\nfake-thread" in done[0].stdout
    assert "\\u202eevil" in done[1].stdout


def test_the_rich_report_prints_no_code_a_thread_id_holds(tmp_path: Path) -> None:
    from io import StringIO

    from rich.console import Console

    from ctxwarden import context_report

    state = tmp_path / "state"
    agent = create_context_agent(scripted_model([AIMessage("hi")], window=8_000), [], state_dir=state)
    config = {"configurable": {"thread_id": HOSTILE}}
    agent.invoke({"messages": [("user", "hello")]}, config)
    out = StringIO()
    Console(file=out, force_terminal=True, width=200).print(context_report(agent, config))
    agent.checkpointer.conn.close()
    assert "\x1b]0;" not in out.getvalue()
    assert "\x1b[2J" not in out.getvalue()
    assert "\u202e" not in out.getvalue()
