"""Folding on demand: `compact()` for a person, `compact_conversation` for the agent.

`compact(agent, config, instructions)` folds a checkpointed thread now, keeping only
the last step verbatim, and records the fold like an automatic one. The agent's
tool does not fold by itself (a tool cannot change what the model is shown): it asks
for a fold, and the next model call performs it — whether or not the provider
reports usage.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, cast

from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from ctxwarden.clip.clear import CLIP_STATE_KEY, current_view
from ctxwarden.core.layout import TRACE_FILE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.parts import parts_of
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import last_stamped
from ctxwarden.errors import CtxwardenError, WindowUnknownError
from ctxwarden.fold.engine import DETERMINISTIC, Folder, FoldInput
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, folded_view
from ctxwarden.observe.thread import aread_values, open_state_dir, read_values, state_dir_of, thread_id_of
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore
from ctxwarden.writes import COMPACTED_AFTER, awrite_state, write_state

COMPACT_TOOL = "compact_conversation"
SCHEDULED = (
    "Compaction scheduled: before your next step, the older turns will be folded into a structured summary; "
    "their full text goes to the conversation history file named in the summary."
)


def make_compact_tool() -> BaseTool:
    """The agent's `compact_conversation` tool: asks for a fold at the next model call."""

    def compact_conversation(
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
        focus: str | None = None,
    ) -> Command[Any]:
        folds = Folds.from_state(state)
        asked = Folds(folds.records, folds.hold_until, {"instructions": focus})
        return Command(
            update={
                FOLD_STATE_KEY: asked.to_state(),
                "messages": [ToolMessage(SCHEDULED, tool_call_id=tool_call_id, name=COMPACT_TOOL)],
            }
        )

    return StructuredTool.from_function(
        func=compact_conversation,
        name=COMPACT_TOOL,
        description=(
            "Fold the older part of this conversation into a structured summary to free context, keeping the "
            "latest step verbatim. Use it between subtasks or when the context is getting long. `focus` says what "
            "the summary should keep in detail."
        ),
    )


def compact(
    source: Any,
    config: RunnableConfig,
    instructions: str | None = None,
    *,
    summarizer: Any = None,
    backend: Any = None,
    trace: TraceRecorder | TraceStore | str | Path | None = None,
    policy: ContextPolicy | None = None,
    meter: TokenMeter | None = None,
) -> FoldRecord | None:
    """Fold the thread in `config` now; returns the fold, or `None` when there is nothing to fold.

    `source` is the agent, its checkpointer or its state dir. An agent built by
    `create_context_agent` brings its own backend, trace, policy and summarizer, whatever
    its checkpointer; pass any of them to override. Otherwise the history goes to the state
    dir's files and the fold is traced in the `trace.sqlite` beside SQLite checkpoints.
    `summarizer` is a chat model or `"deterministic"` (the default when the agent was not
    given one). The fold is written through the agent's own graph when `source` is the
    agent, so every other key of the thread (todos, files, a middleware's state) is kept.
    Inside a running event loop, or with an async-only checkpointer, use `acompact`.
    """
    thread = thread_id_of(config)
    opened = open_state_dir(source) if isinstance(source, str | Path) else None
    target = opened if opened is not None else source
    try:
        values = read_values(target, config)
        parts = _Parts.resolve(target, source, summarizer, backend, trace, policy, meter)
        outcome = Folder(parts.policy, parts.meter, parts.backend, parts.summarizer).fold(
            _input(values, thread, parts.policy, parts.meter, parts.summarizer, instructions)
        )
        if outcome is not None and outcome.record is not None:
            write_state(target, config, _marked(outcome.state, values))
        parts.recorder.record_all(outcome.events if outcome else [], thread_id=thread)
        return outcome.record if outcome else None
    finally:
        if opened is not None:
            cast(Any, opened).conn.close()


async def acompact(
    source: Any,
    config: RunnableConfig,
    instructions: str | None = None,
    *,
    summarizer: Any = None,
    backend: Any = None,
    trace: TraceRecorder | TraceStore | str | Path | None = None,
    policy: ContextPolicy | None = None,
    meter: TokenMeter | None = None,
) -> FoldRecord | None:
    """Async twin of `compact`: for async checkpointers (e.g. `AsyncPostgresSaver`) and callers in an event loop."""
    if isinstance(source, str | Path):  # a state dir opens a SQLite file: do it off the loop
        return await asyncio.to_thread(
            compact,
            source,
            config,
            instructions,
            summarizer=summarizer,
            backend=backend,
            trace=trace,
            policy=policy,
            meter=meter,
        )
    thread = thread_id_of(config)
    values = await aread_values(source, config)
    parts = _Parts.resolve(source, source, summarizer, backend, trace, policy, meter)
    outcome = await Folder(parts.policy, parts.meter, parts.backend, parts.summarizer).afold(
        _input(values, thread, parts.policy, parts.meter, parts.summarizer, instructions)
    )
    if outcome is not None and outcome.record is not None:
        await awrite_state(source, config, _marked(outcome.state, values))
    events = outcome.events if outcome else []
    await asyncio.to_thread(parts.recorder.record_all, events, thread_id=thread)
    return outcome.record if outcome else None


@dataclass(frozen=True, slots=True)
class _Parts:
    """What one compaction uses: given explicitly, else recorded on the agent, else beside SQLite checkpoints."""

    backend: Any
    recorder: TraceRecorder
    policy: ContextPolicy
    meter: TokenMeter
    summarizer: Any

    @classmethod
    def resolve(
        cls,
        target: Any,
        source: Any,
        summarizer: Any,
        backend: Any,
        trace: TraceRecorder | TraceStore | str | Path | None,
        policy: ContextPolicy | None,
        meter: TokenMeter | None,
    ) -> _Parts:
        built = parts_of(source)
        state_dir = state_dir_of(target)
        if backend is None and built is not None:
            backend = built.backend
        if backend is None and state_dir is not None:
            backend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)  # the operator: no thread to isolate
        if backend is None:
            raise CtxwardenError(
                f"compact() cannot tell where {type(source).__name__}'s agent writes its history files: it was not "
                "built by create_context_agent and its checkpointer is not SQLite in a state dir. "
                "Fix: pass backend=<the agent's backend> (and trace=<its trace>)."
            )
        if isinstance(trace, TraceRecorder):
            recorder = trace
        elif trace is not None:
            recorder = TraceRecorder(trace)
        elif built is not None:
            recorder = built.recorder
        else:
            found = state_dir / TRACE_FILE if state_dir is not None else None
            recorder = TraceRecorder(found if found is not None and found.is_file() else None)
        if summarizer is None:
            summarizer = built.summarizer if built is not None and built.summarizer is not None else DETERMINISTIC
        return cls(
            backend=backend,
            recorder=recorder,
            policy=policy or (built.policy if built is not None else DEFAULT_POLICY),
            meter=meter or (built.meter if built is not None else TokenMeter()),
            summarizer=summarizer,
        )


def _marked(state: dict[str, Any] | None, values: dict[str, Any]) -> dict[str, Any]:
    """The fold state to write, marked as changed after the last call (see `COMPACTED_AFTER`)."""
    found = last_stamped(list(values["messages"]))
    update = dict(state or {})
    if found is not None and isinstance(update.get(FOLD_STATE_KEY), dict):
        update[FOLD_STATE_KEY] = {**update[FOLD_STATE_KEY], COMPACTED_AFTER: values["messages"][found[0]].id}
    return update


def _input(
    values: dict[str, Any],
    thread: str,
    policy: ContextPolicy,
    meter: TokenMeter,
    summarizer: Any,
    instructions: str | None,
) -> FoldInput:
    messages = list(values["messages"])
    folds = Folds.from_state(values)
    view = current_view(folded_view(messages, folds), values.get(CLIP_STATE_KEY), policy, meter, thread=messages)
    found = last_stamped(messages)
    stamp = found[1] if found else {}
    window = policy.window or stamp.get("window")
    if window is None:
        raise WindowUnknownError(
            f"thread {thread!r} has no model call measured by ctxwarden, so its window is unknown. "
            "Fix: pass policy=ContextPolicy(window=...)."
        )
    fixed = int(stamp.get("system_tokens", 0)) + int(stamp.get("tool_schema_tokens", 0))
    factor = float(stamp.get("calibration", 1.0))
    return FoldInput(
        view=view,
        thread=messages,
        folds=folds,
        window=int(window),
        fixed_tokens=fixed,
        factor=factor,
        tokens_before=round((fixed + meter.messages_tokens(view)) * factor),
        thread_id=thread,
        namespace="",
        fallback_model=summarizer,
        instructions=instructions,
        forced=True,
    )


__all__ = ["COMPACT_TOOL", "acompact", "compact", "make_compact_tool"]
