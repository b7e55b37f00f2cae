"""The side-by-side benchmark: every strategy on the same recorded session, figures from what the model received."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from ctxwarden.bench import run as bench
from ctxwarden.bench.cost_parts import CostParts, fixed_entries
from ctxwarden.bench.harness import replay
from ctxwarden.bench.metrics import figures
from ctxwarden.bench.overhead import time_per_call
from ctxwarden.bench.prices import PRICE_MODELS
from ctxwarden.core.meter import TokenMeter
from ctxwarden.replay import Recording, load_recording

REQUIRED = {
    "strategy",
    "window",
    "trajectories",
    "recall",
    "long_range_recall",
    "references",
    "task_recall",
    "task_references",
    "probe_recall",
    "probes",
    "calls",
    "overflows",
    "input_tokens",
    "cache_cost",
    "peak_fraction",
    "folds",
    "summarizer_input_tokens",
    "visible_share",
    "overhead_ms_median",
    "overhead_ms_p95",
    "recoverability",
    "errors",
}


def _session(tmp_path: Path, steps: int = 14) -> Path:
    messages: list[dict] = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix the bug."}]
    for i in range(steps):
        command = f"python -m pytest tests/test_{i}.py -k helper_{i - 1}_check && " + "echo x; " * 60
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}: running the tests again.",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
            }
        )
        output = (
            "\n".join(f"tests/test_{i}.py::case_{n} PASSED" for n in range(120))
            + f"\nFAILED tests/test_{i}.py::helper_{i}_check"
            + f"\n==== 1 failed, 119 passed in {i}.1s ===="
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
    messages.append({"role": "assistant", "content": "Fixed."})
    path = tmp_path / "session.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_one_run_writes_the_table_the_json_and_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _session(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    out_json, out_md, out_png = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "p.png"
    code = bench.main(
        [
            str(session),
            str(broken),
            "--windows",
            "8000",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
            "--plot",
            str(out_png),
            "--no-overhead",
        ]
    )
    assert code == 0
    results = {r["strategy"]: r for r in json.loads(out_json.read_text())["results"]}
    assert set(results) == {
        "none",
        "context-editing",
        "anthropic-clearing",
        "anthropic-compaction",
        "openhands-masking",
        "openhands-summarizing",
        "codex",
        "deepagents",
        "ctxwarden",
        "ctxwarden-cost-first",
    }
    for result in results.values():
        assert result.keys() >= REQUIRED
        assert result["errors"] == []
        assert result["calls"] == 15
    assert results["none"]["overflows"] > 0  # unmanaged, the session does not fit 8k
    for preset in ("ctxwarden", "ctxwarden-cost-first"):
        assert results[preset]["overflows"] == 0
        assert results[preset]["recoverability"] == 1.0, (preset, results[preset])
    assert results["none"]["visible_share"] == 1.0  # nothing is ever taken out of view
    assert results["ctxwarden"]["input_tokens"] < results["none"]["input_tokens"]
    assert "| ctxwarden | 8,000 |" in out_md.read_text()
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "p-recall.png").read_bytes()[:4] == b"\x89PNG"  # recall against cost, per window
    printed = capsys.readouterr()
    assert "| strategy | window |" in printed.out
    assert "| strategy | window | reference recall |" in printed.out
    for result in results.values():
        assert 0.0 <= result["recall"] <= 1.0
        assert result["references"] > 0  # the session's actions reuse details its outputs showed
        for price, parts in result["cost_parts"].items():  # the parts are the cost, split
            assert abs(sum(parts.values()) - result["costs"][price]) <= len(parts), (result["strategy"], price)
    unmanaged = results["none"]["cost_parts"]["base"]
    assert unmanaged["reread"] == 0  # append-only: every prefix stays cached
    assert unmanaged["summarizer"] == 0
    assert results["deepagents"]["cost_parts"]["base"]["summarizer"] > 0  # its folds send a transcript
    assert "| ctxwarden | 8,000 | " in printed.out.split("Where the cost goes")[1]


def test_cost_parts_split_a_call_by_what_the_call_before_sent() -> None:
    parts = CostParts()
    # the first call: the fixed prompt and the task are read at the full price, nothing is cached
    assert parts.add_call([], ["tools", "system", "task"], [100, 50, 20], fixed=2) == 0
    assert (parts.fixed_uncached, parts.new, parts.reread) == (150, 20, 0)
    # the next: a result earlier in the view was replaced, so the message after it is read again
    previous = ["tools", "system", "task", "result", "answer"]
    keys = ["tools", "system", "task", "placeholder", "answer", "arrived"]
    assert parts.add_call(previous, keys, [100, 50, 20, 5, 30, 40], fixed=2) == 170
    assert (parts.fixed_cached, parts.history_cached, parts.new, parts.reread) == (150, 20, 20 + 5 + 40, 30)
    # an arrival that repeats a message read again (the same command, the same words) is new, not read again
    repeat = CostParts()
    repeat.add_call(
        ["tools", "task", "result", "ran ls"], ["tools", "task", "placeholder", "ran ls", "ran ls"], [1] * 5, 1
    )
    assert (repeat.reread, repeat.new) == (1, 2)
    parts.add_summarizer(1_000, 900)
    base = parts.priced(PRICE_MODELS[0])
    assert base == {"fixed": 150 + 15.0, "history": 2.0, "new": 65.0, "reread": 30.0, "summarizer": 90 + 100.0}
    assert fixed_entries([SystemMessage("a"), SystemMessage("b"), HumanMessage("c")]) == 3
    assert fixed_entries([HumanMessage("c")]) == 1


def test_unreadable_files_are_skipped_and_nothing_readable_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("[1]", encoding="utf-8")
    assert bench.main([str(broken), "--windows", "8000", "--no-overhead"]) == 2


def test_cache_cost_counts_the_shared_prefix_at_a_tenth(tmp_path: Path) -> None:
    recording = load_recording(_session(tmp_path, steps=3))
    run = replay(recording, "none", 200_000, tmp_path)
    result = figures(run, TokenMeter())
    assert result.calls == 4
    # with nothing managed every call extends the previous one, so only the new messages pay full price
    assert result.cache_cost_calls < 0.5 * result.input_tokens
    assert result.cache_cost == result.cache_cost_calls  # no summarizer ran
    assert result.overflows == 0


def test_overhead_microbenchmark_times_every_strategy() -> None:
    timings = time_per_call(20_000, messages=200, calls=3)
    assert set(timings) == {"ctxwarden", "deepagents summarization", "langchain context editing"}
    assert all(ms > 0 for ms in timings.values())


def test_a_replay_sends_the_same_bytes_every_time(shipped_recording: Recording, tmp_path: Path) -> None:
    """The bench's figures are reproducible: an evicted result's path, which the model reads, is keyed by the id of
    the reply that called the tool, so the replayed replies get stable ids."""
    runs = [replay(shipped_recording, "ctxwarden", 32_000, tmp_path) for _ in range(2)]
    views = [[[m.model_dump_json(exclude={"id"}) for m in call.messages] for call in run.calls] for run in runs]
    assert any("/large_tool_results/" in text for call in views[0] for text in call)  # an eviction was shown
    assert views[0] == views[1]
