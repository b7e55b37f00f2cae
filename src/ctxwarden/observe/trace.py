"""`trace.sqlite`: an append-only record of what happened to a thread's context.

Separate from the checkpoints and never fed back to the model: it is for people and
scorers. One row per event — sortable id, time, thread, checkpoint namespace, run,
kind, model, JSON payload. WAL mode and a busy timeout let several threads and
processes append at once; each write is one short transaction, retried when another
writer holds the lock, so no event is lost to "database is locked". A lock held far
longer than any append takes (about 20 s with the defaults: `busy_timeout_s` per try,
`retries` retries) means something else is wrong: the event is given up, the run goes on.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwarden.errors import CtxwardenError
from ctxwarden.observe.migrations import MIGRATIONS, applied, migrate

TRACE_FILE = "trace.sqlite"

KINDS = (
    "model_usage",
    "tool_call",
    "model_switch",
    "context_overflow",
    "eviction",
    "context_clear",
    "context_compaction",
)
"""Event kinds ctxwarden writes; other kinds are accepted too."""

COLUMNS = ("id", "ts", "thread_id", "namespace", "run_id", "kind", "model", "payload")

_sequence = itertools.count()


def new_event_id(ts: float | None = None) -> str:
    """A lexicographically sortable id: nanosecond time, then a per-process sequence, then noise."""
    ns = time.time_ns() if ts is None else int(ts * 1e9)
    return f"{ns:019d}-{next(_sequence) % 16**6:06x}-{os.getpid() % 16**4:04x}{random.getrandbits(16):04x}"


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One row of the trace."""

    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    namespace: str = ""
    run_id: str | None = None
    model: str | None = None
    ts: float = field(default_factory=time.time)
    id: str = ""

    def with_id(self) -> TraceEvent:
        """This event with an id assigned (kept when it already has one)."""
        if self.id:
            return self
        return TraceEvent(
            self.kind, self.payload, self.thread_id, self.namespace, self.run_id, self.model, self.ts, new_event_id()
        )


class TraceError(CtxwardenError):
    """The trace file cannot be opened or fails verification."""


class TraceStore:
    """Appends events to, and reads them from, one `trace.sqlite` file."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 5.0, retries: int = 3) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.retries = retries
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    # --- connection -----------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """One connection per process (a forked child opens its own), migrated on first use."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            conn.execute("PRAGMA synchronous = NORMAL")
            self._retry(lambda: migrate(conn))
        except (sqlite3.Error, OSError) as exc:
            raise TraceError(f"cannot open the trace at {self.path}: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close this process's connection (reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _retry(self, action: Any) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == self.retries:
                    raise
                time.sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    # --- writing --------------------------------------------------------------
    def append(self, events: TraceEvent | Iterable[TraceEvent]) -> list[TraceEvent]:
        """Append events in one transaction; returns them with their ids."""
        batch = [events.with_id()] if isinstance(events, TraceEvent) else [e.with_id() for e in events]
        rows = [
            (e.id, e.ts, e.thread_id, e.namespace, e.run_id, e.kind, e.model, json.dumps(e.payload, default=str))
            for e in batch
        ]
        with self._lock:
            conn = self._connect()

            def write() -> None:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # SQLite already rolled back on a full disk: keep its error, not ours
                        conn.execute("ROLLBACK")
                    raise

            self._retry(write)
        return batch

    # --- reading --------------------------------------------------------------
    def events(
        self,
        *,
        thread_id: str | None = None,
        kind: str | Iterable[str] | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[TraceEvent]:
        """Events in id order, filtered by thread, kind(s) and time."""
        where: list[str] = []
        args: list[Any] = []
        if thread_id is not None:
            where.append("thread_id = ?")
            args.append(thread_id)
        if kind is not None:
            kinds = [kind] if isinstance(kind, str) else list(kind)
            where.append(f"kind IN ({', '.join('?' * len(kinds))})")
            args.extend(kinds)
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        sql = f"SELECT {', '.join(COLUMNS)} FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._connect().execute(sql, args).fetchall()
        return [
            TraceEvent(kind=k, payload=json.loads(p), thread_id=t, namespace=ns, run_id=r, model=m, ts=ts, id=i)
            for i, ts, t, ns, r, k, m, p in rows
        ]

    def threads(self) -> list[str]:
        """Threads that have events."""
        with self._lock:
            rows = self._connect().execute("SELECT DISTINCT thread_id FROM events WHERE thread_id IS NOT NULL")
            return sorted(row[0] for row in rows)

    def spend(self, thread_id: str) -> dict[str, dict[str, int]]:
        """Model calls and tokens per role (`main`, `summarizer`) for a thread, from `model_usage` events."""
        sql = """
            SELECT json_extract(payload, '$.role'), COUNT(*),
                   SUM(json_extract(payload, '$.input_tokens')), SUM(json_extract(payload, '$.output_tokens')),
                   SUM(json_extract(payload, '$.cached_input_tokens'))
            FROM events WHERE thread_id = ? AND kind = 'model_usage' GROUP BY 1 ORDER BY 1
        """
        with self._lock:
            rows = self._connect().execute(sql, (thread_id,)).fetchall()
        return {
            str(role or "main"): {
                "calls": int(calls),
                "input_tokens": int(inp or 0),
                "output_tokens": int(out or 0),
                "cached_input_tokens": int(cached or 0),
            }
            for role, calls, inp, out, cached in rows
        }

    def lifecycle(self, thread_id: str) -> dict[str, dict[str, int]]:
        """What the lifecycle layers did on a thread: evictions, clearing batches and folds, with their tokens."""
        sql = """
            SELECT kind, COUNT(*),
                   SUM(COALESCE(json_extract(payload, '$.tokens'), 0)),
                   SUM(COALESCE(json_extract(payload, '$.freed'), 0))
            FROM events
            WHERE thread_id = ? AND kind IN ('eviction', 'context_clear', 'context_compaction')
              AND COALESCE(json_extract(payload, '$.ok'), 1) = 1
            GROUP BY kind
        """
        with self._lock:
            rows = self._connect().execute(sql, (thread_id,)).fetchall()
        return {
            kind: {"count": int(n), "tokens": int(tokens or 0), "freed": int(freed or 0)}
            for kind, n, tokens, freed in rows
        }

    def verify(self) -> list[str]:
        """Check the store; returns the problems found (empty when sound)."""
        problems: list[str] = []
        with self._lock:
            conn = self._connect()
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if integrity != "ok":
                problems.append(f"integrity_check: {integrity}")
            missing = [name for name, _ in MIGRATIONS if name not in applied(conn)]
            if missing:
                problems.append(f"migrations not applied: {', '.join(missing)}")
            triggers = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
            for trigger in ("events_refuse_update", "events_refuse_delete"):
                if trigger not in triggers:
                    problems.append(f"append-only trigger {trigger} is missing")
            bad_json = conn.execute("SELECT COUNT(*) FROM events WHERE NOT json_valid(payload)").fetchone()[0]
            if bad_json:
                problems.append(f"{bad_json} events have a payload that is not JSON")
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                problems.append(f"journal_mode is {mode}, expected wal")
        return problems


__all__ = ["COLUMNS", "KINDS", "TRACE_FILE", "TraceError", "TraceEvent", "TraceStore", "new_event_id"]
