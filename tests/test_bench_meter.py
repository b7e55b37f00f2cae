"""The meter benchmark runs and prints its table (figures, not a timed assertion)."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages.utils import count_tokens_approximately

from ctxwarden.bench import meter as bench


def test_synthetic_histories_have_the_asked_size() -> None:
    history = bench.synthetic_history(1_000_000, 2_000)
    assert len(history) == 2_000
    assert count_tokens_approximately(history) == pytest.approx(1_000_000, rel=0.02)


def test_prints_one_row_per_size_and_the_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "SIZES", [(20_000, 200), (1_000_000, 2_000)])
    assert bench.main(["--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "count_tokens_approximately" in out
    rows = [line for line in out.splitlines() if re.match(r"^\s*[\d,]+\s+[\d,]+ \|.*\d+x$", line)]
    assert len(rows) == 2
    assert "target: appended call >= 20x cheaper than recounting at 1M tokens" in out
