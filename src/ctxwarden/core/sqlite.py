"""SQLite files that several threads and processes open at once.

The checkpoints and the trace live in SQLite files under one state dir, shared by every
thread of every process that uses it. WAL mode and a busy timeout let them read and
write together, but not every lock waits: switching a file to WAL, or two connections
that each hold a read lock and both ask to write, get "database is locked" at once,
without the busy timeout ever running. So the statements that can meet that race are
retried here, after a short randomized pause that grows with each try.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

LOCK_RETRIES = 8
"""Tries after the first: the pauses add up to about 4 s before the error is raised."""


def retry_when_locked(action: Callable[[], T], *, retries: int = LOCK_RETRIES) -> T:
    """`action()`, tried again while SQLite answers that the database is locked or busy."""
    for attempt in range(retries + 1):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == retries:
                raise
            time.sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


def open_shared(path: str | Path, *, busy_timeout_s: float, **connect: Any) -> sqlite3.Connection:
    """A connection to `path` in WAL mode with a busy timeout, opened safely beside other writers."""
    conn: sqlite3.Connection = sqlite3.connect(str(path), timeout=busy_timeout_s, check_same_thread=False, **connect)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        retry_when_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))
    except BaseException:
        conn.close()
        raise
    return conn


__all__ = ["LOCK_RETRIES", "open_shared", "retry_when_locked"]
