"""Named schema migrations for the trace in Postgres: the same steps, by the same names, as `trace.sqlite`.

A trace outlives the code that wrote it, so its schema moves only forward through named
steps recorded in `_migrations`; a Postgres trace and a SQLite one list the same names
(`m001_events`, `m002_append_only`), so a reader knows both hold the same table. The table
lives in its own schema (`ctxwarden` by default), beside whatever else the deployment's
database holds (LangGraph's checkpoints and store among them), and never collides with a
table of the application's.

Append-only is the database's rule here too: triggers refuse UPDATE, DELETE and TRUNCATE
on `events` (TRUNCATE skips row triggers, so it has its own). Several workers may open a
new database at once: a transaction-scoped advisory lock makes each step run exactly once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxwarden.errors import TraceError

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

Migration = Callable[["Cursor[Any]", str], None]
"""A step: given a cursor inside the step's transaction and the (validated) schema name."""

MIGRATIONS: list[tuple[str, Migration]] = []

DEFAULT_SCHEMA = "ctxwarden"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

TRIGGERS = ("events_refuse_update", "events_refuse_delete", "events_refuse_truncate")
"""The triggers that make `events` append-only."""


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


__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "TRIGGERS", "applied", "checked_schema", "migrate"]
