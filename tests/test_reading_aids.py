"""What a person or the model reads stays exact: the built-in summary names an evicted result's original size and its
call's arguments, recall pages end on line boundaries, and the usage plot counts calls in whole numbers.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from ctxwarden.clip.recall import page
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold.summarize import deterministic_summary
from ctxwarden.report import usage_plot


def test_the_summary_names_an_evicted_results_original_size_and_its_arguments() -> None:
    call = AIMessage("", tool_calls=[{"name": "fetch_logs", "args": {"service": "api", "day": 3}, "id": "c1"}])
    preview = "GET /health 200\n[ctxwarden: evicted fetch_logs output of 71,000 tokens ...]"
    result = ToolMessage(
        preview,
        tool_call_id="c1",
        name="fetch_logs",
        response_metadata={METADATA_KEY: {"evicted": True, "chars": 286_210}},
    )
    summary = deterministic_summary(None, [call, result])
    assert "last call: fetch_logs(service='api', day=3) -> 286,210 chars, evicted" in summary
    assert f"{len(preview):,} chars" not in summary


LOG = "".join(f"line {i:03d} handled ok status=200 path=/api/v1/items/{i}\n" for i in range(200))


def _pages(text: str, limit: int) -> list[str]:
    pages, number = [], 0
    while True:
        number += 1
        shown = page(text, number, limit)
        body, sep, note = shown.rpartition("\n[ctxwarden: characters ")
        pages.append(body if sep else shown)
        if not sep or "for the rest" not in note:
            return pages


@pytest.mark.parametrize("limit", [100, 1_000, 1_337])
def test_recall_pages_end_on_line_boundaries_and_add_up_to_the_original(limit: int) -> None:
    pages = _pages(LOG, limit)
    assert "".join(pages) == LOG
    assert len(pages) > 1
    for body in pages:
        assert len(body) <= limit
        assert body.endswith("\n")
        assert body.startswith("line ")  # page 2 never starts mid-line ("dled ok status=200 ...")


def test_a_line_longer_than_a_page_is_split_with_a_marker() -> None:
    text = "short\n" + "x" * 250 + "\nlast\n"
    first, second = page(text, 1, 100), page(text, 2, 100)
    # the page is not left six characters long before the long line: it holds the line's start
    assert first.startswith("short\n" + "x" * 94 + "\n[ctxwarden: characters 0-100 of")
    assert "ends inside a line longer than a page" in first
    assert second.startswith("x" * 100 + "\n[ctxwarden: characters 100-200 of")
    assert "".join(_pages(text, 100)) == text
    lines = "h" * 49 + "\n" + "y" * 250 + "\n"
    assert page(lines, 1, 100).startswith(lines[:50] + "\n[ctxwarden: characters 0-50 ")  # half full: whole lines


@pytest.mark.parametrize("calls", [2, 3])
def test_the_usage_plot_counts_calls_in_whole_numbers(calls: int) -> None:
    stamp = {"model": "m", "window": 32_000, "input_tokens": 1_000, "events": []}
    messages = [AIMessage(f"reply {i}", response_metadata={METADATA_KEY: stamp}) for i in range(calls)]
    axes = usage_plot(messages).axes[0]
    low, high = axes.get_xlim()
    ticks = [tick for tick in axes.get_xticks() if low <= tick <= high]
    assert ticks
    assert all(float(tick).is_integer() for tick in ticks)
