"""Reading a checkpointed thread, from an agent, a checkpointer or a state directory.

Recent LangGraph versions store the message list as deltas, so a checkpoint row alone
does not hold the messages; a small graph over the agent state schema reads them back
through the checkpointer's own reconstruction. That lets the CLI report on a thread
without rebuilding the agent (and without its model).

The sync and async readers share every decision; only the calls that touch the
checkpointer differ.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NotRequired, TypedDict, get_type_hints

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph import END, START, StateGraph

from ctxwarden.core.identity import identified
from ctxwarden.core.layout import CHECKPOINTS_FILE
from ctxwarden.errors import ThreadSourceError, UnknownThreadError
from ctxwarden.thread.checkpoints import SqliteCheckpointer, checkpointer_of, open_checkpointer
from ctxwarden.thread.remote import aserved_values, is_served, served_values
from ctxwarden.thread.view import ContextState

READ_NODE = "read"
"""The one node of a reader graph; a write through it is recorded as that node's."""


def _is_state_key(name: str) -> bool:
    """A state key, not one of LangGraph's own channels (`__start__`, `branch:to:model`, ...)."""
    return not name.startswith("__") and ":" not in name


def kept_schema(keys: Iterable[str] = ()) -> type:
    """`ContextState` widened with `keys` (each a plain value), so a write through it carries them over."""
    hints = get_type_hints(ContextState, include_extras=True)
    extra = {key: NotRequired[Any] for key in sorted(set(keys) - set(hints)) if _is_state_key(key)}
    if not extra:
        return ContextState
    widened: type = TypedDict("KeptState", {**hints, **extra})  # type: ignore[misc]
    return widened


def reader_graph(checkpointer: BaseCheckpointSaver, keep: Iterable[str] = ()) -> Any:
    """A one-node graph over the agent state schema (plus the `keep` keys) that reads and writes threads back."""
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(kept_schema(keep))
    graph.add_node(READ_NODE, lambda _state: {})
    graph.add_edge(START, READ_NODE)
    graph.add_edge(READ_NODE, END)
    return graph.compile(checkpointer=checkpointer)


def stored_keys(saved: CheckpointTuple | None) -> set[str]:
    """The channels a stored checkpoint holds (none for a thread not yet written)."""
    return set(saved.checkpoint["channel_values"]) if saved is not None else set()


def thread_id_of(config: RunnableConfig) -> str:
    """The thread `config` names; a config without one raises `UnknownThreadError` saying how to name it."""
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise UnknownThreadError(
            "the config names no thread. Fix: pass {'configurable': {'thread_id': '<your thread>'}}."
        )
    return str(thread)


def read_messages(source: Any, config: RunnableConfig) -> list[BaseMessage]:
    """The checkpointed messages of the thread in `config`.

    `source` is a compiled agent or graph, a checkpointer, or a state directory
    (holding `checkpoints.sqlite`). An unknown thread raises `UnknownThreadError`.
    """
    return list(read_values(source, config, calls=False)["messages"])


def read_values(source: Any, config: RunnableConfig, *, calls: bool = True) -> dict[str, Any]:
    """The checkpointed state values of the thread in `config` (messages and private keys), the messages identified
    as the stack's layers identify them (`calls=False`: with each call id as given)."""
    if is_served(source):  # a LangGraph server's thread: read over its API
        return _identified(served_values(source, config), calls)
    thread = thread_id_of(config)
    with opened(source) as target:
        values = _graph(target).get_state(config).values
        if not _has_messages(values):
            raise _unknown(thread, known_threads(target))
        return _identified(values, calls)


async def aread_values(source: Any, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `read_values`: the same answers and errors, the checkpointer read with its async calls."""
    if is_served(source):
        return _identified(await aserved_values(source, config), True)
    if isinstance(source, str | Path):  # a state dir opens a SQLite file: do it off the loop
        return await asyncio.to_thread(read_values, source, config)
    thread = thread_id_of(config)
    values = (await _graph(source).aget_state(config)).values
    if not _has_messages(values):
        raise _unknown(thread, await aknown_threads(source))
    return _identified(values)


def _identified(values: Any, calls: bool = True) -> dict[str, Any]:
    """The values with their messages identified as the layers identify them (`core.identity`): a message without an
    id, or with another's, is found by the id ctxwarden derived for it, and a reused call id by the one the layers
    gave it, in the report and a compaction alike."""
    out = dict(values)
    if out.get("messages"):
        out["messages"] = identified(out["messages"], calls=calls)
    return out


def _has_messages(values: Any) -> bool:
    return bool(values.get("messages")) if values else False


def _unknown(thread: str, known: list[str]) -> UnknownThreadError:
    listing = ", ".join(known[:10]) + (" …" if len(known) > 10 else "") if known else "none"
    return UnknownThreadError(
        f"thread {thread!r} has no checkpointed messages here. Known threads: {listing}. "
        "Fix: pass one of those thread ids (or the state dir the agent ran with)."
    )


@contextmanager
def opened(source: Any) -> Iterator[Any]:
    """`source` itself, or for a state dir its checkpointer, closed again on leaving."""
    if not isinstance(source, str | Path):
        yield source
        return
    saver = open_state_dir(source)
    try:
        yield saver
    finally:
        saver.conn.close()


def open_state_dir(state_dir: str | Path) -> SqliteCheckpointer:
    """The checkpointer of an existing state dir; a missing one raises `UnknownThreadError` (never creates one)."""
    path = Path(state_dir) / CHECKPOINTS_FILE
    if not path.is_file():
        raise UnknownThreadError(f"no checkpoints at {path}. Fix: pass the --state-dir the agent ran with.")
    return open_checkpointer(path)


def known_threads(source: Any) -> list[str]:
    """Thread ids stored under `source` (best effort: empty when the store cannot say)."""
    saver = checkpointer_of(source)
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        return [str(row[0]) for row in rows]
    return _thread_ids(saver.list(None)) if saver is not None else []


async def aknown_threads(source: Any) -> list[str]:
    """Async twin of `known_threads`."""
    saver = checkpointer_of(source)
    if saver is None:
        return []
    if isinstance(getattr(saver, "conn", None), sqlite3.Connection):
        return await asyncio.to_thread(known_threads, saver)
    return _thread_ids([item async for item in saver.alist(None)])


def _thread_ids(items: Iterable[CheckpointTuple]) -> list[str]:
    return sorted({str(item.config["configurable"]["thread_id"]) for item in items})


def _graph(source: Any) -> Any:
    if hasattr(source, "get_state"):
        return source
    saver = checkpointer_of(source)
    if saver is None:
        raise ThreadSourceError(
            f"cannot read threads from {type(source).__name__}. Fix: pass a compiled agent, a checkpointer, "
            "or a state dir."
        )
    return reader_graph(saver)


def state_dir_of(source: Any) -> Path | None:
    """The directory of a SQLite-checkpointed source (where its `trace.sqlite` lives), if it has one."""
    if isinstance(source, str | Path):
        return Path(source)
    saver = checkpointer_of(source)
    conn = getattr(saver, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
    except sqlite3.Error:
        return None
    return Path(row[2]).parent if row and row[2] else None


__all__ = [
    "READ_NODE",
    "aknown_threads",
    "aread_values",
    "kept_schema",
    "known_threads",
    "open_state_dir",
    "opened",
    "read_messages",
    "read_values",
    "reader_graph",
    "state_dir_of",
    "stored_keys",
    "thread_id_of",
]
