"""A real SQLite checkpointer that serves both sync and async agents.

`SqliteSaver` guards one connection with a lock but refuses every async method, and
`AsyncSqliteSaver` needs a running event loop to be built. A session that calls
`invoke` and `ainvoke` on the same thread needs one saver that does both, so the
async methods here run the sync ones in a worker thread, under the saver's own lock.

A checkpoint that cannot be written (a full disk, a read-only file) ends the run with a
`CheckpointWriteError` naming the database, the thread and the cause, and saying how to
go on: SQLite rolls the failed write back, so every step saved before it is intact and
the thread resumes from there once the cause is gone.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxwarden.core.sqlite import open_shared, retry_when_locked
from ctxwarden.errors import CheckpointWriteError


class SqliteCheckpointer(SqliteSaver):
    """`SqliteSaver` whose async methods run the sync ones off the event loop, and whose write errors say what to do."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        except sqlite3.Error as exc:
            raise CheckpointWriteError(self._failed(config, exc)) from exc

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        try:
            super().put_writes(config, writes, task_id, task_path)
        except sqlite3.Error as exc:
            raise CheckpointWriteError(self._failed(config, exc)) from exc

    def _failed(self, config: RunnableConfig, exc: sqlite3.Error) -> str:
        thread = (config.get("configurable") or {}).get("thread_id")
        try:
            row = self.conn.execute("PRAGMA database_list").fetchone()
            path = row[2] if row and row[2] else "the checkpoint database"
        except sqlite3.Error:
            path = "the checkpoint database"
        full = "full" in str(exc).lower()
        cause = "the disk holding it is full" if full else f"{type(exc).__name__}: {exc}"
        return (
            f"could not save a checkpoint of thread {thread!r} to {path}: {cause} ({exc}). Every step saved before "
            f"this one is intact. Fix: {'free space on that disk' if full else 'make the file writable'} "
            "(or move the state dir), then resume the thread (Session.resume(), or agent.invoke(None, config))."
        )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        return await asyncio.to_thread(lambda: self.get_delta_channel_history(config=config, channels=channels))


def checkpointer_of(source: Any) -> BaseCheckpointSaver | None:
    """The checkpointer of a compiled agent (or the checkpointer itself); `None` when it has none."""
    if isinstance(source, BaseCheckpointSaver):
        return source
    saver = getattr(source, "checkpointer", None)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def open_checkpointer(path: str | Path) -> SqliteCheckpointer:
    """Open (creating if needed) the checkpoint database at `path`, in WAL mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = open_shared(path, busy_timeout_s=30.0)
    saver = SqliteCheckpointer(conn)
    retry_when_locked(saver.setup)
    return saver


__all__ = ["SqliteCheckpointer", "checkpointer_of", "open_checkpointer"]
