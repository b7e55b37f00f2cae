"""The demo, run the way a person runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REQUIRED_KEYS = {
    "thread_id",
    "state_dir",
    "window",
    "calls",
    "input_tokens_total",
    "peak_fraction",
    "overflows",
    "evictions",
    "clears",
    "folds",
}


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "ctxwarden", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_json_on_the_embedded_defaults(tmp_path: Path) -> None:
    done = _run("demo", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result.keys() >= REQUIRED_KEYS
    assert result["window"] == 32_000
    assert result["state_dir"] == ".ctxwarden"
    assert (tmp_path / ".ctxwarden" / "checkpoints.sqlite").is_file()
    per_call = result["per_call_input_tokens"]
    assert result["calls"] == len(per_call) == 81
    assert result["input_tokens_total"] == sum(per_call)
    assert result["peak_fraction"] == pytest.approx(max(per_call) / 32_000, abs=1e-4)
    assert result["overflows"] == sum(1 for t in per_call if t > 32_000)
    # clearing keeps every call of this session under the window, and nothing is lost on the way
    assert result["overflows"] == 0
    assert result["clears"] >= 1
    assert result["recoverable_fraction"] == 1.0
    # the 110k-character log output is evicted to a file at arrival
    assert result["evictions"] >= 1
    assert (tmp_path / ".ctxwarden" / "large_tool_results").is_dir()
    # the usage plot and the /context report of the replayed thread
    assert (tmp_path / ".ctxwarden" / "usage.png").read_bytes()[:4] == b"\x89PNG"
    context = result["context"]
    assert context["thread_id"] == result["thread_id"]
    assert context["window"] == 32_000
    assert context["spend"]["main"]["calls"] == 81


def test_demo_at_16k_folds_and_never_overflows(tmp_path: Path) -> None:
    done = _run("demo", "--json", "--window", "16000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["overflows"] == 0
    assert max(result["per_call_input_tokens"]) <= 16_000
    assert result["folds"] >= 1
    assert result["fallback_folds"] == 0
    assert result["recoverable_fraction"] == 1.0
    assert result["context"]["categories"]["summary"] > 0
    assert (tmp_path / ".ctxwarden" / "conversation_history" / f"{result['thread_id']}.md").is_file()


def test_demo_table_and_options(tmp_path: Path) -> None:
    done = _run("demo", "--window", "128000", "--state-dir", "state", "--thread-id", "mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "window 128,000 tokens" in done.stdout
    assert "model calls" in done.stdout
    assert "mini-swe-agent" in done.stdout  # the recording is credited
    assert "mine" in done.stdout
    assert "Context · thread mine" in done.stdout  # the /context report follows the table
    assert (tmp_path / "state" / "checkpoints.sqlite").is_file()


def test_demo_rejects_a_bad_window(tmp_path: Path) -> None:
    done = _run("demo", "--window", "-5", cwd=tmp_path)
    assert done.returncode == 2
    assert "'-5' must be a positive number of tokens" in done.stderr


def test_demo_reports_a_bad_trajectory_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    done = _run("demo", "--trajectory", str(bad), cwd=tmp_path)
    assert done.returncode == 1
    assert "bad.json: message 0 is not an object (found int)" in done.stderr
