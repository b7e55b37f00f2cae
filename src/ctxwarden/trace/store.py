"""The trace: an append-only record of what happened to a thread's context.

Separate from the checkpoints and never fed back to the model: it is for people and
scorers. One row per event — sortable id, time, thread, checkpoint namespace, run,
kind, model, JSON payload. Where it lives follows the deployment, so the store is a
small protocol (`TraceStore`) with two implementations sharing the event model, the
table and the names of the migrations:

- SQLite (`trace.sqlite` under the state dir, here): the embedded default. WAL mode and
  a busy timeout let several threads and processes append at once; each write is one
  short transaction, retried when another writer holds the lock, so no event is lost to
  "database is locked". A lock held far longer than any append takes (about 20 s with the
  defaults: `busy_timeout_s` per try, `retries` retries) means something else is wrong:
  the event is given up, the run goes on.
- Postgres (`ctxwarden.trace.postgres`): the database several workers already share.

Like `pathlib.Path`, `TraceStore(target)` opens the store its target names: a file path
gives SQLite; a `postgresql://` URL, a psycopg connection or a connection pool gives
Postgres. So every reader — the /context report, the CLI, a script — opens a trace the
same way, whatever holds it.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ctxwarden.core.sqlite import open_shared, retry_when_locked
from ctxwarden.errors import TraceError
from ctxwarden.trace.chain import CHAIN_COLUMNS, ChainHead, chained, first_break, new_rows
from ctxwarden.trace.migrations import MIGRATIONS, TRIGGERS, applied, migrate
from ctxwarden.trace.totals import lifecycle_of, spend_of
from ctxwarden.trace.writer import flush_writes

T = TypeVar("T")

KINDS = (
    "model_usage",
    "tool_call",
    "model_switch",
    "context_overflow",
    "eviction",
    "tool_render",
    "context_clear",
    "context_compaction",
    "fold_held",
    "thread_deleted",
)
"""Event kinds ctxwarden writes; other kinds are accepted too."""

COLUMNS = ("id", "ts", "thread_id", "namespace", "run_id", "kind", "model", "payload")

LIFECYCLE_KINDS = ("eviction", "tool_render", "context_clear", "context_compaction")
"""The kinds `TraceStore.lifecycle` sums."""

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


# --- the protocol ---------------------------------------------------------------------
_IMPLEMENTATIONS: list[tuple[Callable[[object], bool], type[TraceStore]]] = []


class TraceStore:
    """Appends events to, and reads them from, one trace; `TraceStore(target)` opens the right store.

    A path (`str` or `Path`) opens SQLite; what another implementation registers for (a
    `postgresql://` URL, a psycopg connection or pool) opens that one. Keyword options go
    to the implementation chosen. The methods below are the protocol every implementation
    provides.
    """

    def __new__(cls, target: object = None, /, **options: Any) -> TraceStore:
        if cls is TraceStore:
            cls = next((impl for accepts, impl in _IMPLEMENTATIONS if accepts(target)), SqliteTraceStore)
        return super().__new__(cls)

    @property
    def location(self) -> str:
        """Where the events are, for messages (a path, or a URL without its password)."""
        raise NotImplementedError

    def append(self, events: TraceEvent | Iterable[TraceEvent]) -> list[TraceEvent]:
        """Append events in one transaction; returns them with their ids."""
        raise NotImplementedError

    def events(
        self,
        *,
        thread_id: str | None = None,
        kind: str | Iterable[str] | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[TraceEvent]:
        """Events in id order, filtered by thread, kind(s) and time."""
        raise NotImplementedError

    def threads(self) -> list[str]:
        """Threads that have events."""
        raise NotImplementedError

    def spend(self, thread_id: str) -> dict[str, dict[str, int]]:
        """Model calls and tokens per role (`main`, `summarizer`) for a thread, from `model_usage` events."""
        raise NotImplementedError

    def lifecycle(self, thread_id: str) -> dict[str, dict[str, int]]:
        """What the lifecycle layers did on a thread: evictions, clearing batches and folds, with their tokens."""
        raise NotImplementedError

    def verify(self) -> list[str]:
        """Check the store; returns the problems found (empty when sound).

        The hash chain is read whole, and the first row where it breaks (an edit, a
        replacement, a deletion, a reorder) is reported, naming the row and what happened.
        """
        raise NotImplementedError

    def head(self) -> ChainHead:
        """The last row appended (its position, id and hash): kept elsewhere, it shows a rewrite of the whole chain."""
        raise NotImplementedError

    def close(self) -> None:
        """Release this process's connection (reopened on next use)."""
        raise NotImplementedError


def register_store(accepts: Callable[[object], bool], implementation: type[TraceStore]) -> None:
    """Let `TraceStore(target)` open `implementation` for every target `accepts` says yes to."""
    _IMPLEMENTATIONS.append((accepts, implementation))


# --- what the implementations share -------------------------------------------------------
def batch_of(events: TraceEvent | Iterable[TraceEvent]) -> list[TraceEvent]:
    """The events to append, each with its id."""
    return [events.with_id()] if isinstance(events, TraceEvent) else [e.with_id() for e in events]


def event_of(row: Sequence[Any]) -> TraceEvent:
    """A `TraceEvent` from a row in `COLUMNS` order (payload as JSON text or already decoded)."""
    id_, ts, thread, namespace, run, kind, model, payload = row
    decoded = json.loads(payload) if isinstance(payload, str) else payload
    return TraceEvent(kind, decoded, thread, namespace, run, model, float(ts), id_)


def filters(
    placeholder: str,
    *,
    thread_id: str | None,
    kind: str | Iterable[str] | None,
    since: float | None,
) -> tuple[str, list[Any]]:
    """The `WHERE` clause (or `""`) and its arguments for `events()`, with `placeholder` as the parameter mark."""
    where: list[str] = []
    args: list[Any] = []
    if thread_id is not None:
        where.append(f"thread_id = {placeholder}")
        args.append(thread_id)
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        where.append(f"kind IN ({', '.join([placeholder] * len(kinds))})" if kinds else "FALSE")
        args.extend(kinds)
    if since is not None:
        where.append(f"ts >= {placeholder}")
        args.append(since)
    return (" WHERE " + " AND ".join(where)) if where else "", args


# --- SQLite: the embedded default ---------------------------------------------------------
class SqliteTraceStore(TraceStore):
    """The trace in one `trace.sqlite` file (see the module docstring)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 5.0, retries: int = 3) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.retries = retries
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    @property
    def location(self) -> str:
        return str(self.path)

    # --- connection -----------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """One connection per process (a forked child opens its own), migrated on first use."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = open_shared(self.path, busy_timeout_s=self.busy_timeout_s, isolation_level=None)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._retry(lambda: migrate(conn))
        except (sqlite3.Error, OSError) as exc:
            raise TraceError(f"cannot open the trace at {self.path}: {exc}") from exc
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        flush_writes()  # what this process queued goes out before its connection
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _retry(self, action: Callable[[], T]) -> T:
        return retry_when_locked(action, retries=self.retries)

    # --- writing --------------------------------------------------------------
    def append(self, events: TraceEvent | Iterable[TraceEvent]) -> list[TraceEvent]:
        batch = batch_of(events)
        rows = [
            (e.id, e.ts, e.thread_id, e.namespace, e.run_id, e.kind, e.model, json.dumps(e.payload, default=str))
            for e in batch
        ]
        columns = ", ".join((*COLUMNS, *CHAIN_COLUMNS))
        with self._lock:
            conn = self._connect()

            def write() -> None:
                conn.execute("BEGIN IMMEDIATE")  # the write lock: the head read below stays the head until COMMIT
                try:
                    seq, id_, digest = conn.execute("SELECT seq, id, hash FROM events_head").fetchone()
                    stored: list[Any] = []
                    for at in range(0, len(rows), 500):  # an id already stored: skipped if the same, else refused
                        ids = [row[0] for row in rows[at : at + 500]]
                        marks = ", ".join("?" * len(ids))
                        stored += conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events WHERE id IN ({marks})", ids)
                    links = chained(ChainHead(seq, id_, digest), new_rows(rows, stored))
                    conn.executemany(f"INSERT INTO events ({columns}) VALUES ({', '.join('?' * 11)})", links)
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
        flush_writes()
        where, args = filters("?", thread_id=thread_id, kind=kind, since=since)
        sql = f"SELECT {', '.join(COLUMNS)} FROM events{where} ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._connect().execute(sql, args).fetchall()
        return [event_of(row) for row in rows]

    def threads(self) -> list[str]:
        flush_writes()
        with self._lock:
            rows = self._connect().execute("SELECT DISTINCT thread_id FROM events WHERE thread_id IS NOT NULL")
            return sorted(row[0] for row in rows)

    def spend(self, thread_id: str) -> dict[str, dict[str, int]]:
        flush_writes()
        sql = """
            SELECT COALESCE(json_extract(payload, '$.role'), 'main'), COUNT(*),
                   SUM(json_extract(payload, '$.input_tokens')), SUM(json_extract(payload, '$.output_tokens')),
                   SUM(json_extract(payload, '$.cached_input_tokens'))
            FROM events WHERE thread_id = ? AND kind = 'model_usage' GROUP BY 1 ORDER BY 1
        """
        with self._lock:
            rows = self._connect().execute(sql, (thread_id,)).fetchall()
        return spend_of(rows)

    def lifecycle(self, thread_id: str) -> dict[str, dict[str, int]]:
        flush_writes()
        sql = f"""
            SELECT kind, COUNT(*),
                   SUM(COALESCE(json_extract(payload, '$.tokens'), 0)),
                   SUM(COALESCE(json_extract(payload, '$.freed'), 0))
            FROM events
            WHERE thread_id = ? AND kind IN ({", ".join(f"'{k}'" for k in LIFECYCLE_KINDS)})
              AND COALESCE(json_extract(payload, '$.ok'), 1) = 1
            GROUP BY kind
        """
        with self._lock:
            rows = self._connect().execute(sql, (thread_id,)).fetchall()
        return lifecycle_of(rows)

    def verify(self) -> list[str]:
        flush_writes()
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
            problems.extend(f"append-only trigger {t} is missing" for t in TRIGGERS if t not in triggers)
            bad_json = conn.execute("SELECT COUNT(*) FROM events WHERE NOT json_valid(payload)").fetchone()[0]
            if bad_json:
                problems.append(f"{bad_json} events have a payload that is not JSON")
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                problems.append(f"journal_mode is {mode}, expected wal")
            problems.extend(self._chain_problems(conn))
        return problems

    def _chain_problems(self, conn: sqlite3.Connection) -> list[str]:
        problems = []
        loose = conn.execute("SELECT id FROM events WHERE seq IS NULL ORDER BY id LIMIT 1").fetchone()
        if loose is not None:
            problems.append(f"row {loose[0]!r} has no place in the chain (no seq): inserted around the chain")
        kept = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events_head'").fetchone()
        head = conn.execute("SELECT seq, id, hash FROM events_head").fetchone() if kept else None
        rows = conn.execute(
            f"SELECT {', '.join((*CHAIN_COLUMNS, *COLUMNS))} FROM events WHERE seq IS NOT NULL ORDER BY seq"
        )
        broken = first_break(rows, None if head is None else ChainHead(*head))
        if broken is not None:
            problems.append(f"hash chain broken: {broken}")
        return problems

    def head(self) -> ChainHead:
        flush_writes()
        with self._lock:
            row = self._connect().execute("SELECT seq, id, hash FROM events_head").fetchone()
        if row is None:
            raise TraceError(f"the trace at {self.path} has lost its head record (events_head): it was deleted")
        return ChainHead(*row)


__all__ = [
    "COLUMNS",
    "KINDS",
    "LIFECYCLE_KINDS",
    "ChainHead",
    "SqliteTraceStore",
    "TraceError",
    "TraceEvent",
    "TraceStore",
    "batch_of",
    "event_of",
    "filters",
    "new_event_id",
    "register_store",
]
