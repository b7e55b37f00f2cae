"""Where an agent keeps a thread's files and trace, for the callers that act on a thread from outside a run.

`compact()` writes a fold's history and `delete_thread()` removes a thread's files: both must use the backend
the agent evicts to and the trace it records to, which the checkpointer says nothing about. Given explicitly,
they win; else an agent built by `create_context_agent` brings its own (`core.parts`); else a SQLite
checkpointer in a state dir has them beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend

from ctxwarden.core.layout import TRACE_FILE
from ctxwarden.core.parts import parts_of
from ctxwarden.errors import CtxwardenError
from ctxwarden.thread.read import state_dir_of
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore


def agent_backend(target: Any, source: Any, given: Any, caller: str) -> Any:
    """The backend holding the thread's offloaded files (`target`: the opened `source`; `caller` names the API)."""
    if given is not None:
        return given
    built = parts_of(source)
    if built is not None and built.backend is not None:
        return built.backend
    state_dir = state_dir_of(target)
    if state_dir is not None:
        return FilesystemBackend(root_dir=state_dir, virtual_mode=True)  # the operator: no thread to isolate
    raise CtxwardenError(
        f"{caller} cannot tell where {type(source).__name__}'s agent keeps its history and evicted files: it was not "
        "built by create_context_agent and its checkpointer is not SQLite in a state dir. "
        "Fix: pass backend=<the agent's backend> (and trace=<its trace>)."
    )


def agent_recorder(target: Any, source: Any, given: TraceRecorder | TraceStore | str | Path | None) -> TraceRecorder:
    """The recorder of the agent's trace (a disabled one when there is none)."""
    if isinstance(given, TraceRecorder):
        return given
    if given is not None:
        return TraceRecorder(given)
    built = parts_of(source)
    if built is not None:
        return built.recorder  # type: ignore[no-any-return]
    state_dir = state_dir_of(target)
    found = state_dir / TRACE_FILE if state_dir is not None else None
    return TraceRecorder(found if found is not None and found.is_file() else None)


__all__ = ["agent_backend", "agent_recorder"]
