"""The overhead benchmark reports every state, every stock middleware and the memory figures (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwarden.bench import footprint, overhead
from ctxwarden.bench.resumed import CTXWARDEN_CASES, STOCK_CASES


def test_every_case_is_reported_at_every_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, table = tmp_path / "overhead.json", tmp_path / "overhead.md"
    argv = ["--sizes", "8000,12000", "--steps", "2", "--no-memory", "--json", str(out), "--markdown", str(table)]
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
