"""Where a piece of work is running: the LangGraph step's thread, namespace and run.

Read from the config of the step being run, so layers, recorders and file names agree
on the thread and on which agent (the top-level one or a subagent) did the work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from ctxwarden.core.layout import NO_THREAD
from ctxwarden.errors import ThreadIdError

_AGENT_TOOL: ContextVar[str | None] = ContextVar("ctxwarden_agent_tool", default=None)


@contextlib.contextmanager
def agent_tool(name: str | None) -> Iterator[None]:
    """Mark what runs inside as the agent's tool `name` (`None`: ctxwarden's own work, e.g. eviction or a fold).

    The thread-isolating backends read it: an agent's tool may read ctxwarden's originals (evicted outputs,
    history files) but never change them, while ctxwarden writes them through the same backend."""
    token = _AGENT_TOOL.set(name)
    try:
        yield
    finally:
        _AGENT_TOOL.reset(token)


def running_agent_tool() -> str | None:
    """The agent's tool running now, or `None` when ctxwarden itself (or no tool) is running."""
    return _AGENT_TOOL.get()


def step_context() -> tuple[str | None, str, str | None]:
    """`(thread_id, namespace, run_id)` of the LangGraph step running now, or `(None, "", None)` outside one.

    The namespace is the checkpoint namespace without the running node itself: `""` for
    the top-level agent, `"tools:<task id>"` inside a subagent called by a tool.
    """
    try:
        from langgraph.config import get_config

        config = get_config()
    except RuntimeError:
        return None, "", None
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread = configurable.get("thread_id")
    checkpoint_ns = str(configurable.get("checkpoint_ns") or metadata.get("langgraph_checkpoint_ns") or "")
    namespace = checkpoint_ns.rsplit("|", 1)[0] if "|" in checkpoint_ns else ""
    run = config.get("run_id") or metadata.get("run_id")
    return (str(thread) if thread is not None else None), namespace, (str(run) if run is not None else None)


def running_thread() -> str | None:
    """Whose files the running step may reach: its thread id, `NO_THREAD` in a graph's run without one, `None` outside
    any graph (ctxwarden's own work, a tool invoked by hand: the operator).

    A run without a thread id is a graph's step all the same: it reaches the files of the runs without one, never a
    thread's (it was let into every thread's folder, as the operator is)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except RuntimeError:
        return None
    thread = step_context()[0]
    if thread is not None:
        return thread
    in_graph = (config.get("metadata") or {}).get("langgraph_node") is not None  # not a tool invoked by hand
    return NO_THREAD if in_graph else None


def step_checkpoint() -> str | None:
    """The id of the top-level checkpoint the running step was computed from, or `None` outside a step.

    A thread resumed from an earlier checkpoint (time travel, Studio's edit of a message) goes on in a branch of its
    own under the same thread id; the checkpoint a step came from says which branch its work belongs to."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except RuntimeError:
        return None
    found = ((config.get("configurable") or {}).get("checkpoint_map") or {}).get("")
    return str(found) if found else None


def thread_key() -> str:
    """The thread of the step being run and its namespace, as one key (a subagent's calls are a thread of their own)."""
    thread_id, namespace, _run = step_context()
    return f"{thread_id}|{namespace}"


def check_thread_id() -> None:
    """Refuse a run whose thread id is `""`, before it does anything.

    An empty id names no thread: its files would have no folder of their own, and langgraph
    would keep its checkpoints under a key a typo makes. Refused at the first model call, so
    nothing has run yet and nothing is lost; no thread id at all (`None`) is a run without a
    checkpointer and goes on.
    """
    thread = step_context()[0]
    if thread is not None and not thread:
        raise ThreadIdError(
            "thread_id '' names no thread: ctxwarden keeps each thread's evicted outputs and history in a folder "
            'named after it. Pass a non-empty id, e.g. config={"configurable": {"thread_id": "session-1"}}.'
        )


__all__ = ["agent_tool", "check_thread_id", "running_agent_tool", "step_checkpoint", "step_context", "thread_key"]
