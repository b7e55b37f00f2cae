"""The usage plot: built from the thread's stamps, saved as a PNG."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxwarden import create_context_agent
from ctxwarden.core.stamp import METADATA_KEY, STOCK_EVICTION_PREFIX
from ctxwarden.replay import scripted_model
from ctxwarden.report.plot import call_series, usage_plot


def _reply(tokens: int, model: str, window: int, events: tuple[str, ...] = ()) -> AIMessage:
    stamp = {"model": model, "window": window, "input_tokens": tokens, "events": list(events)}
    return AIMessage("", response_metadata={METADATA_KEY: stamp})


def test_series_marks_switches_evictions_clears_and_folds() -> None:
    messages = [
        HumanMessage("go"),
        _reply(1_000, "big", 200_000),
        ToolMessage(STOCK_EVICTION_PREFIX + " x was saved ...", tool_call_id="c1"),
        _reply(5_000, "big", 200_000, ("context_clear",)),
        _reply(6_000, "small", 8_000, ("context_clear", "context_compaction")),
    ]
    rows = call_series(messages)
    assert [r["input_tokens"] for r in rows] == [1_000, 5_000, 6_000]
    assert [r["window"] for r in rows] == [200_000, 200_000, 8_000]
    assert [r["switch"] for r in rows] == [False, False, True]
    assert [r["evictions"] for r in rows] == [0, 1, 0]
    assert [(r["clear"], r["fold"]) for r in rows] == [(False, False), (True, False), (True, True)]


def test_writes_a_png_of_a_real_thread(state_dir: Path, tmp_path: Path) -> None:
    agent = create_context_agent(scripted_model(["a", "b", "c"], window=8_000), state_dir=state_dir)
    config = {"configurable": {"thread_id": "plot"}}
    for text in ("one", "two", "three"):
        agent.invoke({"messages": [("user", text)]}, config)
    path = tmp_path / "usage.png"
    figure = usage_plot(agent, config, path=path)
    peak = max(r["input_tokens"] for r in call_series(agent.get_state(config).values["messages"]))
    agent.checkpointer.conn.close()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (axes,) = figure.axes
    assert axes.get_title() == f"3 model calls · peak {peak:,} tokens"
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert labels[:4] == ["input tokens per call", "window", "fold at 85%", "clear at 60%"]


def test_nothing_to_plot_says_so() -> None:
    with pytest.raises(ValueError, match="nothing to plot"):
        usage_plot([HumanMessage("hi")])
    with pytest.raises(TypeError, match="needs config"):
        usage_plot("some-dir")
