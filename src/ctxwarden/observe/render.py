"""The /context report for people: plain text, a rich renderable, and HTML for Jupyter.

All three show the same figures in the same order, from `ContextReport.rows()`,
`forecast()` and the one gauge function.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxwarden.observe.report import ContextReport

BAR_WIDTH = 40
GAUGE_COLORS = {"ok": "green", "warn": "yellow", "critical": "red"}
HTML_COLORS = {"ok": "#2e7d32", "warn": "#b26a00", "critical": "#c62828"}
_MARK = "position:absolute;top:0;height:100%;"


def headline(report: ContextReport) -> str:
    """`thread · model · window` in one line."""
    thread = report.thread_id if report.thread_id is not None else "-"
    return f"thread {thread} · model {report.model} · window {report.window:,} tokens ({report.window_source})"


def usage_line(report: ContextReport) -> str:
    measured = " · measured on the view compact() left" if report.basis == "current view" else ""
    return f"{report.used:,} / {report.window:,} tokens ({report.fraction:.1%}) · {report.gauge}{measured}"


def bar(report: ContextReport, width: int = BAR_WIDTH) -> str:
    """Used part filled, the clear and fold thresholds marked `|` and `‖`."""
    filled = min(width, round(report.fraction * width))
    cells = ["█"] * filled + ["░"] * (width - filled)
    for threshold, mark in ((report.clear_at, "|"), (report.fold_at, "‖")):
        position = min(width - 1, round(threshold / report.window * width))
        cells[position] = mark
    return "".join(cells)


def spend_line(report: ContextReport) -> str:
    if not report.trace_found:
        return "spend: unknown (no trace found: pass trace=... to see it)"
    if not report.spend:
        return "spend: no trace for this thread"
    parts = []
    for role, values in report.spend.items():
        parts.append(
            f"{role} {values.get('calls', 0):,} calls, {values.get('input_tokens', 0):,} in "
            f"({values.get('cached_input_tokens', 0):,} cached), {values.get('output_tokens', 0):,} out"
        )
    return "spend: " + " · ".join(parts)


def lifecycle_line(report: ContextReport) -> str:
    """What the layers did, from the trace."""
    if not report.trace_found:
        return "lifecycle: unknown (no trace found: evictions, clearing and folds are not known here)"
    done = report.lifecycle
    evicted = done.get("eviction", {})
    cleared = done.get("context_clear", {})
    folded = done.get("context_compaction", {})
    return (
        f"lifecycle: {evicted.get('count', 0)} evicted ({evicted.get('tokens', 0):,} tokens to files) · "
        f"{cleared.get('count', 0)} clearing batches ({cleared.get('freed', 0):,} tokens freed) · "
        f"{folded.get('count', 0)} folds"
    )


def report_text(report: ContextReport) -> str:
    lines = [f"Context · {headline(report)}", f"[{bar(report)}] {usage_line(report)}", ""]
    width = max(len(name) for name, _ in report.rows())
    for name, tokens in report.rows():
        lines.append(f"  {name:<{width}}  {tokens:>9,}  {tokens / report.window:>6.1%}")
    lines.append("")
    lines.append(
        f"  clear at {report.clear_at:,} ({report.policy.clear_at:.0%}, down to {report.clear_to:,}) · "
        f"fold at {report.fold_at:,} ({report.policy.summarize_at:.0%})"
    )
    lines.extend(f"  {line}" for line in report.forecast())
    lines.append(f"  {lifecycle_line(report)}")
    lines.append(f"  {spend_line(report)}")
    return "\n".join(lines)


def report_rich(report: ContextReport) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    color = GAUGE_COLORS[report.gauge]
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    table.add_column("category")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    for name, tokens in report.rows():
        style = "dim" if name in {"free", "reserved"} or tokens == 0 else ""
        table.add_row(name, f"{tokens:,}", f"{tokens / report.window:.1%}", style=style)
    parts: list[Any] = [
        Text(f"Context · {headline(report)}", style="bold"),
        Text.assemble(("[", ""), (bar(report), color), ("] ", ""), (usage_line(report), color)),
        table,
        Text(
            f"clear at {report.clear_at:,} · fold at {report.fold_at:,}\n" + "\n".join(report.forecast()),
            style="italic",
        ),
        Text(lifecycle_line(report), style="dim"),
        Text(spend_line(report), style="dim"),
    ]
    return Group(*parts)


def report_html(report: ContextReport) -> str:
    color = HTML_COLORS[report.gauge]
    used_pct = min(100.0, report.fraction * 100)
    clear_pct = report.clear_at / report.window * 100
    fold_pct = report.fold_at / report.window * 100
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>{tokens:,}</td>"
        f"<td style='text-align:right'>{tokens / report.window:.1%}</td></tr>"
        for name, tokens in report.rows()
    )
    forecast = "".join(f"<li>{html.escape(line)}</li>" for line in report.forecast())
    return (
        "<div class='ctxwarden-report' style='font-family:sans-serif;max-width:40em'>"
        f"<div><b>Context</b> · {html.escape(headline(report))}</div>"
        "<div style='position:relative;height:14px;background:#eee;margin:6px 0'>"
        f"<div style='width:{used_pct:.1f}%;height:100%;background:{color}'></div>"
        f"<div title='clear' style='{_MARK}left:{clear_pct:.1f}%;border-left:2px solid #555'></div>"
        f"<div title='fold' style='{_MARK}left:{fold_pct:.1f}%;border-left:3px double #000'></div>"
        "</div>"
        f"<div style='color:{color}'>{html.escape(usage_line(report))}</div>"
        f"<table><thead><tr><th>category</th><th>tokens</th><th>share</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<div>clear at {report.clear_at:,} · fold at {report.fold_at:,}</div><ul>{forecast}</ul>"
        f"<div style='color:#666'>{html.escape(lifecycle_line(report))}</div>"
        f"<div style='color:#666'>{html.escape(spend_line(report))}</div>"
        "</div>"
    )


__all__ = ["bar", "headline", "report_html", "report_rich", "report_text"]
