"""Named schema migrations for the trace in Postgres: the same steps, by the same names, as `trace.sqlite`.

A trace outlives the code that wrote it, so its schema moves only forward through named
steps recorded in `_migrations`; a Postgres trace and a SQLite one list the same names
(`m001_events`, `m002_append_only`, `m003_hash_chain`), so a reader knows both hold the
same table. The table
lives in its own schema (`ctxwarden` by default), beside whatever else the deployment's
database holds (LangGraph's checkpoints and store among them), and never collides with a
table of the application's.

Append-only is the database's rule here too: triggers refuse UPDATE, DELETE and TRUNCATE
on `events` (TRUNCATE skips row triggers, so it has its own), and an INSERT of an id
already stored (so `INSERT ... ON CONFLICT DO UPDATE` too). `m003_hash_chain` chains the
rows, the ones already there included, in id order (see `ctxwarden.trace.chain`). Several workers may open a
new database at once: a transaction-scoped advisory lock makes each step run exactly once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxwarden.errors import TraceError
from ctxwarden.trace.chain import GENESIS, ChainHead, chained

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

Migration = Callable[["Cursor[Any]", str], None]
"""A step: given a cursor inside the step's transaction and the (validated) schema name."""

MIGRATIONS: list[tuple[str, Migration]] = []

DEFAULT_SCHEMA = "ctxwarden"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

TRIGGERS = (
    "events_refuse_update",
    "events_refuse_delete",
    "events_refuse_truncate",
    "events_refuse_insert",
    "events_chain_advance",
)
"""The triggers on `events` that keep it append-only and its chain whole."""

HEAD_TRIGGERS = (
    "events_head_refuse_insert",
    "events_head_refuse_update",
    "events_head_refuse_delete",
    "events_head_refuse_truncate",
)
"""The triggers on `events_head` that let it only move to the row appended last."""

_CHAIN_BATCH = 10_000


def checked_schema(schema: str) -> str:
    """`schema` when it is a plain lower-case Postgres identifier, else a `TraceError` naming the fix."""
    if not _SCHEMA_NAME.match(schema):
        raise TraceError(
            f"trace schema {schema!r} is not a plain Postgres identifier. "
            "Fix: use lower-case letters, digits and underscores, starting with a letter (e.g. 'ctxwarden')."
        )
    return schema


def migration(fn: Migration) -> Migration:
    """Register `fn` as the next migration, under its function name."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_events(cur: Cursor[Any], schema: str) -> None:
    cur.execute(
        f"""
        CREATE TABLE {schema}.events (
            id TEXT COLLATE "C" PRIMARY KEY,
            ts DOUBLE PRECISION NOT NULL,
            thread_id TEXT,
            namespace TEXT NOT NULL DEFAULT '',
            run_id TEXT,
            kind TEXT NOT NULL,
            model TEXT,
            payload JSONB NOT NULL
        )
        """
    )
    cur.execute(f"CREATE INDEX events_thread_ts ON {schema}.events (thread_id, ts)")
    cur.execute(f"CREATE INDEX events_kind_ts ON {schema}.events (kind, ts)")
    cur.execute(f"CREATE INDEX events_ts ON {schema}.events (ts)")


@migration
def m002_append_only(cur: Cursor[Any], schema: str) -> None:
    cur.execute(
        f"""
        CREATE FUNCTION {schema}.events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'trace events are append-only: % refused', TG_OP;
        END
        $$
        """
    )
    for operation, scope in (("UPDATE", "ROW"), ("DELETE", "ROW"), ("TRUNCATE", "STATEMENT")):
        cur.execute(
            f"CREATE TRIGGER events_refuse_{operation.lower()} BEFORE {operation} ON {schema}.events "
            f"FOR EACH {scope} EXECUTE FUNCTION {schema}.events_refuse_change()"
        )


@migration
def m003_hash_chain(cur: Cursor[Any], schema: str) -> None:
    """Chain every row (existing ones in id order), keep the head, and refuse REPLACE and unchained inserts."""
    cur.execute(f"ALTER TABLE {schema}.events ADD COLUMN seq BIGINT, ADD COLUMN prev_hash TEXT, ADD COLUMN hash TEXT")
    cur.execute(f"ALTER TABLE {schema}.events DISABLE TRIGGER events_refuse_update")  # enabled below, same transaction
    head, after = ChainHead(0, "", GENESIS), None
    while True:
        cur.execute(
            "SELECT id, ts, thread_id, namespace, run_id, kind, model, payload::text "
            f"FROM {schema}.events WHERE %s::text IS NULL OR id > %s ORDER BY id LIMIT {_CHAIN_BATCH}",
            (after, after),
        )
        links = chained(head, cur.fetchall())
        if not links:
            break
        cur.executemany(
            f"UPDATE {schema}.events SET seq = %s, prev_hash = %s, hash = %s WHERE id = %s",
            [(*r[8:], r[0]) for r in links],
        )
        head, after = ChainHead(links[-1][8], links[-1][0], links[-1][10]), links[-1][0]
    cur.execute(f"ALTER TABLE {schema}.events ENABLE TRIGGER events_refuse_update")
    cur.execute(f"CREATE UNIQUE INDEX events_seq ON {schema}.events (seq)")
    cur.execute(
        f"""CREATE TABLE {schema}.events_head (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        seq BIGINT NOT NULL, id TEXT COLLATE "C" NOT NULL, hash TEXT NOT NULL)"""
    )
    cur.execute(f"INSERT INTO {schema}.events_head (seq, id, hash) VALUES (%s, %s, %s)", (head.seq, head.id, head.hash))
    cur.execute(
        f"""
        CREATE FUNCTION {schema}.events_check_link() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE head RECORD;
        BEGIN
            IF EXISTS (SELECT 1 FROM {schema}.events WHERE id = NEW.id) THEN
                RAISE EXCEPTION 'trace events are append-only: event id % is already stored (REPLACE refused)', NEW.id;
            END IF;
            SELECT seq, hash INTO head FROM {schema}.events_head;
            IF NEW.hash IS NULL OR NEW.seq IS DISTINCT FROM head.seq + 1
               OR NEW.prev_hash IS DISTINCT FROM head.hash THEN
                RAISE EXCEPTION 'trace events are a hash chain: a new row must follow the head (seq, prev_hash)';
            END IF;
            RETURN NEW;
        END
        $$
        """
    )
    cur.execute(
        f"""
        CREATE FUNCTION {schema}.events_advance_head() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE {schema}.events_head SET seq = NEW.seq, id = NEW.id, hash = NEW.hash;
            RETURN NULL;
        END
        $$
        """
    )
    cur.execute(
        f"""
        CREATE FUNCTION {schema}.events_head_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND NEW.one = OLD.one AND NEW.seq = OLD.seq + 1 AND EXISTS (
                SELECT 1 FROM {schema}.events WHERE seq = NEW.seq AND id = NEW.id AND hash = NEW.hash
            ) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'the trace head only moves to the row appended last: % refused', TG_OP;
        END
        $$
        """
    )
    cur.execute(
        f"CREATE TRIGGER events_refuse_insert BEFORE INSERT ON {schema}.events "
        f"FOR EACH ROW EXECUTE FUNCTION {schema}.events_check_link()"
    )
    cur.execute(
        f"CREATE TRIGGER events_chain_advance AFTER INSERT ON {schema}.events "
        f"FOR EACH ROW EXECUTE FUNCTION {schema}.events_advance_head()"
    )
    for operation in ("INSERT", "UPDATE", "DELETE"):
        cur.execute(
            f"CREATE TRIGGER events_head_refuse_{operation.lower()} BEFORE {operation} ON {schema}.events_head "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.events_head_guard()"
        )
    cur.execute(
        f"CREATE TRIGGER events_head_refuse_truncate BEFORE TRUNCATE ON {schema}.events_head "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {schema}.events_head_guard()"
    )


def applied(cur: Cursor[Any], schema: str) -> list[str]:
    """Names of the migrations this database's trace schema has, in the order applied."""
    cur.execute("SELECT to_regclass(%s)", (f"{schema}._migrations",))
    row = cur.fetchone()
    if row is None or row[0] is None:
        return []
    cur.execute(f"SELECT name FROM {schema}._migrations ORDER BY applied_at, name")
    return [str(r[0]) for r in cur.fetchall()]


def migrate(conn: Connection[Any], schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Apply every missing migration, each in its own transaction; return the names applied now.

    A database that already has them all is only read (a reader with no right to create
    anything can open it). Otherwise each step takes an advisory lock first, so workers
    opening a new database at once apply each step exactly once.
    """
    from psycopg.rows import tuple_row  # psycopg is an optional dependency, needed only here

    schema = checked_schema(schema)
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        have = applied(cur, schema)
    if all(name in have for name, _ in MIGRATIONS):
        return []
    done_now = []
    for name, step in MIGRATIONS:
        with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ctxwarden.trace:{schema}",))
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {schema}._migrations "
                "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            if name not in applied(cur, schema):
                step(cur, schema)
                cur.execute(f"INSERT INTO {schema}._migrations (name, applied_at) VALUES (%s, %s)", (name, time.time()))
                done_now.append(name)
    return done_now


__all__ = ["DEFAULT_SCHEMA", "HEAD_TRIGGERS", "MIGRATIONS", "TRIGGERS", "applied", "checked_schema", "migrate"]
