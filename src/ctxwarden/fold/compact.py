"""Folding on demand: `compact()` for a person, `compact_conversation` for the agent.

`compact(agent, config, instructions)` folds a checkpointed thread now, keeping only
the last step verbatim, and records the fold like an automatic one. The agent's
tool does not fold by itself (a tool cannot change what the model is shown): it asks
for a fold, and the next model call performs it — whether or not the provider
reports usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from ctxwarden.clip.clear import CLIP_STATE_KEY, current_view
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import last_stamped
from ctxwarden.errors import CtxwardenError, WindowUnknownError
from ctxwarden.fold.engine import DETERMINISTIC, Folder, FoldInput
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, folded_view

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
    summarizer: Any = DETERMINISTIC,
    backend: Any = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
) -> FoldRecord | None:
    """Fold the thread in `config` now; returns the fold, or `None` when there is nothing to fold.

    `source` is the agent, its checkpointer or its state dir. `summarizer` is a chat model,
    or `"deterministic"` (the default) to build the summary without a model. The history
    goes to `backend` (default: the state dir's filesystem); the fold is traced in the
    `trace.sqlite` beside the checkpoints.
    """
    from deepagents.backends import FilesystemBackend

    from ctxwarden.observe.recorder import TraceRecorder
    from ctxwarden.observe.thread import open_state_dir, read_values, reader_graph, state_dir_of, thread_id_of
    from ctxwarden.observe.trace import TRACE_FILE

    thread = thread_id_of(config)
    saver = open_state_dir(source) if isinstance(source, str | Path) else _checkpointer(source)
    try:
        values = read_values(saver, config)
        state_dir = state_dir_of(saver)
        if backend is None:
            if state_dir is None:
                raise CtxwardenError("compact() needs the agent's backend to write the history file: pass backend=...")
            backend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)
        meter = meter or TokenMeter()
        given = _input(values, thread, policy, meter, summarizer, instructions)
        outcome = Folder(policy, meter, backend, summarizer).fold(given)
        recorder = TraceRecorder(state_dir / TRACE_FILE if state_dir else None)
        if outcome is None or outcome.record is None:
            recorder.record_all(outcome.events if outcome else [], thread_id=thread)
            return None
        reader_graph(saver).update_state(config, dict(outcome.state or {}), as_node="read")
        recorder.record_all(outcome.events, thread_id=thread)
        return outcome.record
    finally:
        if isinstance(source, str | Path):
            cast(Any, saver).conn.close()


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
    view = current_view(folded_view(messages, folds), values.get(CLIP_STATE_KEY), policy, meter)
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


def _checkpointer(source: Any) -> Any:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    if isinstance(source, BaseCheckpointSaver):
        return source
    saver = getattr(source, "checkpointer", None)
    if isinstance(saver, BaseCheckpointSaver):
        return saver
    raise TypeError(f"cannot compact a {type(source).__name__}: pass the agent, its checkpointer or its state dir")


__all__ = ["COMPACT_TOOL", "compact", "make_compact_tool"]
