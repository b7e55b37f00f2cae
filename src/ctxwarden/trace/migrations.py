"""Named schema migrations for `trace.sqlite`, each applied once and recorded in `_migrations`.

A trace outlives the code that wrote it, so the schema only ever moves forward through
named steps; opening an older file applies the steps it lacks, inside one transaction
each. Append-only is the database's rule, not a convention: triggers refuse UPDATE and
DELETE on `events`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    """Register `fn` as the next migration, under its function name."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_events(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE events (
            id TEXT PRIMARY KEY,
            ts REAL NOT NULL,
            thread_id TEXT,
            namespace TEXT NOT NULL DEFAULT '',
            run_id TEXT,
            kind TEXT NOT NULL,
            model TEXT,
            payload TEXT NOT NULL CHECK (json_valid(payload))
        )
        """
    )
    db.execute("CREATE INDEX events_thread_ts ON events (thread_id, ts)")
    db.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
    db.execute("CREATE INDEX events_ts ON events (ts)")


@migration
def m002_append_only(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'trace events are append-only: UPDATE refused'); END
        """
    )
    db.execute(
        """
        CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'trace events are append-only: DELETE refused'); END
        """
    )


def applied(db: sqlite3.Connection) -> list[str]:
    """Names of the migrations this database has, in the order applied."""
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'").fetchone()
    if not exists:
        return []
    return [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY applied_at, rowid")]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every missing migration, each in its own transaction; return the names applied now.

    Safe when several processes open a new file at once: the write lock is taken before
    the applied list is read, so each step runs exactly once.
    """
    done_now = []
    for name, step in MIGRATIONS:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            if name not in applied(db):
                step(db)
                db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
                done_now.append(name)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return done_now


__all__ = ["MIGRATIONS", "applied", "migrate"]
