"""Named schema migrations for `trace.sqlite`, each applied once and recorded in `_migrations`.

A trace outlives the code that wrote it, so the schema only ever moves forward through
named steps; opening an older file applies the steps it lacks, inside one transaction
each. Append-only is the database's rule, not a convention: triggers refuse UPDATE,
DELETE and REPLACE on `events` (REPLACE deletes the old row by conflict resolution, which
fires no delete trigger, so a BEFORE INSERT trigger refuses an id already stored), and
`m003_hash_chain` chains the rows (see `ctxwarden.trace.chain`), the ones already there
included, in id order.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from ctxwarden.trace.chain import GENESIS, ChainHead, chained

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


REFUSE_UPDATE = """
    CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'trace events are append-only: UPDATE refused'); END
"""

TRIGGERS = (
    "events_refuse_update",
    "events_refuse_delete",
    "events_refuse_insert",
    "events_chain_advance",
    "events_head_refuse_insert",
    "events_head_refuse_update",
    "events_head_refuse_delete",
)
"""The triggers that keep `events` append-only and its chain whole."""

_CHAIN_BATCH = 10_000


@migration
def m002_append_only(db: sqlite3.Connection) -> None:
    db.execute(REFUSE_UPDATE)
    db.execute(
        """
        CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'trace events are append-only: DELETE refused'); END
        """
    )


@migration
def m003_hash_chain(db: sqlite3.Connection) -> None:
    """Chain every row (existing ones in id order), keep the head, and refuse REPLACE and unchained inserts."""
    for column in ("seq INTEGER", "prev_hash TEXT", "hash TEXT"):
        db.execute(f"ALTER TABLE events ADD COLUMN {column}")
    db.execute("DROP TRIGGER events_refuse_update")  # put back below, in this same transaction
    head, after = ChainHead(0, "", GENESIS), None
    while True:
        rows = db.execute(
            "SELECT id, ts, thread_id, namespace, run_id, kind, model, payload FROM events"
            + ("" if after is None else " WHERE id > ?")
            + f" ORDER BY id LIMIT {_CHAIN_BATCH}",
            () if after is None else (after,),
        ).fetchall()
        if not rows:
            break
        links = chained(head, rows)
        db.executemany(
            "UPDATE events SET seq = ?, prev_hash = ?, hash = ? WHERE id = ?", [(*r[8:], r[0]) for r in links]
        )
        head, after = ChainHead(links[-1][8], links[-1][0], links[-1][10]), links[-1][0]
    db.execute(REFUSE_UPDATE)
    db.execute("CREATE UNIQUE INDEX events_seq ON events (seq)")
    db.execute(
        "CREATE TABLE events_head (one INTEGER PRIMARY KEY CHECK (one = 1), "
        "seq INTEGER NOT NULL, id TEXT NOT NULL, hash TEXT NOT NULL)"
    )
    db.execute("INSERT INTO events_head (one, seq, id, hash) VALUES (1, ?, ?, ?)", (head.seq, head.id, head.hash))
    db.execute(
        """
        CREATE TRIGGER events_refuse_insert BEFORE INSERT ON events
        BEGIN
            SELECT RAISE(ABORT, 'trace events are append-only: this event id is already stored (REPLACE refused)')
            WHERE EXISTS (SELECT 1 FROM events WHERE id = NEW.id);
            SELECT RAISE(ABORT, 'trace events are a hash chain: a new row must follow the head (seq, prev_hash)')
            WHERE NEW.hash IS NULL
               OR NEW.seq IS NOT (SELECT seq + 1 FROM events_head)
               OR NEW.prev_hash IS NOT (SELECT hash FROM events_head);
        END
        """
    )
    db.execute(
        """
        CREATE TRIGGER events_chain_advance AFTER INSERT ON events
        BEGIN UPDATE events_head SET seq = NEW.seq, id = NEW.id, hash = NEW.hash; END
        """
    )
    db.execute(
        """
        CREATE TRIGGER events_head_refuse_insert BEFORE INSERT ON events_head
        BEGIN SELECT RAISE(ABORT, 'the trace head is one row: INSERT refused'); END
        """
    )
    db.execute(
        """
        CREATE TRIGGER events_head_refuse_update BEFORE UPDATE ON events_head
        WHEN NEW.one IS NOT OLD.one OR NEW.seq IS NOT OLD.seq + 1
          OR NOT EXISTS (SELECT 1 FROM events WHERE seq = NEW.seq AND id = NEW.id AND hash = NEW.hash)
        BEGIN SELECT RAISE(ABORT, 'the trace head only moves to the row appended last: UPDATE refused'); END
        """
    )
    db.execute(
        """
        CREATE TRIGGER events_head_refuse_delete BEFORE DELETE ON events_head
        BEGIN SELECT RAISE(ABORT, 'the trace head is kept: DELETE refused'); END
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


__all__ = ["MIGRATIONS", "TRIGGERS", "applied", "migrate"]
