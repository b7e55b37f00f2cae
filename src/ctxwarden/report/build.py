"""The /context report: what a thread's next model call will carry, by category, against its window.

`used` starts from ground truth — the input tokens the provider reported for the last
call (else what ctxwarden measured for it) — and adds the meter's estimate of what the
thread gained since. Categories come from the last call's stamp (system prompt, tool
schemas) and from counting the conversation by role, scaled so they add up to `used`.
Categories are counted on the view the layers leave (the fold summary, cleared
placeholders); the admitted sections (skills, memory, instructions) come from the
last call's stamp.

A fold done outside a model call (`compact()`) changes the view after the last call, so
the last call's figures no longer describe it: then `used` is measured on the current
view (with the last call's system prompt, tool schemas and calibration), and the report
says so (`basis`). The lifecycle and spend come from the agent's trace; when the report
cannot find one it says so rather than counting zeros.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.admit.layer import ADMIT_STAMP_KEY
from ctxwarden.clip.order import kept_results
from ctxwarden.clip.placeholders import is_cleared
from ctxwarden.core.gauge_note import NOTE_STAMP_KEY
from ctxwarden.core.layout import TRACE_FILE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.parts import parts_of
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import last_stamped, stamps
from ctxwarden.core.stated_window import with_stated
from ctxwarden.core.task import task_excess
from ctxwarden.core.window import resolve_window
from ctxwarden.errors import UnknownThreadError, WindowUnknownError
from ctxwarden.fold.state import FOLD_STATE_KEY, is_summary
from ctxwarden.report import forecast as forecasting
from ctxwarden.report.context import ContextReport
from ctxwarden.report.counts import trace_counts
from ctxwarden.report.figures import CATEGORIES, PLACEHOLDER_TOKENS
from ctxwarden.stack.discover import trace_of
from ctxwarden.thread.branch import Branch, abranch_of, branch_of
from ctxwarden.thread.checkpoints import checkpointer_of
from ctxwarden.thread.read import aread_values, opened, read_values, state_dir_of, thread_id_of
from ctxwarden.thread.remote import is_served
from ctxwarden.thread.view import model_view
from ctxwarden.thread.write import COMPACTED_AFTER
from ctxwarden.trace.store import TraceStore


def build_report(
    messages: Sequence[BaseMessage],
    *,
    thread_id: str | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
    model: Any = None,
    spend: Mapping[str, Mapping[str, int]] | None = None,
    values: Mapping[str, Any] | None = None,
    lifecycle: Mapping[str, Mapping[str, int]] | None = None,
    trace_found: bool = True,
) -> ContextReport:
    """The report for a thread's messages. `model` (a chat model) measures against another model's window.

    `values` are the thread's state values: their folds and clearing boundary give the view the
    categories are counted on (the summary, cleared placeholders).
    """
    meter = meter or TokenMeter()
    view = model_view(messages, values, policy, meter)
    found = last_stamped(messages)
    stamp: dict[str, Any] = found[1] if found else {}
    since = messages[found[0] :] if found else messages
    if model is not None:
        window = with_stated(resolve_window(model, policy.window), values)
        model_label, window_tokens, source = window.model, window.tokens, str(window.source)
    elif found:
        model_label, window_tokens = str(stamp.get("model")), int(stamp["window"])
        source = str(stamp.get("window_source", "profile"))
        if policy.window is not None and source != "refusal":  # a refusal stated a smaller one than the policy's
            window_tokens, source = policy.window, "override"
    elif policy.window is not None:
        model_label, window_tokens, source = "unknown", policy.window, "override"
    else:
        raise WindowUnknownError(
            f"thread {thread_id!r} has no model call measured by ctxwarden yet, so its window is unknown. "
            "Fix: pass model=<the chat model> or policy=ContextPolicy(window=...)."
        )

    factor = float(stamp.get("calibration", 1.0)) if found else 1.0
    last_input = stamp.get("reported_input_tokens") or stamp.get("input_tokens") if found else None
    added = round(meter.messages_tokens(since) * factor)
    by_role = _count_by_role(view, meter)
    system = by_role.pop("system prompt")  # system messages kept in the thread itself
    admitted = {name: int(tokens) for name, tokens in (stamp.get(ADMIT_STAMP_KEY) or {}).items()}
    basis = "last call"
    if found:
        system += max(0, int(stamp.get("system_tokens", 0)) - sum(admitted.values()))
        tools = int(stamp.get("tool_schema_tokens", 0))
        used = int(last_input or 0) + added
        if compacted_since_last_call(values, messages[found[0]]):
            fixed = int(stamp.get("system_tokens", 0)) + tools
            used, basis = round((fixed + meter.messages_tokens(view)) * factor), "current view"
    else:
        tools = 0
        used = added
    raw = {"system prompt": system, "tool schemas": tools, **admitted, **by_role}
    categories = _scale({name: raw.get(name, 0) for name in CATEGORIES}, used)
    task = task_excess(
        view,
        int(window_tokens * policy.fold_facts_share),
        window_tokens * policy.clear_min_batch_share,
        meter.message_tokens,
    )  # the part of a long task the next batch cuts (`core.task`)
    clearable_raw = _clearable(view, meter, policy) + task
    raw_total = sum(raw.values()) or 1
    reach = _out_of_reach(view, meter, policy, categories, used / raw_total)
    reach["user messages"] = max(0, reach["user messages"] - round(task * used / raw_total))
    return ContextReport(
        thread_id=thread_id,
        model=model_label,
        window=window_tokens,
        window_source=source,
        used=used,
        categories=categories,
        clear_at=policy.clear_threshold(window_tokens),
        clear_to=int(window_tokens * policy.clear_to),
        fold_at=policy.fold_threshold(window_tokens),
        clearable=round(clearable_raw * used / raw_total),
        calls=len(stamps(messages)),
        last_input_tokens=int(last_input) if last_input else None,
        added_since=added,
        spend=dict(spend or {}),
        lifecycle=dict(lifecycle or {}),
        policy=policy,
        out_of_reach=reach,
        counter=meter.counter_name,
        basis=basis,
        trace_found=trace_found,
        gauge_notes=gauge_notes_of(messages),
    )


def gauge_notes_of(messages: Sequence[BaseMessage]) -> tuple[dict[str, Any], ...]:
    """The gauge notes the thread's model calls carried, from their stamps, oldest first."""
    return tuple(
        {"call": number, "gauge": stamp.get("gauge"), "fraction": stamp.get("fraction"), "note": stamp[NOTE_STAMP_KEY]}
        for number, stamp in enumerate(stamps(messages), start=1)
        if stamp.get(NOTE_STAMP_KEY)
    )


def _out_of_reach(
    view: Sequence[BaseMessage], meter: TokenMeter, policy: ContextPolicy, categories: Mapping[str, int], scale: float
) -> dict[str, int]:
    """What clearing cannot remove, in the report's (scaled) tokens: the fixed prompt and the rest by kind."""
    fixed = sum(categories.get(name, 0) for name in forecasting.FIXED)
    reach = {"system prompt, tool schemas and admitted sections": fixed}
    reach["user messages"] = categories.get("user messages", 0)
    reach["summary"] = categories.get("summary", 0)
    for name, tokens in forecasting.out_of_reach(view, meter, policy).items():
        reach[name] = round(tokens * scale)
    return reach


def compacted_since_last_call(values: Mapping[str, Any] | None, last_call: BaseMessage) -> bool:
    """Whether `compact()` folded the thread after its last model call (whose reply is `last_call`)."""
    raw = (values or {}).get(FOLD_STATE_KEY)
    marked = raw.get(COMPACTED_AFTER) if isinstance(raw, Mapping) else None
    return marked is not None and marked == last_call.id


def _count_by_role(messages: Sequence[BaseMessage], meter: TokenMeter) -> dict[str, int]:
    counts = {"user messages": 0, "assistant messages": 0, "tool results": 0, "system prompt": 0}
    counts["cleared placeholders"] = 0
    counts["summary"] = 0
    for message in messages:
        tokens = meter.message_tokens(message)
        if is_cleared(message):
            counts["cleared placeholders"] += tokens
        elif is_summary(message):
            counts["summary"] += tokens
        elif isinstance(message, HumanMessage):
            counts["user messages"] += tokens
        elif isinstance(message, AIMessage):
            counts["assistant messages"] += tokens
        elif isinstance(message, ToolMessage):
            counts["tool results"] += tokens
        elif isinstance(message, SystemMessage):
            counts["system prompt"] += tokens
    return counts


def _clearable(messages: Sequence[BaseMessage], meter: TokenMeter, policy: ContextPolicy) -> int:
    results = [m for m in messages if isinstance(m, ToolMessage) and m.name not in policy.clear_exclude_tools]
    results = [m for m in results if not is_cleared(m)]
    kept = kept_results(messages, results, policy.keep_tool_results)  # the newest stay, always
    older = [m for m in results if m.tool_call_id not in kept]
    return sum(max(0, meter.message_tokens(m) - PLACEHOLDER_TOKENS) for m in older)


def _scale(raw: dict[str, int], total: int) -> dict[str, int]:
    """Scale `raw` to add up to `total`, keeping integers (largest remainders get the rounding)."""
    raw_total = sum(raw.values())
    if raw_total <= 0:
        return dict.fromkeys(raw, 0)
    exact = {k: v * total / raw_total for k, v in raw.items()}
    scaled = {k: int(v) for k, v in exact.items()}
    short = total - sum(scaled.values())
    for key in sorted(exact, key=lambda k: exact[k] - scaled[k], reverse=True)[: max(0, short)]:
        scaled[key] += 1
    return scaled


def context_report(
    source: Any,
    config: RunnableConfig,
    *,
    trace: TraceStore | str | Path | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
    model: Any = None,
) -> ContextReport:
    """The /context report of the thread in `config`.

    `source` is a compiled agent, a checkpointer, a state directory, or a LangGraph
    server's thread (a `RemoteGraph` or a langgraph-sdk client: the state is read over the
    server's API). The per-role spend comes from `trace` (default: the trace the agent was
    built with or records to, else the `trace.sqlite` beside a SQLite checkpointer; a served
    thread's trace is where the deployment keeps it, so name it). Pass `model` to see the
    thread against another model's window.
    """
    _require_checkpointer(source)
    values = read_values(source, config)
    thread = thread_id_of(config)
    store = _trace_for(source, trace)
    if store is None:
        return _report(values, thread, None, policy=policy, meter=meter, model=model)
    with opened(source) as target:
        branch = branch_of(target, config)
    done = trace_counts(store, thread, values, branch)
    return _report(values, thread, done, policy=policy, meter=meter, model=model)


async def acontext_report(
    source: Any,
    config: RunnableConfig,
    *,
    trace: TraceStore | str | Path | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
    model: Any = None,
) -> ContextReport:
    """Async twin of `context_report`: the thread and the trace are read without blocking the loop."""
    _require_checkpointer(source)
    values = await aread_values(source, config)
    thread = thread_id_of(config)
    store = _trace_for(source, trace)
    if store is None:
        return _report(values, thread, None, policy=policy, meter=meter, model=model)
    if isinstance(source, str | Path):  # a state dir opens a SQLite file: off the loop
        branch = await asyncio.to_thread(_branch_of_state_dir, source, config)
    else:
        branch = await abranch_of(source, config)
    done = await asyncio.to_thread(trace_counts, store, thread, values, branch)
    return _report(values, thread, done, policy=policy, meter=meter, model=model)


def _branch_of_state_dir(state_dir: str | Path, config: RunnableConfig) -> Branch | None:
    with opened(state_dir) as saver:
        return branch_of(saver, config)


def _report(
    values: Mapping[str, Any],
    thread: str,
    done: tuple[Mapping[str, Mapping[str, int]], Mapping[str, Mapping[str, int]]] | None,
    **options: Any,
) -> ContextReport:
    """The report of a thread read from its checkpoints; `done` is (spend, lifecycle), `None` without a trace."""
    spend, lifecycle = done if done is not None else ({}, {})
    return build_report(
        values["messages"],
        thread_id=thread,
        spend=spend,
        values=values,
        lifecycle=lifecycle,
        trace_found=done is not None,
        **options,
    )


def _require_checkpointer(source: Any) -> None:
    """A compiled agent without a checkpointer kept no thread to report on: say so, and how to keep one."""
    if hasattr(source, "get_state") and not is_served(source) and checkpointer_of(source) is None:
        raise UnknownThreadError(
            "the agent has no checkpointer, so it kept no thread to report on. Fix: build it with a checkpointer "
            "(create_deep_agent(..., checkpointer=InMemorySaver()), or create_context_agent(...), which keeps one "
            "under its state dir)."
        )


def _trace_for(source: Any, trace: TraceStore | str | Path | None) -> TraceStore | None:
    """The trace given, else the one the agent was built with, else the `trace.sqlite` beside SQLite checkpoints."""
    if isinstance(trace, TraceStore):
        return trace
    if trace is not None:
        return TraceStore(trace)
    parts = parts_of(source)
    if parts is not None:
        store = getattr(parts.recorder, "store", None)
        return store if isinstance(store, TraceStore) else None
    if hasattr(source, "get_state"):
        recorded = trace_of(source)
        where = getattr(recorded, "path", None)
        if recorded is not None and (not isinstance(where, Path) or where.is_file()):
            return recorded
    state_dir = state_dir_of(source)
    path = state_dir / TRACE_FILE if state_dir is not None else None
    return TraceStore(path) if path is not None and path.is_file() else None


__all__ = [
    "acontext_report",
    "build_report",
    "compacted_since_last_call",
    "context_report",
    "gauge_notes_of",
]
