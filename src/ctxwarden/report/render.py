"""The /context report for people: plain text, a rich renderable, and HTML for Jupyter.

All three show the same facts in the same order — the usage by category against the
window, what the bar's glyphs mean, the thresholds, the forecast, what clearing cannot
reach, a warning when the fixed overhead takes most of the window, the counter, what the
layers did and the spend — from `ReportFigures.rows()`, `ctxwarden.report.forecast` and
the one gauge function. The HTML form draws the usage as one bar stacked by category,
with a legend, as Claude Code's /context does.
"""

from __future__ import annotations

import html
from typing import Any

from ctxwarden.core.extras import require
from ctxwarden.core.text import printable
from ctxwarden.report.figures import ReportFigures
from ctxwarden.report.forecast import GLYPHS, forecast, overhead_warning, reach_line, thresholds_line

BAR_WIDTH = 40
GAUGE_COLORS = {"ok": "green", "warn": "yellow", "critical": "red"}
HTML_COLORS = {"ok": "#2e7d32", "warn": "#b26a00", "critical": "#c62828"}
CATEGORY_COLORS = {
    "system prompt": "#546e7a",
    "tool schemas": "#8d6e63",
    "skills index": "#7e57c2",
    "memory index": "#ab47bc",
    "instruction files": "#5c6bc0",
    "summary": "#00897b",
    "user messages": "#1e88e5",
    "assistant messages": "#43a047",
    "tool results": "#fb8c00",
    "cleared placeholders": "#bdbdbd",
}
"""One color per category in the HTML bar and its legend (free and reserved are drawn empty and hatched)."""

_MARK = "position:absolute;top:-3px;height:calc(100% + 6px);"


def headline(report: ReportFigures) -> str:
    """`thread · model · window` in one line."""
    thread = printable(report.thread_id) if report.thread_id is not None else "-"
    model = printable(report.model)
    return f"thread {thread} · model {model} · window {report.window:,} tokens ({report.window_source})"


def usage_line(report: ReportFigures) -> str:
    measured = " · measured on the view compact() left" if report.basis == "current view" else ""
    return f"{report.used:,} / {report.window:,} tokens ({report.fraction:.1%}) · {report.gauge}{measured}"


def bar(report: ReportFigures, width: int = BAR_WIDTH) -> str:
    """Used part filled, the clear and fold thresholds marked `|` and `‖` (see `GLYPHS`)."""
    filled = min(width, round(report.fraction * width))
    cells = ["█"] * filled + ["░"] * (width - filled)
    for threshold, mark in ((report.clear_at, "|"), (report.fold_at, "‖")):
        position = min(width - 1, round(threshold / report.window * width))
        cells[position] = mark
    return "".join(cells)


def counter_line(report: ReportFigures) -> str:
    """Which counter the figures come from, and how to get the accurate one when it is the estimate."""
    if not report.counter or report.counter.startswith("tiktoken"):
        return f"tokens counted with {report.counter or 'the meter'}, calibrated against what the provider reports"
    return (
        f"tokens counted with the {report.counter} estimate (4 characters a token): figures can be off by a "
        "fifth or more. Fix: unset CTXWARDEN_TOKENIZER, or reinstall ctxwarden, which ships the offline tokenizer"
    )


def spend_line(report: ReportFigures) -> str:
    if not report.trace_found:
        return "spend: unknown (no trace found for this thread)"
    if not report.spend:
        return "spend: no trace for this thread"
    parts = []
    for role, values in report.spend.items():
        parts.append(
            f"{role} {values.get('calls', 0):,} calls, {values.get('input_tokens', 0):,} in "
            f"({values.get('cached_input_tokens', 0):,} cached), {values.get('output_tokens', 0):,} out"
        )
    return "spend: " + " · ".join(parts)


def lifecycle_line(report: ReportFigures) -> str:
    """What the layers did, from the trace."""
    if not report.trace_found:
        return "lifecycle: unknown (no trace found: evictions, clearing and folds are not known here)"
    done = report.lifecycle
    evicted = done.get("eviction", {})
    rendered = done.get("tool_render", {})
    cleared = done.get("context_clear", {})
    folded = done.get("context_compaction", {})
    shown = (
        f"{rendered['count']} rendered as a terminal shows them ({rendered.get('freed', 0):,} tokens saved) · "
        if rendered.get("count")
        else ""
    )
    return (
        f"lifecycle: {shown}{evicted.get('count', 0)} evicted ({evicted.get('tokens', 0):,} tokens to files) · "
        f"{cleared.get('count', 0)} clearing batches ({cleared.get('freed', 0):,} tokens freed) · "
        f"{folded.get('count', 0)} fold{'' if folded.get('count', 0) == 1 else 's'}"
    )


def gauge_notes_line(report: ReportFigures) -> str:
    """Which calls carried a gauge note to the model (the notes themselves are in `report.gauge_notes`)."""
    told = ", ".join(f"call {n['call']} at {float(n['fraction'] or 0):.0%} ({n['gauge']})" for n in report.gauge_notes)
    return f"gauge notes the model received: {told}"


def notes(report: ReportFigures) -> list[str]:
    """The lines under the table: thresholds, forecast, reach, warning, gauge notes, counter, lifecycle, spend."""
    lines = [thresholds_line(report), *forecast(report)]
    reach = reach_line(report)
    if reach is not None:
        lines.append(reach)
    warning = overhead_warning(report)
    if warning is not None:
        lines.append(warning)
    if report.gauge_notes:
        lines.append(gauge_notes_line(report))
    lines.extend([counter_line(report), lifecycle_line(report), spend_line(report)])
    return lines


def report_text(report: ReportFigures) -> str:
    lines = [f"Context · {headline(report)}", f"[{bar(report)}] {usage_line(report)}", f"  {GLYPHS}", ""]
    width = max(len(name) for name, _ in report.rows())
    for name, tokens in report.rows():
        lines.append(f"  {name:<{width}}  {tokens:>9,}  {tokens / report.window:>6.1%}")
    lines.append("")
    lines.extend(f"  {line}" for line in notes(report))
    return "\n".join(lines)


def report_rich(report: ReportFigures) -> Any:
    Group = require("rich.console", "the rich /context report").Group
    Table = require("rich.table", "the rich /context report").Table
    Text = require("rich.text", "the rich /context report").Text

    color = GAUGE_COLORS[report.gauge]
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    table.add_column("category")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    for name, tokens in report.rows():
        style = "dim" if name in {"free", "reserved"} or tokens == 0 else ""
        table.add_row(name, f"{tokens:,}", f"{tokens / report.window:.1%}", style=style)
    lines, warning = notes(report), overhead_warning(report)
    styled = [Text(line, style="bold red" if line == warning else "italic") for line in lines[:-2]]
    parts: list[Any] = [
        Text(f"Context · {headline(report)}", style="bold"),
        Text.assemble(("[", ""), (bar(report), color), ("] ", ""), (usage_line(report), color)),
        Text(GLYPHS, style="dim"),
        table,
        *styled,
        Text(lines[-2], style="dim"),
        Text(lines[-1], style="dim"),
    ]
    return Group(*parts)


def _segments(report: ReportFigures) -> str:
    """The usage bar: one colored segment per category, in the table's order, widths as shares of the window."""
    total = max(report.window, report.used)
    cells = []
    for name, tokens in report.categories.items():
        if tokens <= 0:
            continue
        title = html.escape(f"{name}: {tokens:,} tokens ({tokens / report.window:.1%})")
        cells.append(
            f"<div title='{title}' style='width:{tokens / total * 100:.3f}%;background:{CATEGORY_COLORS[name]}'></div>"
        )
    return "".join(cells)


def _legend(report: ReportFigures) -> str:
    items = []
    for name, tokens in report.rows():
        swatch = CATEGORY_COLORS.get(name)
        style = (
            f"background:{swatch}"
            if swatch
            else "background:repeating-linear-gradient(45deg,#fff,#fff 2px,#ccc 2px,#ccc 4px);border:1px solid #999"
        )
        dim = "color:#999;" if tokens == 0 else ""
        items.append(
            f"<span style='{dim}white-space:nowrap;margin-right:12px'>"
            f"<span style='display:inline-block;width:10px;height:10px;margin-right:4px;{style}'></span>"
            f"{html.escape(name)} {tokens:,} ({tokens / report.window:.1%})</span>"
        )
    return "<div class='ctxwarden-legend' style='font-size:12px;line-height:1.8'>" + "".join(items) + "</div>"


def report_html(report: ReportFigures) -> str:
    color = HTML_COLORS[report.gauge]
    total = max(report.window, report.used)
    clear_pct = report.clear_at / total * 100
    fold_pct = report.fold_at / total * 100
    window_pct = report.window / total * 100
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(name)}</td><td style='text-align:right'>{tokens:,}</td>"
        f"<td style='text-align:right'>{tokens / report.window:.1%}</td></tr>"
        for name, tokens in report.rows()
    )
    items, warning = [], overhead_warning(report)
    for line in notes(report):
        style = " style='color:#c62828;font-weight:bold'" if line == warning else ""
        items.append(f"<li{style}>{html.escape(line)}</li>")
    overflow = (
        f"<div title='window' style='{_MARK}left:{window_pct:.2f}%;border-left:2px solid #c62828'></div>"
        if report.used > report.window
        else ""
    )
    return (
        "<div class='ctxwarden-report' style='font-family:sans-serif;max-width:46em'>"
        f"<div><b>Context</b> · {html.escape(headline(report))}</div>"
        "<div class='ctxwarden-bar' style='position:relative;display:flex;height:18px;margin:8px 0;"
        "background:repeating-linear-gradient(45deg,#fafafa,#fafafa 3px,#e8e8e8 3px,#e8e8e8 6px);"
        "border:1px solid #bbb'>"
        f"{_segments(report)}"
        f"<div title='clear at {report.clear_at:,}' style='{_MARK}left:{clear_pct:.2f}%;border-left:2px dashed #333'>"
        "</div>"
        f"<div title='fold at {report.fold_at:,}' style='{_MARK}left:{fold_pct:.2f}%;border-left:4px double #000'>"
        f"</div>{overflow}"
        "</div>"
        f"<div style='color:{color};font-weight:bold'>{html.escape(usage_line(report))}</div>"
        f"{_legend(report)}"
        "<div style='font-size:12px;color:#555'>bar: one segment per category; hatched: free and reserved; "
        "dashed line: the clear threshold; double line: the fold threshold</div>"
        "<table style='margin-top:6px'><thead><tr><th style='text-align:left'>category</th><th>tokens</th>"
        f"<th>share</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<ul>{''.join(items)}</ul>"
        "</div>"
    )


__all__ = [
    "CATEGORY_COLORS",
    "bar",
    "counter_line",
    "gauge_notes_line",
    "headline",
    "lifecycle_line",
    "notes",
    "report_html",
    "report_rich",
    "report_text",
    "spend_line",
]
