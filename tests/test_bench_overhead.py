"""The overhead benchmark reports every state, every stock middleware and the memory figures (no timing asserted)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxwarden.bench import footprint, fresh, overhead
from ctxwarden.bench.resumed import CTXWARDEN_CASES, STOCK_CASES, build, session
from ctxwarden.core.meter import TokenMeter


def test_every_case_is_reported_at_every_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, table = tmp_path / "overhead.json", tmp_path / "overhead.md"
    argv = ["--sizes", "8000,12000", "--steps", "2", "--no-memory", "--in-process", "--json", str(out)]
    argv += ["--markdown", str(table)]
    assert overhead.main(argv) == 0
    payload = json.loads(out.read_text(encoding="utf-8"))
    rows = payload["rows"]
    assert {(r["tokens"], r["case"]) for r in rows} == {
        (size, case) for size in (8000, 12000) for case in CTXWARDEN_CASES + STOCK_CASES
    }
    for row in rows:
        assert row["calls"] == 3  # two tool-calling steps and the final answer
        for figure in ("hook_first_ms", "hook_median_ms", "hook_p95_ms", "hook_cpu_median_ms", "step_median_ms"):
            assert row[figure] is not None, (row["case"], figure)
            assert row[figure] >= 0, (row["case"], figure)
    assert "cores" in payload["machine"]
    assert payload["date"]
    text = table.read_text(encoding="utf-8")
    assert "**8,000-token history**" in text
    assert "**12,000-token history**" in text
    assert all(label in text for label in overhead.CASE_LABELS.values())
    assert "hook median" in capsys.readouterr().out


@pytest.mark.parametrize("freeze", [True, False])
def test_a_case_is_resumed_in_a_fresh_process_from_its_checkpoint(tmp_path: Path, freeze: bool) -> None:
    """By default each case is seeded into a SQLite checkpoint here and resumed by another interpreter, which reports
    the collector's share of its first call."""
    out = tmp_path / "overhead.json"
    argv = ["--sizes", "8000", "--steps", "2", "--cases", "clearing", "--no-memory", "--json", str(out)]
    assert overhead.main(argv if freeze else [*argv, "--no-freeze"]) == 0
    (row,) = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert row["case"] == "clearing"
    assert row["calls"] == 3
    assert row["hook_first_gc_ms"] is not None
    assert row["hook_first_gc_ms"] >= 0
    assert "of it, collector" in overhead.markdown([row], None)


def test_a_resumed_process_loads_its_thread_from_the_checkpoint_another_process_wrote(tmp_path: Path) -> None:
    history = session(6_000, TokenMeter())
    path = fresh.seed("roomy", 6_000, history, tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from ctxwarden.bench.fresh import resume; from pathlib import Path; "
            f"print(resume('roomy', 6_000, 1, Path({str(tmp_path)!r}))['calls'])",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    assert done.stdout.strip().splitlines()[-1] == "2"
    with closing(sqlite3.connect(path, check_same_thread=False)) as connection:
        agent = build("roomy", 6_000, [], SqliteSaver(connection), tmp_path).agent
        messages = agent.get_state({"configurable": {"thread_id": "roomy-6000"}}).values["messages"]
    assert [m.id for m in messages[: len(history)]] == [m.id for m in history]
    assert messages[-1].content == "Done: the suite passes."  # the resumed run's answer, written by the other process


def test_an_unknown_case_is_refused_with_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        overhead.main(["--cases", "roomy,warp-speed", "--no-memory"])
    assert "warp-speed" in capsys.readouterr().err


def test_the_memory_figures_are_measured() -> None:
    grown = footprint.growth(outputs=3, size=300_000)
    assert grown["outputs"] == 3
    assert grown["after_last_mib"] > 0
    peak = footprint.peak(size=2_000_000)
    assert peak["evicted"] is True
    assert peak["peak_ratio"] >= 0
    assert "memory" in overhead.markdown([], {"growth": grown, "peak": peak}).lower()
