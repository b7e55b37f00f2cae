"""The command line at its edges: closed pipes, unknown kinds, one spelling per option, damaged files, help and
version, and the demo in a real terminal (tmux), where the progress bar and the rich tables are drawn.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxwarden import __version__
from ctxwarden.cli import build_parser
from ctxwarden.demo import run_demo
from ctxwarden.trace.store import TraceEvent, TraceStore
from sessions import SMALL_SESSION


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "ctxwarden", *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def folded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir whose thread `f` evicted, cleared and folded: the shipped session at a 16k window."""
    state = tmp_path_factory.mktemp("cli") / "state"
    result = run_demo(window=16_000, state_dir=state, thread_id="f")
    assert result.folds
    assert result.clears
    assert result.evictions
    return state


def test_version() -> None:
    done = _run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"ctxwarden {__version__}"


def test_every_command_is_described_and_shows_its_defaults() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(commands) == {"demo", "context", "threads", "trace"}
    for name, sub in commands.items():
        assert sub.description, name
        assert "(default: .ctxwarden)" in " ".join(sub.format_help().split()), name
        options = {option for action in sub._actions for option in action.option_strings}
        assert "--state-dir" in options, name
        if name != "threads":
            assert "--thread" in options, name


def test_demo_takes_thread_like_the_others(tmp_path: Path) -> None:
    trajectory = tmp_path / "mine.json"
    trajectory.write_text(json.dumps(SMALL_SESSION), encoding="utf-8")
    done = _run("demo", "--trajectory", str(trajectory), "--thread", "mine", "--state-dir", "s", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Context · thread mine" in done.stdout
    assert "mini-swe-agent" not in done.stdout  # the credit line is for the shipped session only
    assert "ctxwarden demo --window 16000" in done.stdout  # no fold happened: try a smaller window
    assert "ctxwarden context --state-dir s --thread mine" in done.stdout
    assert "tokens counted with" in done.stdout


def test_kind_fold_names_the_compaction_events(folded: Path) -> None:
    done = _run("trace", "--state-dir", str(folded), "--thread", "f", "--kind", "fold", "--json")
    assert done.returncode == 0, done.stderr
    kinds = {json.loads(line)["kind"] for line in done.stdout.splitlines()}
    assert kinds == {"context_compaction"}
    both = _run("trace", "--state-dir", str(folded), "--thread", "f", "--kind", "clear", "--kind", "evict")
    assert {line.split()[2] for line in both.stdout.splitlines()} == {"context_clear", "eviction"}


def test_an_unknown_kind_is_an_error_listing_the_kinds(folded: Path) -> None:
    done = _run("trace", "--state-dir", str(folded), "--thread", "f", "--kind", "bogus")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "unknown event kind 'bogus'" in done.stderr
    for kind in ("model_usage", "tool_call", "context_compaction", "fold (= context_compaction)"):
        assert kind in done.stderr


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "trace.sqlite")
    store.append([TraceEvent("tool_call", {"name": "x", "blob": "y" * 200}, thread_id="t") for _ in range(3_000)])
    store.close()
    with subprocess.Popen(
        [sys.executable, "-m", "ctxwarden", "trace", "--state-dir", str(tmp_path), "--thread", "t"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert b"tool_call" in process.stdout.readline()
        process.stdout.close()  # like `| head -1`
        error = process.stderr.read().decode()
        assert process.wait(timeout=120) == 0
    assert "Traceback" not in error
    assert "BrokenPipeError" not in error


@pytest.mark.parametrize("damage", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 5_000])
def test_a_damaged_trace_is_reported_as_damaged(folded: Path, tmp_path: Path, damage: bytes) -> None:
    state = tmp_path / "state"
    shutil.copytree(folded, state)
    for suffix in ("-wal", "-shm"):
        (state / f"trace.sqlite{suffix}").unlink(missing_ok=True)
    (state / "trace.sqlite").write_bytes(damage)
    for command in ("trace", "context"):
        done = _run(command, "--state-dir", str(state), "--thread", "f")
        assert done.returncode == 2, (command, done.stdout)
        assert "is damaged" in done.stderr, command
        assert "Traceback" not in done.stderr


# --- a real terminal ----------------------------------------------------------------------------------------


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_demo_in_a_real_terminal_draws_the_progress_bar_and_the_tables(tmp_path: Path) -> None:
    session = f"ctxwarden-test-{os.getpid()}"
    raw = tmp_path / "terminal.out"
    python = Path(sys.executable)
    _tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "60", "-c", str(tmp_path), "bash --norc --noprofile")
    try:
        _tmux("pipe-pane", "-t", session, "-o", f"cat >> {raw}")
        command = f"{python} -m ctxwarden demo --window 16000 --state-dir s --thread t; echo DEMO-DONE-$?"
        _tmux("send-keys", "-t", session, command, "Enter")
        deadline = time.monotonic() + 240
        screen = ""
        while time.monotonic() < deadline:
            screen = _tmux("capture-pane", "-p", "-t", session, "-S", "-200")
            if "DEMO-DONE-" in screen.replace(command, ""):
                break
            time.sleep(0.5)
        context_command = f"{python} -m ctxwarden context --state-dir s --thread t; echo CONTEXT-DONE"
        _tmux("send-keys", "-t", session, "clear", "Enter")
        _tmux("send-keys", "-t", session, context_command, "Enter")
        report = ""
        while time.monotonic() < deadline:
            report = _tmux("capture-pane", "-p", "-t", session, "-S", "-200")
            if "CONTEXT-DONE" in report.replace(context_command, ""):
                break
            time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)
    stream = raw.read_bytes().decode("utf-8", "replace")
    assert "DEMO-DONE-0" in screen
    assert "replaying" in stream
    assert "model calls" in stream
    assert "━" in stream  # rich's bar
    assert "ctxwarden demo · window 16,000 tokens" in screen  # the rich table
    assert "evictions / clearing batches / folds" in screen
    assert "mini-swe-agent" in screen  # the shipped session is credited
    assert "category" in report
    assert "share" in report
    assert "Context · thread t" in report
