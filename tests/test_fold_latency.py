"""The fold-latency benchmark runs end to end and reports each fold of each strategy (its figures are not tested)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwarden.bench import fold_latency
from ctxwarden.demo import default_trajectory


def test_the_benchmark_reports_every_fold_of_each_strategy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "latency.json"
    args = [str(default_trajectory()), "--window", "16000", "--model-seconds", "0", "--summarizer-seconds", "0"]
    assert fold_latency.main([*args, "--strategies", "ctxwarden", "deepagents", "--json", str(out)]) == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    runs = {run["strategy"]: run for run in figures["runs"]}
    assert set(runs) == {"ctxwarden", "deepagents"}
    for run in runs.values():
        assert run["error"] is None
        assert run["calls"] == 81
        assert len(run["fold_ms"]) > 0
    # every ctxwarden fold is traced with how long it waited for its prepared summary
    assert len(runs["ctxwarden"]["waited_ms"]) == len(runs["ctxwarden"]["fold_ms"])
    assert runs["deepagents"]["waited_ms"] is None
    # and whether its facts section was drafted ahead (whether a draft is ready depends on the pacing: not tested)
    assert len(runs["ctxwarden"]["drafted"]) == len(runs["ctxwarden"]["fold_ms"])
    assert figures["summary"]["ctxwarden"]["drafted"] == sum(runs["ctxwarden"]["drafted"])
    assert runs["deepagents"]["drafted"] is None
    assert runs["deepagents"]["summarizer_calls"] == len(runs["deepagents"]["fold_ms"])
    summary = figures["summary"]["ctxwarden"]
    assert summary["folds"] == len(runs["ctxwarden"]["fold_ms"])
    assert 0 <= summary["within_target"] <= 1
    assert "| ctxwarden | 1 | 81 |" in capsys.readouterr().out
