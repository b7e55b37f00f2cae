"""The /context report tells what will happen and why, in every form: a forecast that follows the policy, what
clearing cannot reach, a warning when the fixed overhead fills the window, the glyphs explained, the counter used,
an HTML bar stacked by category with a legend, and a usage plot that shows itself in a notebook with exact ticks.
"""

from __future__ import annotations

import re

import pytest
from IPython.core.formatters import DisplayFormatter
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxwarden import ApproximateCounter, ContextPolicy, TokenMeter, usage_plot
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.report import ContextReport, build_report
from ctxwarden.report.forecast import GLYPHS
from ctxwarden.report.plot import tokens_label
from ctxwarden.report.render import CATEGORY_COLORS


def _report(used: int, clearable: int, *, window: int = 32_000) -> ContextReport:
    policy = ContextPolicy()
    return ContextReport(
        thread_id="t",
        model="m",
        window=window,
        window_source="profile",
        used=used,
        categories={"tool results": used},
        clear_at=policy.clear_threshold(window),
        clear_to=int(window * policy.clear_to),
        fold_at=policy.fold_threshold(window),
        clearable=clearable,
        calls=3,
        last_input_tokens=used,
        added_since=0,
    )


def test_clearing_too_small_a_batch_is_said_to_wait_not_to_be_due() -> None:
    waits = _report(20_000, 900)  # past 60% of 32k, but a batch would free 900 < 3,200 (10% of the window)
    assert waits.forecast()[0].startswith("clearing waits: a batch now would free only about 900 tokens, under 3,200")
    due = _report(20_000, 5_000)
    assert due.forecast()[0] == "clearing is due: the next call clears about 5,000 tokens, towards 9,600"
    assert waits.to_dict()["min_clear_batch"] == 3_200


def test_a_fold_is_forecast_only_when_clearing_cannot_avoid_it() -> None:
    avoided = _report(28_000, 20_000)
    assert avoided.forecast()[0].startswith("clearing is due")  # past the fold threshold even a small batch runs
    assert avoided.forecast()[1] == "clearing gets the next call under the fold threshold, so no fold yet"
    folds = _report(28_000, 200)
    assert folds.forecast()[1].startswith("a fold is due on the next call")


def _stamp(window: int, system: int, tools: int, total: int) -> dict:
    return {
        "model": "m",
        "window": window,
        "window_source": "profile",
        "input_tokens": total,
        "system_tokens": system,
        "tool_schema_tokens": tools,
        "message_tokens": total - system - tools,
        "calibration": 1.0,
        "events": [],
    }


def _calls(window: int = 32_000, *, system: int = 100, tools: int = 2_000) -> list:
    big_args = {"command": "cat <<'EOF' > patch.py\n" + "x = compute(value)\n" * 120 + "EOF"}
    messages: list = [HumanMessage("fix it")]
    for i in range(5):
        messages.append(
            AIMessage(
                f"step {i}",
                tool_calls=[{"name": "bash", "args": big_args, "id": f"c{i}"}],
                response_metadata={METADATA_KEY: _stamp(window, system, tools, 9_000)},
            )
        )
        messages.append(ToolMessage("ok\n" * 50, tool_call_id=f"c{i}", name="bash"))
    return messages


def test_the_report_names_what_clearing_cannot_reach() -> None:
    meter = TokenMeter(ApproximateCounter())
    report = build_report(_calls(), thread_id="t", meter=meter)
    reach = report.out_of_reach
    assert reach["system prompt, tool schemas and admitted sections"] == sum(
        report.categories[name] for name in ("system prompt", "tool schemas")
    )
    assert reach["user messages"] == report.categories["user messages"]
    # the older calls' large arguments can be clipped; the newest call's cannot
    assert 0 < reach["assistant text, and the arguments clearing keeps"] < report.categories["assistant messages"]
    assert reach["the newest step's tool results"] > 0
    line = next(line for line in report.to_text().splitlines() if "clearing cannot reach" in line)
    total = sum(reach.values())
    assert f"clearing cannot reach {total:,} tokens" in line
    pinned = build_report(_calls(), meter=meter, policy=ContextPolicy(clear_exclude_tools=("bash",)))
    assert pinned.out_of_reach["pinned tools' results"] == pinned.categories["tool results"]


def test_a_fixed_overhead_larger_than_the_window_is_warned_about_everywhere() -> None:
    report = build_report(_calls(window=2_000, system=500, tools=2_500), meter=TokenMeter(ApproximateCounter()))
    assert report.warning is not None
    assert re.search(r"alone take \d{3}% of the window", report.warning)
    assert "every call is over the window" in report.warning
    assert report.warning in report.to_text()
    assert report.to_dict()["warning"] == report.warning
    assert "every call is over the window" in report._repr_html_()
    assert build_report(_calls(), meter=TokenMeter(ApproximateCounter())).warning is None


def test_glyphs_and_counter_are_explained() -> None:
    exact = build_report(_calls(), meter=TokenMeter())
    assert GLYPHS in exact.to_text()
    assert f"tokens counted with {exact.counter}" in exact.to_text()
    rough = build_report(_calls(), meter=TokenMeter(ApproximateCounter()))
    assert rough.counter == "approximate"
    assert "estimate (4 characters a token)" in rough.to_text()
    assert "Fix:" in rough.to_text()
    assert rough.to_dict()["counter"] == "approximate"


def test_html_has_a_bar_stacked_by_category_with_a_legend_and_the_same_facts() -> None:
    report = build_report(_calls(), thread_id="t", meter=TokenMeter(ApproximateCounter()))
    page = report._repr_html_()
    for name, tokens in report.categories.items():
        if tokens:
            assert f"background:{CATEGORY_COLORS[name]}'" in page  # a segment of the bar
            assert f"{name} {tokens:,} ({tokens / report.window:.1%})" in page  # its legend entry
    assert "(60%, down to 9,600)" in page
    for line in report.forecast():
        assert line.replace("'", "&#x27;") in page
    formatted, _metadata = DisplayFormatter().format(report)
    assert formatted["text/html"] == page  # Jupyter renders it


def _thread_for_plot(window: int) -> list:
    messages: list = [HumanMessage("go")]
    for i, tokens in enumerate([2_500, 7_500, 12_500, 9_000, 15_000, 5_000]):
        events = ["context_clear"] if i in (2, 4) else []
        stamp = {"model": "m", "window": window, "input_tokens": tokens, "events": events}
        messages.append(AIMessage("", response_metadata={METADATA_KEY: stamp}))
        if i == 3:
            evicted = {"evicted": True, "path": "/large_tool_results/t/c"}
            messages.append(ToolMessage("x", tool_call_id="c", response_metadata={METADATA_KEY: evicted}))
    return messages


def test_tick_labels_are_exact() -> None:
    assert [tokens_label(v) for v in (0, 500, 2_500, 12_500, 17_500, 200_000, 1_500_000)] == [
        "0",
        "500",
        "2.5k",
        "12.5k",
        "17.5k",
        "200k",
        "1.5M",
    ]
    figure = usage_plot(_thread_for_plot(16_000))
    (axes,) = figure.axes
    formatter = axes.yaxis.get_major_formatter()
    for tick in axes.get_yticks():
        label = formatter(tick, 0)
        number = float(label.rstrip("kM")) * {"k": 1_000, "M": 1_000_000}.get(label[-1], 1)
        assert number == pytest.approx(tick), label


def test_markers_do_not_hide_each_other_and_the_plot_shows_in_a_notebook() -> None:
    messages = _thread_for_plot(16_000)
    figure = usage_plot(messages)
    (axes,) = figure.axes
    points = {c.get_label().split(" ")[0]: c.get_offsets() for c in axes.collections}
    clears = {tuple(p) for p in points["clear"]}
    evictions = {tuple(p) for p in points["eviction"]}
    assert not clears & evictions
    formatted, _metadata = DisplayFormatter().format(figure)
    assert formatted["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
