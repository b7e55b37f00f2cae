"""Folding a checkpointed thread on demand, from outside a run: `compact()` for a person or a script.

`compact(agent, config, instructions)` folds the thread now, keeping only the last step
verbatim, and records the fold like an automatic one. It reads the thread, folds with the
fold layer's own engine and writes the result back through the agent's own graph (see
`ctxwarden.thread.write`), so it sits above the layers, with the rest of what touches a
thread's persisted state. The agent's own `compact_conversation` tool is in
`ctxwarden.fold.tool`. The sync and async forms share every step but the I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from ctxwarden.clip.clear import CLIP_STATE_KEY
from ctxwarden.clip.shown import current_view
from ctxwarden.core.layers import PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.parts import parts_of
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stamp import last_stamped
from ctxwarden.errors import WindowUnknownError
from ctxwarden.fold.engine import DETERMINISTIC, Folder, FoldInput, FoldOutcome
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, folded_view
from ctxwarden.thread.outside import agent_backend, agent_recorder
from ctxwarden.thread.read import aread_values, opened, read_values, thread_id_of
from ctxwarden.thread.write import COMPACTED_AFTER, awrite_state, write_state
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore


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
    """Fold the thread in `config` now; returns the fold, or `None` when there is nothing to fold or the fold would
    free nothing (its summary as large as the turns it replaces: the view is left as it is, and the trace records a
    `fold_held` event with what it would have freed).

    `source` is the agent, its checkpointer or its state dir. An agent built by
    `create_context_agent` brings its own backend, trace, policy and summarizer, whatever
    its checkpointer; pass any of them to override. Otherwise the history goes to the state
    dir's files and the fold is traced in the `trace.sqlite` beside SQLite checkpoints.
    `summarizer` is a chat model or `"deterministic"` (the default when the agent was not
    given one). The fold is written through the agent's own graph when `source` is the
    agent, so every other key of the thread (todos, files, a middleware's state) is kept.
    Inside a running event loop, or with an async-only checkpointer, use `acompact`.
    """
    given = _Given(summarizer, backend, trace, policy, meter)
    thread = thread_id_of(config)
    with opened(source) as target:
        values = read_values(target, config)
        parts = _Parts.resolve(target, source, given)
        outcome = parts.folder().fold(parts.fold_input(values, thread, instructions))
        update = _update(outcome, values)
        if update is not None:
            write_state(target, config, update)
        parts.recorder.record_all(_events(outcome), thread_id=thread)
        return _record(outcome)


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
    given = _Given(summarizer, backend, trace, policy, meter)
    if isinstance(source, str | Path):  # a state dir opens a SQLite file: do it off the loop
        return await asyncio.to_thread(lambda: compact(source, config, instructions, **given.keywords()))
    thread = thread_id_of(config)
    values = await aread_values(source, config)
    parts = _Parts.resolve(source, source, given)
    outcome = await parts.folder().afold(parts.fold_input(values, thread, instructions))
    update = _update(outcome, values)
    if update is not None:
        await awrite_state(source, config, update)
    await asyncio.to_thread(parts.recorder.record_all, _events(outcome), thread_id=thread)
    return _record(outcome)


@dataclass(frozen=True, slots=True)
class _Given:
    """What the caller passed explicitly (each `None` when not given)."""

    summarizer: Any
    backend: Any
    trace: TraceRecorder | TraceStore | str | Path | None
    policy: ContextPolicy | None
    meter: TokenMeter | None

    def keywords(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class _Parts:
    """What one compaction uses: given explicitly, else recorded on the agent, else beside SQLite checkpoints."""

    backend: Any
    recorder: TraceRecorder
    policy: ContextPolicy
    meter: TokenMeter
    summarizer: Any

    @classmethod
    def resolve(cls, target: Any, source: Any, given: _Given) -> _Parts:
        built = parts_of(source)
        summarizer = given.summarizer
        if summarizer is None:
            summarizer = built.summarizer if built is not None and built.summarizer is not None else DETERMINISTIC
        return cls(
            backend=agent_backend(target, source, given.backend, "compact()"),
            recorder=agent_recorder(target, source, given.trace),
            policy=given.policy or (built.policy if built is not None else DEFAULT_POLICY),
            meter=given.meter or (built.meter if built is not None else TokenMeter()),
            summarizer=summarizer,
        )

    def folder(self) -> Folder:
        return Folder(self.policy, self.meter, self.backend, self.summarizer)

    def fold_input(self, values: dict[str, Any], thread: str, instructions: str | None) -> FoldInput:
        """The fold engine's input for the thread's current view: forced, keeping only the last step."""
        policy, meter = self.policy, self.meter
        messages = list(values["messages"])
        folds = Folds.from_state(values)
        view = current_view(folded_view(messages, folds), values.get(CLIP_STATE_KEY), policy, meter, thread=messages)
        found = last_stamped(messages)
        stamp = found[1] if found else {}
        stated = stamp.get("window") if stamp.get("window_source") == "refusal" else None  # the provider's own
        window = stated or policy.window or stamp.get("window")
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
            fallback_model=self.summarizer,
            instructions=instructions,
            forced=True,
        )


def _update(outcome: FoldOutcome | None, values: dict[str, Any]) -> dict[str, Any] | None:
    """The fold state to write (`None`: nothing folded), marked as changed after the last call (`COMPACTED_AFTER`)."""
    if outcome is None or outcome.record is None:
        return None
    found = last_stamped(list(values["messages"]))
    update = dict(outcome.state or {})
    if found is not None and isinstance(update.get(FOLD_STATE_KEY), dict):
        update[FOLD_STATE_KEY] = {**update[FOLD_STATE_KEY], COMPACTED_AFTER: values["messages"][found[0]].id}
    return update


def _events(outcome: FoldOutcome | None) -> list[PendingEvent]:
    return list(outcome.events) if outcome is not None else []


def _record(outcome: FoldOutcome | None) -> FoldRecord | None:
    return outcome.record if outcome is not None else None


__all__ = ["acompact", "compact"]
