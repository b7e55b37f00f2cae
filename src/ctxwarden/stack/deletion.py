"""Deleting a thread: its checkpoints and every file ctxwarden keeps for it, so its id starts clean if used again.

ctxwarden keeps a thread's evicted outputs and folded history on the agent's backend, beside
the checkpoints (`core.layout`). A checkpointer's own `delete_thread` removes the checkpoints
alone: the files stay, and a new thread given the same id (a client's own id, used again)
lists and reads them as its own. `delete_thread` removes both, files first: a deletion cut
short leaves the thread listed, to be deleted again, never checkpoints gone and files left.

On a store backend (`ThreadIsolatedStoreBackend`) the forks recorded in the store no longer
name the thread, so none reads a new thread of that id. A fork made by `Session.fork` keeps
its own copies of what it was seeded with, and stops reading the deleted thread: it recorded
the checkpoint it was made from, which is gone (`curate.lineage`).

Not deleted: the trace, which is append-only (it records the deletion, `thread_deleted`; a
new thread of the id counts only its own events, `thread.history`), files the agent wrote
in its workspace, and deepagents' own summaries named by a random id.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from ctxwarden.core.io import Steps, arun, method, run
from ctxwarden.core.layout import HISTORY_DIR, LARGE_RESULTS_DIR, folder_name
from ctxwarden.errors import CtxwardenError, ThreadDeleteError
from ctxwarden.stack.store_isolation import ThreadIsolatedStoreBackend
from ctxwarden.thread.checkpoints import checkpointer_of
from ctxwarden.thread.outside import agent_backend, agent_recorder
from ctxwarden.thread.read import opened, thread_id_of
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore


@dataclass(frozen=True, slots=True)
class DeletedThread:
    """What `delete_thread` removed."""

    thread_id: str
    checkpoints: bool
    """Whether the checkpointer held the thread."""
    paths: tuple[str, ...]
    """The backend paths removed (folders with everything below them, and files)."""


def thread_paths(thread: str) -> tuple[str, ...]:
    """Every backend path holding `thread`'s offloaded files: evictions, the history file, its parts and subagents'."""
    folder = folder_name(thread)
    return (f"/{LARGE_RESULTS_DIR}/{folder}", f"/{HISTORY_DIR}/{folder}.md", f"/{HISTORY_DIR}/{folder}")


def delete_thread(
    source: Any,
    config: RunnableConfig,
    *,
    backend: Any = None,
    trace: TraceRecorder | TraceStore | str | Path | None = None,
) -> DeletedThread:
    """Delete the thread in `config`: its offloaded files, then its checkpoints; see the module docstring.

    `source` is the agent, its checkpointer or its state dir, as for `compact()`: an agent built by
    `create_context_agent` brings its own backend and trace; pass them for any other. Run it while no run of the
    thread is going on. A thread with files but no checkpoints (deleted by its checkpointer alone) has its files
    removed. A file that cannot be removed raises `ThreadDeleteError`, with the checkpoints kept.
    """
    thread = thread_id_of(config)
    with opened(source) as target:
        saver, backend, recorder = _parts(target, source, backend, trace)
        deleted = run(_deleting(saver, backend, thread))
    recorder.record_all([("thread_deleted", {"paths": list(deleted.paths)}, None)], thread_id=thread)
    return deleted


async def adelete_thread(
    source: Any,
    config: RunnableConfig,
    *,
    backend: Any = None,
    trace: TraceRecorder | TraceStore | str | Path | None = None,
) -> DeletedThread:
    """Async twin of `delete_thread`, for async checkpointers and backends and callers in an event loop."""
    if isinstance(source, str | Path):  # a state dir opens a SQLite file: do it off the loop
        return await asyncio.to_thread(lambda: delete_thread(source, config, backend=backend, trace=trace))
    thread = thread_id_of(config)
    saver, backend, recorder = _parts(source, source, backend, trace)
    deleted = await arun(_deleting(saver, backend, thread))
    await asyncio.to_thread(
        recorder.record_all, [("thread_deleted", {"paths": list(deleted.paths)}, None)], thread_id=thread
    )
    return deleted


def _parts(target: Any, source: Any, backend: Any, trace: Any) -> tuple[Any, Any, TraceRecorder]:
    saver = checkpointer_of(target)
    if saver is None:
        raise CtxwardenError(
            f"delete_thread() cannot delete threads through a {type(source).__name__}. "
            "Fix: pass the agent (with its checkpointer), the checkpointer or the state dir."
        )
    return saver, agent_backend(target, source, backend, "delete_thread()"), agent_recorder(target, source, trace)


def _deleting(saver: Any, backend: Any, thread: str) -> Steps[DeletedThread]:
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    held = (yield method(saver, "get_tuple", config)) is not None
    removed: list[str] = []
    failed: list[str] = []
    for path in thread_paths(thread):
        answer = yield method(backend, "delete", path)
        error = getattr(answer, "error", None)
        if not error:
            removed.append(path)
        elif "not found" not in str(error).lower():
            failed.append(f"{path}: {error}")
    if failed:
        raise ThreadDeleteError(
            f"could not delete every file of thread {thread!r}: {'; '.join(failed)}. Its checkpoints are kept. "
            "Fix: remove the cause (a run of the thread still going on, or a backend that refuses), then call "
            "delete_thread again: what is already gone is skipped."
        )
    if isinstance(backend, ThreadIsolatedStoreBackend):
        yield method(backend, "forget_forks", thread)
    if held:
        yield method(saver, "delete_thread", thread)
    return DeletedThread(thread, held, tuple(removed))


__all__ = ["DeletedThread", "adelete_thread", "delete_thread", "thread_paths"]
