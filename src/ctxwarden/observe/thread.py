"""Reading a checkpointed thread, from an agent, a checkpointer or a state directory.

Recent LangGraph versions store the message list as deltas, so a checkpoint row alone
does not hold the messages; a small graph over the agent state schema reads them back
through the checkpointer's own reconstruction. That lets the CLI report on a thread
without rebuilding the agent (and without its model).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from ctxwarden.errors import CtxwardenError
from ctxwarden.observe.remote import aserved_values, is_served, served_values

CHECKPOINTS_FILE = "checkpoints.sqlite"


class UnknownThreadError(CtxwardenError, LookupError):
    """The thread (or the store it should be in) does not exist."""


def reader_graph(checkpointer: BaseCheckpointSaver) -> Any:
    """A graph over the agent state schema that can only read threads back."""
    from ctxwarden.view import ContextState

    graph = StateGraph(ContextState)
    graph.add_node("read", lambda _state: {})
    graph.add_edge(START, "read")
    graph.add_edge("read", END)
    return graph.compile(checkpointer=checkpointer)


def thread_id_of(config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise UnknownThreadError(
            "the config names no thread. Fix: pass {'configurable': {'thread_id': '<your thread>'}}."
        )
    return str(thread)


def read_messages(source: Any, config: RunnableConfig) -> list[BaseMessage]:
    """The checkpointed messages of the thread in `config`.

    `source` is a compiled agent or graph, a checkpointer, a state directory (holding
    `checkpoints.sqlite`), or a LangGraph server's thread (a `RemoteGraph` or a langgraph-sdk
    client). An unknown thread raises `UnknownThreadError`.
    """
    return list(read_values(source, config)["messages"])


def read_values(source: Any, config: RunnableConfig) -> dict[str, Any]:
    """The checkpointed state values of the thread in `config` (messages and private keys)."""
    if is_served(source):  # a LangGraph server's thread: read over its API
        return served_values(source, config)
    thread = thread_id_of(config)
    opened = open_state_dir(source) if isinstance(source, str | Path) else None
    try:
        source = opened or source
        state = _graph(source).get_state(config)
        messages = state.values.get("messages") if state.values else None
        if not messages:
            known = known_threads(source)
            listing = ", ".join(known[:10]) + (" …" if len(known) > 10 else "") if known else "none"
            raise UnknownThreadError(f"thread {thread!r} has no checkpointed messages here. Known threads: {listing}.")
        return dict(state.values)
    finally:
        if opened is not None:
            opened.conn.close()  # type: ignore[attr-defined]


async def aread_values(source: Any, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `read_values`."""
    if is_served(source):
        return await aserved_values(source, config)
    thread = thread_id_of(config)
    if isinstance(source, str | Path):
        return read_values(source, config)
    state = await _graph(source).aget_state(config)
    messages = state.values.get("messages") if state.values else None
    if not messages:
        raise UnknownThreadError(f"thread {thread!r} has no checkpointed messages here.")
    return dict(state.values)


def open_state_dir(state_dir: str | Path) -> BaseCheckpointSaver:
    """The checkpointer of an existing state dir; a missing one raises `UnknownThreadError` (never creates one)."""
    from ctxwarden.stack.checkpoints import open_checkpointer

    path = Path(state_dir) / CHECKPOINTS_FILE
    if not path.is_file():
        raise UnknownThreadError(f"no checkpoints at {path}. Fix: pass the --state-dir the agent ran with.")
    return open_checkpointer(path)


def known_threads(source: Any) -> list[str]:
    """Thread ids stored under `source` (best effort: empty when the store cannot say)."""
    saver = _checkpointer(source)
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        return [str(row[0]) for row in rows]
    if saver is None:
        return []
    return sorted({str(c.config["configurable"]["thread_id"]) for c in saver.list(None)})


def _graph(source: Any) -> Any:
    if hasattr(source, "get_state"):
        return source
    saver = _checkpointer(source)
    if saver is None:
        raise TypeError(
            f"cannot read threads from {type(source).__name__}: pass a compiled agent, a checkpointer, or a state dir."
        )
    return reader_graph(saver)


def _checkpointer(source: Any) -> BaseCheckpointSaver | None:
    if isinstance(source, BaseCheckpointSaver):
        return source
    saver = getattr(source, "checkpointer", None)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def state_dir_of(source: Any) -> Path | None:
    """The directory of a SQLite-checkpointed source (where its `trace.sqlite` lives), if it has one."""
    if isinstance(source, str | Path):
        return Path(source)
    saver = _checkpointer(source)
    conn = getattr(saver, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
    except sqlite3.Error:
        return None
    return Path(row[2]).parent if row and row[2] else None


__all__ = [
    "UnknownThreadError",
    "aread_values",
    "known_threads",
    "open_state_dir",
    "read_messages",
    "read_values",
    "reader_graph",
    "state_dir_of",
]
