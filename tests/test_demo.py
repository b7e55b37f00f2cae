"""The demo, run the way a person runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import os
import re
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


def test_every_demo_run_is_the_same_run(tmp_path: Path) -> None:
    """The README quotes the demo's figures, so they cannot depend on random thread or message ids: both are part
    of the paths of evicted results that the model reads and that are counted."""
    runs = []
    for _ in range(2):
        done = _run("demo", "--json", "--window", "16000", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
    first, second = runs
    assert (first["thread_id"], second["thread_id"]) == (
        "demo-sqlfluff__sqlfluff-1733-1",
        "demo-sqlfluff__sqlfluff-1733-2",
    )
    assert first["per_call_input_tokens"] == second["per_call_input_tokens"]
    assert (first["evictions"], first["clears"], first["folds"]) == (
        second["evictions"],
        second["clears"],
        second["folds"],
    )
    results = tmp_path / ".ctxwarden" / "large_tool_results"
    files = [sorted(p.name for p in (results / run["thread_id"]).iterdir()) for run in runs]
    assert files[0]
    assert files[0] == files[1]
    again = _run("demo", "--json", "--thread", first["thread_id"], cwd=tmp_path)
    assert again.returncode == 1
    assert "already holds a conversation" in again.stderr
    assert "Fix: pass a new --thread" in again.stderr


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


WORDS = {"no": 0, "one": 1, "once": 1, "two": 2, "twice": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def _number(word: str) -> int:
    return WORDS[word] if word in WORDS else int(word)


def test_the_readme_figures_are_what_the_readme_command_prints(tmp_path: Path) -> None:
    """The README quotes the demo; the demo run here counts with the base install's tokenizer, like the README's."""
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    at_32k = re.search(
        r"What the command above prints: (\d+) model calls, none over the window; (\w+) log is evicted to a file at "
        r"arrival, (\w+) clearing batches and (\w+) folds? keep the peak at (\d+)% of the window, while (\d+)% of "
        r"the original output stays reachable",
        readme,
    )
    at_16k = re.search(
        r"At `--window 16000` the session folds (\w+)(?: times)?, with (\w+) evictions and (\w+) clearing batches, "
        r"and still no call exceeds the window",
        readme,
    )
    assert at_32k is not None
    assert at_16k is not None
    default = json.loads(_run("demo", "--json", "--state-dir", "a", cwd=tmp_path).stdout)
    assert default["counter"].startswith("tiktoken")  # the offline tokenizer comes with the base install
    calls, evicted, clears, folds_32k, peak, reachable = at_32k.groups()
    assert default["calls"] == int(calls)
    assert default["overflows"] == 0
    assert default["evictions"] == _number(evicted)
    assert default["clears"] == _number(clears)
    assert default["folds"] == _number(folds_32k)
    assert round(default["peak_fraction"] * 100) == int(peak)
    assert round(default["recoverable_fraction"] * 100) == int(reachable)
    small = json.loads(_run("demo", "--json", "--window", "16000", "--state-dir", "b", cwd=tmp_path).stdout)
    folds, evictions, batches = at_16k.groups()
    assert small["folds"] == _number(folds)
    assert small["evictions"] == _number(evictions)
    assert small["clears"] == _number(batches)
    assert small["overflows"] == 0
