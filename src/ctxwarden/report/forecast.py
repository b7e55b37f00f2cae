"""What the /context report promises: only what the policy will do, what clearing cannot reach, and why.

A report that says "clearing is due" when the policy will wait, or that leaves a reader to
guess why clearing did not help, teaches the wrong thing. The forecast here follows the
clearing layer's own rules (a batch must free at least `clear_min_batch_share` of the
window, unless the call is past the fold threshold; folding is measured after clearing);
`out_of_reach` counts what no clearing batch can remove (the fixed prompt, user messages,
assistant text and the arguments of the newest calls, the newest results, pinned tools'
results, the summary); and a fixed overhead that takes most of the window is said plainly,
because no layer can help with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxwarden.clip.order import kept_results
from ctxwarden.clip.placeholders import has_text, is_cleared
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import text_of
from ctxwarden.report.figures import ReportFigures

OVERHEAD_WARN_SHARE = 0.5
"""A fixed overhead (system prompt, tool schemas, admitted sections) from this share of the window gets a warning."""

FIXED = ("system prompt", "tool schemas", "skills index", "memory index", "instruction files")
"""The categories sent on every call whatever the conversation: clearing and folding never touch them."""

GLYPHS = "█ used · ░ free · | clear threshold · ‖ fold threshold"
"""What the bar's characters mean."""


def min_batch(report: ReportFigures) -> int:
    """The smallest clearing batch the policy runs below the fold threshold (a cache miss must be worth it)."""
    return round(report.window * report.policy.clear_min_batch_share)


def forecast(report: ReportFigures) -> list[str]:
    """What the next clear and fold will do, in words, following the policy's rules."""
    frees = report.next_clear_frees
    lines = []
    if report.used >= report.clear_at:
        if frees <= 0:
            lines.append("clearing is due but has nothing left to clear (see what it cannot reach below)")
        elif frees >= min_batch(report) or report.used >= report.fold_at:
            lines.append(f"clearing is due: the next call clears about {frees:,} tokens, towards {report.clear_to:,}")
        else:
            lines.append(
                f"clearing waits: a batch now would free only about {frees:,} tokens, under {min_batch(report):,} "
                f"({report.policy.clear_min_batch_share:.0%} of the window, the least worth a cache miss); "
                "it runs once it can free that much, or past the fold threshold"
            )
    else:
        lines.append(
            f"the next clear fires at {report.clear_at:,} tokens ({report.clear_at - report.used:,} from now) "
            f"and would free about {frees:,} tokens"
        )
    if report.used >= report.fold_at:
        if report.used - frees >= report.fold_at:
            lines.append("a fold is due on the next call (clearing alone cannot get under the fold threshold)")
        else:
            lines.append("clearing gets the next call under the fold threshold, so no fold yet")
    else:
        lines.append(f"the next fold fires at {report.fold_at:,} tokens ({report.fold_at - report.used:,} from now)")
    return lines


def reach_line(report: ReportFigures) -> str | None:
    """What clearing cannot reach, largest first, with its share of what is used."""
    parts = [(name, tokens) for name, tokens in report.out_of_reach.items() if tokens > 0]
    if not parts:
        return None
    total = sum(tokens for _name, tokens in parts)
    listed = ", ".join(f"{name} {tokens:,}" for name, tokens in sorted(parts, key=lambda p: -p[1]))
    share = total / report.used if report.used else 0.0
    return f"clearing cannot reach {total:,} tokens ({share:.0%} of what is used): {listed}"


def overhead_warning(report: ReportFigures) -> str | None:
    """A warning when the fixed part of every call takes most of the window (no layer can shrink it)."""
    fixed = sum(report.categories.get(name, 0) for name in FIXED)
    share = fixed / report.window
    if share < OVERHEAD_WARN_SHARE:
        return None
    verdict = (
        "every call is over the window, whatever clearing and folding do"
        if share >= 1
        else "clearing and folding can work only with what is left"
    )
    return (
        f"warning: the system prompt, tool schemas and admitted sections alone take {share:.0%} of the window "
        f"({fixed:,} of {report.window:,} tokens): {verdict}. Fix: a model with a larger window, fewer or smaller "
        "tools, or a shorter system prompt."
    )


def thresholds_line(report: ReportFigures) -> str:
    """The clear and fold thresholds, in tokens and as shares."""
    return (
        f"clear at {report.clear_at:,} ({report.policy.clear_at:.0%}, down to {report.clear_to:,}) · "
        f"fold at {report.fold_at:,} ({report.policy.summarize_at:.0%})"
    )


def kept_label(keep: int) -> str:
    """How the report names the results clearing keeps (`keep_tool_results`, and every result of the newest step)."""
    return "the newest step's tool results" if keep == 1 else f"the newest {keep} tool results"


def out_of_reach(messages: Sequence[BaseMessage], meter: TokenMeter, policy: ContextPolicy) -> dict[str, int]:
    """Raw tokens of the view no clearing batch can remove, by what they are (the fixed prompt is added by the report).

    `messages` is the view the next call starts from (folds and earlier batches applied).
    """
    results = [m for m in messages if isinstance(m, ToolMessage) and not is_cleared(m)]
    newest = kept_results(messages, results, policy.keep_tool_results)
    names = {str(c["id"]): c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    pinned = set(policy.clear_exclude_tools)
    kept = kept_label(policy.keep_tool_results)
    reach = {
        kept: 0,
        "pinned tools' results": 0,
        "assistant text, and the arguments clearing keeps": 0,
    }
    for result in results:
        if (result.name or names.get(result.tool_call_id)) in pinned:
            reach["pinned tools' results"] += meter.message_tokens(result)
        elif result.tool_call_id in newest:
            reach[kept] += meter.message_tokens(result)
    callers = [m for m in messages if isinstance(m, AIMessage)]
    recent = {id(m) for m in [m for m in callers if m.tool_calls][-policy.keep_tool_results :]}
    recent = recent if policy.keep_tool_results else set()
    answered = {m.tool_call_id for m in results}
    for message in callers:
        if is_cleared(message):
            continue
        clippable = 0
        if policy.clear_call_text and message.tool_calls and has_text(message):  # its text leaves with its results
            ids = [str(c["id"]) for c in message.tool_calls]
            if all(i in answered and i not in newest and names.get(i) not in pinned for i in ids):
                clippable += meter.counter(text_of(message))
        if policy.clip_tool_args and id(message) not in recent:
            for call in message.tool_calls:
                size = meter.counter(json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True, default=str))
                if size >= policy.clip_args_min_tokens and call.get("name") not in pinned:
                    clippable += size
        reach["assistant text, and the arguments clearing keeps"] += max(0, meter.message_tokens(message) - clippable)
    return reach


__all__ = [
    "FIXED",
    "GLYPHS",
    "OVERHEAD_WARN_SHARE",
    "forecast",
    "kept_label",
    "min_batch",
    "out_of_reach",
    "overhead_warning",
    "reach_line",
    "thresholds_line",
]
