"""The trace in Postgres, for deployments whose workers share one database.

Several workers (processes, machines) run threads of one agent; any of them may resume a
thread another started. A SQLite file beside one of them cannot be their shared record,
so the trace goes where the checkpoints already are: the same events, the same table and
the same named migrations as `trace.sqlite`, in the `ctxwarden` schema of the
deployment's Postgres. Append-only is enforced by triggers (UPDATE, DELETE and TRUNCATE
are refused).

It is chosen by what `TraceStore` is given: a `postgresql://` URL (one connection per
process, opened on first use and reopened after a fork or a lost connection), a psycopg
connection (shared under a lock; yours to close), or a psycopg connection pool (one
connection per append). Each append is one transaction and retried on a lost
connection; an event id already stored is skipped (`ON CONFLICT DO NOTHING`), so a retry
after a commit whose answer was lost never stores an event twice.

Postgres text cannot hold the NUL character: in every text column and in the payload a
NUL is stored as U+FFFD, and the thread filters of the readers map it the same way.
psycopg is imported on first use only, so ctxwarden imports without the `postgres` extra.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ctxwarden.errors import TraceError
from ctxwarden.trace.chain import CHAIN_COLUMNS, ChainHead, chained, first_break, new_rows
from ctxwarden.trace.postgres_migrations import (
    DEFAULT_SCHEMA,
    HEAD_TRIGGERS,
    MIGRATIONS,
    TRIGGERS,
    applied,
    checked_schema,
    migrate,
)
from ctxwarden.trace.store import (
    COLUMNS,
    LIFECYCLE_KINDS,
    TraceEvent,
    TraceStore,
    batch_of,
    event_of,
    filters,
    register_store,
)
from ctxwarden.trace.totals import lifecycle_of, spend_of
from ctxwarden.trace.writer import flush_writes

if TYPE_CHECKING:
    from psycopg import Connection

URL_SCHEMES = ("postgresql://", "postgres://")
EXTRA_HINT = 'Fix: pip install "ctxwarden[postgres]" (psycopg with its binary and pool packages).'
NUL, NUL_STAND_IN = "\x00", "\ufffd"


def is_postgres_target(target: object) -> bool:
    """A `postgresql://` URL, or a psycopg connection or connection pool."""
    if isinstance(target, str):
        return target.startswith(URL_SCHEMES)
    module = type(target).__module__
    return module == "psycopg" or module.startswith(("psycopg.", "psycopg_pool"))


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _text(value: str | None) -> str | None:
    return value.replace(NUL, NUL_STAND_IN) if value is not None and NUL in value else value


def _clean(value: Any) -> Any:
    """`value` (decoded JSON) with NUL characters in strings and keys replaced."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _payload(event: TraceEvent) -> str:
    text = json.dumps(event.payload, default=str)
    return json.dumps(_clean(json.loads(text))) if "\\u0000" in text else text


def _number(field: str) -> str:
    """SQL for a payload field as a number (NULL when it is not one)."""
    return f"CASE WHEN jsonb_typeof(payload->'{field}') = 'number' THEN (payload->>'{field}')::numeric END"


class PostgresTraceStore(TraceStore):
    """The trace in a Postgres database (see the module docstring)."""

    def __init__(
        self,
        target: Any,
        *,
        schema: str = DEFAULT_SCHEMA,
        connect_timeout_s: float = 10.0,
        retries: int = 3,
    ) -> None:
        if not is_postgres_target(target):
            raise TraceError(
                f"{target!r} does not name a Postgres trace. "
                "Fix: pass a postgresql:// URL, a psycopg connection or a psycopg_pool.ConnectionPool."
            )
        self.schema = checked_schema(schema)
        self.target = target
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self._lock = threading.Lock()
        self._conn: Connection[Any] | None = None
        self._pid = -1
        self._migrated_in = -1
        self._pool = type(target).__module__.startswith("psycopg_pool")

    @property
    def location(self) -> str:
        if isinstance(self.target, str):
            return redacted(self.target)
        info = getattr(self.target, "info", None)  # a connection
        if info is not None:
            return f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}"
        return f"the pool {getattr(self.target, 'name', '')!s}".rstrip()

    # --- connections ----------------------------------------------------------
    def _open(self) -> Connection[Any]:
        try:
            import psycopg
        except ImportError:
            raise TraceError(f"the trace at {self.location} needs psycopg. {EXTRA_HINT}") from None
        return psycopg.connect(self.target, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s)))

    @contextmanager
    def _connection(self) -> Iterator[Connection[Any]]:
        """A connection for one operation, migrated once per process."""
        if self._pool:
            with self.target.connection(timeout=self.connect_timeout_s) as conn:
                self._migrate(conn)
                yield conn
            return
        with self._lock:
            if isinstance(self.target, str):
                if self._conn is None or self._conn.closed or self._pid != os.getpid():
                    self._conn, self._pid = self._open(), os.getpid()
                conn = self._conn
            else:
                conn = self.target
            self._migrate(conn)
            yield conn

    def _migrate(self, conn: Connection[Any]) -> None:
        if self._migrated_in != os.getpid():
            migrate(conn, self.schema)
            self._migrated_in = os.getpid()

    def _run(self, action: Any) -> Any:
        """`action(cursor)` in one transaction, retried on a lost connection."""
        try:
            import psycopg
            from psycopg.rows import tuple_row
        except ImportError:
            raise TraceError(f"the trace at {self.location} needs psycopg. {EXTRA_HINT}") from None
        for attempt in range(self.retries + 1):
            try:
                with self._connection() as conn, conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                    return action(cur)
            except psycopg.OperationalError as exc:
                self._drop()
                if attempt == self.retries:
                    raise TraceError(f"cannot reach the trace at {self.location}: {exc}") from exc
                time.sleep(min(1.0, 0.05 * 2**attempt) * (0.5 + random.random()))
            except psycopg.Error as exc:
                raise TraceError(f"the trace at {self.location} refused: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _drop(self) -> None:
        """Forget a connection this store opened (the next operation opens a new one)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        flush_writes()  # what this process queued goes out before its connection
        self._drop()

    def __del__(self) -> None:
        """A store nobody closed (an agent's recorder) closes the connection it opened, quietly."""
        conn = getattr(self, "_conn", None)
        if conn is not None and getattr(self, "_pid", -1) == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    # --- writing --------------------------------------------------------------
    def append(self, events: TraceEvent | Iterable[TraceEvent]) -> list[TraceEvent]:
        batch = batch_of(events)
        rows = [
            (e.id, e.ts, *(_text(v) for v in (e.thread_id, e.namespace, e.run_id, e.kind, e.model)), _payload(e))
            for e in batch
        ]
        if not rows:
            return batch
        columns = ", ".join((*COLUMNS, *CHAIN_COLUMNS))
        schema = self.schema

        def write(cur: Any) -> None:
            # the head's row lock is the chain's: another appender waits here until this one commits;
            # the same round trip prints the payloads as jsonb (what is hashed) and finds ids already stored
            cur.execute(
                f"SELECT h.seq, h.id, h.hash, "
                f"ARRAY(SELECT p::jsonb::text FROM unnest(%s::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n), "
                f"EXISTS (SELECT 1 FROM {schema}.events WHERE id = ANY(%s)) FROM {schema}.events_head h FOR UPDATE",
                ([row[-1] for row in rows], [row[0] for row in rows]),
            )
            found = cur.fetchone()
            if found is None:
                raise TraceError(f"the trace at {self.location} has lost its head record ({schema}.events_head)")
            seq, id_, digest, payloads, repeated = found
            canonical = [(*row[:-1], text) for row, text in zip(rows, payloads, strict=True)]
            stored = []
            if repeated:  # a retried append, or an id reused: compared column by column
                cur.execute(
                    f"SELECT id, ts, thread_id, namespace, run_id, kind, model, payload::text "
                    f"FROM {schema}.events WHERE id = ANY(%s)",
                    ([row[0] for row in rows],),
                )
                stored = cur.fetchall()
            links = chained(ChainHead(seq, id_, digest), new_rows(canonical, stored))
            marks = ", ".join(["%s"] * 7 + ["%s::jsonb"] + ["%s"] * 3)
            insert = f"INSERT INTO {schema}.events ({columns}) VALUES ({marks})"
            if len(links) == 1:  # the usual append: one statement, no pipeline to set up
                cur.execute(insert, links[0])
            elif links:
                cur.executemany(insert, links)

        self._run(write)
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
        where, args = filters("%s", thread_id=_text(thread_id), kind=kind, since=since)
        sql = f"SELECT {', '.join(COLUMNS)} FROM {self.schema}.events{where} ORDER BY id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._run(lambda cur: cur.execute(sql, args).fetchall())
        return [event_of(row) for row in rows]

    def threads(self) -> list[str]:
        flush_writes()
        sql = f"SELECT DISTINCT thread_id FROM {self.schema}.events WHERE thread_id IS NOT NULL"
        return sorted(str(row[0]) for row in self._run(lambda cur: cur.execute(sql).fetchall()))

    def spend(self, thread_id: str) -> dict[str, dict[str, int]]:
        flush_writes()
        sql = f"""
            SELECT COALESCE(payload->>'role', 'main'), COUNT(*), SUM({_number("input_tokens")}),
                   SUM({_number("output_tokens")}), SUM({_number("cached_input_tokens")})
            FROM {self.schema}.events WHERE thread_id = %s AND kind = 'model_usage'
            GROUP BY 1 ORDER BY 1
        """
        return spend_of(self._run(lambda cur: cur.execute(sql, (_text(thread_id),)).fetchall()))

    def lifecycle(self, thread_id: str) -> dict[str, dict[str, int]]:
        flush_writes()
        sql = f"""
            SELECT kind, COUNT(*), SUM(COALESCE({_number("tokens")}, 0)), SUM(COALESCE({_number("freed")}, 0))
            FROM {self.schema}.events
            WHERE thread_id = %s AND kind = ANY(%s)
              AND COALESCE(payload->'ok', 'true'::jsonb) IN ('true'::jsonb, '1'::jsonb)
            GROUP BY kind
        """
        rows = self._run(lambda cur: cur.execute(sql, (_text(thread_id), list(LIFECYCLE_KINDS))).fetchall())
        return lifecycle_of(rows)

    def verify(self) -> list[str]:
        flush_writes()

        def check(cur: Any) -> list[str]:
            problems: list[str] = []
            have = applied(cur, self.schema)
            missing = [name for name, _ in MIGRATIONS if name not in have]
            if missing:
                problems.append(f"migrations not applied: {', '.join(missing)}")
            cur.execute(
                "SELECT tgname FROM pg_trigger "
                "WHERE tgrelid IN (to_regclass(%s), to_regclass(%s)) AND NOT tgisinternal AND tgenabled <> 'D'",
                (f"{self.schema}.events", f"{self.schema}.events_head"),
            )
            enabled = {row[0] for row in cur.fetchall()}
            problems.extend(
                f"append-only trigger {t} is missing or disabled"
                for t in (*TRIGGERS, *HEAD_TRIGGERS)
                if t not in enabled
            )
            cur.execute(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'events' AND column_name = 'payload'",
                (self.schema,),
            )
            row = cur.fetchone()
            if row is None or row[0] != "jsonb":
                problems.append(f"payload column is {row[0] if row else 'missing'}, expected jsonb")
            cur.execute(f"SELECT id FROM {self.schema}.events WHERE seq IS NULL ORDER BY id LIMIT 1")
            loose = cur.fetchone()
            if loose is not None:
                problems.append(f"row {loose[0]!r} has no place in the chain (no seq): inserted around the chain")
            cur.execute("SELECT to_regclass(%s)", (f"{self.schema}.events_head",))
            kept = cur.fetchone()[0] is not None
            head = cur.execute(f"SELECT seq, id, hash FROM {self.schema}.events_head").fetchone() if kept else None
            columns = ", ".join((*CHAIN_COLUMNS, *COLUMNS[:-1], "payload::text"))
            rows = cur.stream(f"SELECT {columns} FROM {self.schema}.events WHERE seq IS NOT NULL ORDER BY seq")
            broken = first_break(rows, None if head is None else ChainHead(*head))
            if broken is not None:
                problems.append(f"hash chain broken: {broken}")
            return problems

        result: list[str] = self._run(check)
        return result

    def head(self) -> ChainHead:
        flush_writes()
        row = self._run(lambda cur: cur.execute(f"SELECT seq, id, hash FROM {self.schema}.events_head").fetchone())
        if row is None:
            raise TraceError(f"the trace at {self.location} has lost its head record ({self.schema}.events_head)")
        return ChainHead(*row)


register_store(is_postgres_target, PostgresTraceStore)

__all__ = ["URL_SCHEMES", "PostgresTraceStore", "is_postgres_target", "redacted"]
