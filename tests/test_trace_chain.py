"""The trace's hash chain: whoever rewrites the database behind ctxwarden's back is named by `verify()`.

Each way of tampering runs through the database's own client (sqlite3, psycopg), as someone
with the file or the password would, with the guarding triggers dropped or disabled and put
back afterwards; `verify()` and `ctxwarden trace --verify` then name the first row touched.
Every case runs on SQLite and on a throwaway Postgres (`pg_server.py`).
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ctxwarden.cli import main
from ctxwarden.errors import TraceError
from ctxwarden.trace import TraceEvent, TraceStore
from ctxwarden.trace.chain import link_hash
from ctxwarden.trace.migrations import MIGRATIONS as SQLITE_MIGRATIONS
from ctxwarden.trace.postgres_migrations import MIGRATIONS as POSTGRES_MIGRATIONS

COLUMNS = "id, ts, thread_id, namespace, run_id, kind, model"


@dataclass
class Backend:
    """One trace and a raw connection to its database, the way someone outside ctxwarden would open it."""

    name: str
    target: str
    raw: Any

    @property
    def events(self) -> str:
        return "events" if self.name == "sqlite" else "ctxwarden.events"

    def run(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        sql = sql.replace("{events}", self.events)
        if self.name == "postgres":
            sql = sql.replace("?", "%s").replace("payload FROM", "payload::text FROM")
        cursor = self.raw.execute(sql, args)
        return list(cursor.fetchall()) if cursor.description else []

    @contextmanager
    def triggers_off(self, *names: str) -> Iterator[None]:
        """The named guards dropped (SQLite) or disabled (Postgres), and put back afterwards."""
        if self.name == "sqlite":
            saved = [
                self.raw.execute("SELECT sql FROM sqlite_master WHERE name = ?", (n,)).fetchone()[0] for n in names
            ]
            for name in names:
                self.raw.execute(f"DROP TRIGGER {name}")
            yield
            for sql in saved:
                self.raw.execute(sql)
        else:
            for name in names:
                self.raw.execute(f"ALTER TABLE ctxwarden.events DISABLE TRIGGER {name}")
            yield
            for name in names:
                self.raw.execute(f"ALTER TABLE ctxwarden.events ENABLE TRIGGER {name}")

    def cli(self) -> list[str]:
        return ["--state-dir", str(Path(self.target).parent)] if self.name == "sqlite" else ["--url", self.target]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        target = str(tmp_path / "trace.sqlite")
        TraceStore(target).close()  # created and migrated, as an agent's first event does
        raw: Any = sqlite3.connect(target, isolation_level=None)
    else:
        target = request.getfixturevalue("postgres_url")
        TraceStore(target).close()
        raw = psycopg.connect(target, autocommit=True)
    yield Backend(request.param, target, raw)
    raw.close()


@pytest.fixture
def store(backend: Backend) -> Iterator[TraceStore]:
    store = TraceStore(backend.target)
    yield store
    store.close()


def _five(store: TraceStore) -> list[str]:
    events = store.append([TraceEvent("tool_call", {"n": n}, thread_id="t", ts=100.0 + n) for n in range(5)])
    return [e.id for e in events]


def _verify_cli(backend: Backend, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["trace", "--verify", *backend.cli()])
    out, err = capsys.readouterr()
    return code, out, err


# --- each way of rewriting the trace, and the first row verify() must name --------------------
def _edit(b: Backend, ids: list[str]) -> str:
    with b.triggers_off("events_refuse_update"):
        b.run("""UPDATE {events} SET payload = '{"n": 99}' WHERE id = ?""", ids[2])
    return f"row {ids[2]!r} (#3) does not match its hash: its content was edited, replaced or moved"


def _rehash(b: Backend, id_: str, payload: str) -> None:
    """Rewrite row `id_` with `payload` and a hash recomputed the way ctxwarden computes it."""
    ((seq, prev, *row),) = b.run(f"SELECT seq, prev_hash, {COLUMNS} FROM {{events}} WHERE id = ?", id_)
    with b.triggers_off("events_refuse_update"):
        b.run(
            "UPDATE {events} SET payload = ?, hash = ? WHERE id = ?",
            payload,
            link_hash(prev, seq, (*row, payload)),
            id_,
        )


def _edit_with_hash(b: Backend, ids: list[str]) -> str:
    _rehash(b, ids[2], '{"n": 99}')
    return f"row {ids[2]!r} (#3) was rewritten: row {ids[3]!r} (#4), appended after it, links to another hash"


def _replace(b: Backend, ids: list[str]) -> str:
    copy = f"SELECT {COLUMNS}, '{{\"n\": 99}}', seq, prev_hash, hash FROM {{events}} WHERE id = ?"
    if b.name == "sqlite":  # REPLACE deletes the old row by conflict resolution: no delete trigger fires
        with b.triggers_off("events_refuse_insert", "events_chain_advance"):
            b.run(f"REPLACE INTO {{events}} ({COLUMNS}, payload, seq, prev_hash, hash) {copy}", ids[2])
    else:
        with b.triggers_off("events_refuse_insert", "events_refuse_update", "events_chain_advance"):
            upsert = f"INSERT INTO {{events}} ({COLUMNS}, payload, seq, prev_hash, hash) "
            b.run(
                upsert
                + copy.replace(", seq", "::jsonb, seq")
                + " ON CONFLICT (id) DO UPDATE SET payload = EXCLUDED.payload",
                ids[2],
            )
    return f"row {ids[2]!r} (#3) does not match its hash: its content was edited, replaced or moved"


def _delete(b: Backend, ids: list[str]) -> str:
    with b.triggers_off("events_refuse_delete"):
        b.run("DELETE FROM {events} WHERE id = ?", ids[2])
    return f"rows #3 are missing after row {ids[1]!r} (#2), before row {ids[3]!r} (#4): deleted"


def _swap_payloads(b: Backend, ids: list[str]) -> str:
    ((second,),) = b.run("SELECT payload FROM {events} WHERE id = ?", ids[1])
    ((fourth,),) = b.run("SELECT payload FROM {events} WHERE id = ?", ids[3])
    with b.triggers_off("events_refuse_update"):
        b.run("UPDATE {events} SET payload = ? WHERE id = ?", fourth, ids[1])
        b.run("UPDATE {events} SET payload = ? WHERE id = ?", second, ids[3])
    return f"row {ids[1]!r} (#2) does not match its hash: its content was edited, replaced or moved"


def _move_rows(b: Backend, ids: list[str]) -> str:
    with b.triggers_off("events_refuse_update"):
        b.run("UPDATE {events} SET seq = -1 WHERE id = ?", ids[1])
        b.run("UPDATE {events} SET seq = 2 WHERE id = ?", ids[3])
        b.run("UPDATE {events} SET seq = 4 WHERE id = ?", ids[1])
    return f"row {ids[3]!r} (#2) does not match its hash: its content was edited, replaced or moved"


def _delete_last(b: Backend, ids: list[str]) -> str:
    with b.triggers_off("events_refuse_delete"):
        b.run("DELETE FROM {events} WHERE id = ?", ids[4])
    return f"row {ids[4]!r} (#5), the last appended, is missing after row {ids[3]!r} (#4): deleted"


def _edit_last_with_hash(b: Backend, ids: list[str]) -> str:
    _rehash(b, ids[4], '{"n": 99}')
    return f"row {ids[4]!r} (#5), the last row, was rewritten: the head record holds another hash"


TAMPERS: dict[str, Callable[[Backend, list[str]], str]] = {
    "edit": _edit,
    "edit with its hash recomputed": _edit_with_hash,
    "replace": _replace,
    "delete": _delete,
    "swap two payloads": _swap_payloads,
    "move two rows": _move_rows,
    "delete the last row": _delete_last,
    "edit the last row with its hash recomputed": _edit_last_with_hash,
}


@pytest.mark.parametrize("way", list(TAMPERS))
def test_verify_names_the_first_row_tampered_with(
    backend: Backend, store: TraceStore, way: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _five(store)
    assert store.verify() == []
    expected = TAMPERS[way](backend, ids)
    assert store.verify() == [f"hash chain broken: {expected}"]
    code, out, err = _verify_cli(backend, capsys)
    assert code == 1
    assert out == ""
    assert expected in err


def test_a_sound_trace_verifies_and_prints_its_head(
    backend: Backend, store: TraceStore, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _five(store)
    head = store.head()
    assert (head.seq, head.id) == (5, ids[4])
    code, out, _err = _verify_cli(backend, capsys)
    assert code == 0
    assert f"5 events chained; head #5 {ids[4]} {head.hash}" in out
    code = main(["trace", "--verify", "--json", *backend.cli()])
    found = json.loads(capsys.readouterr().out)
    assert (code, found["ok"], found["head"]["hash"]) == (0, True, head.hash)


UPSERT = (
    "INSERT INTO {events} (id, ts, kind, payload) VALUES (?, 0, 'forged', '{}') "
    "ON CONFLICT (id) DO UPDATE SET kind = 'forged'"
)
REPLACES = {
    "sqlite": [
        "INSERT OR REPLACE INTO {events} (id, ts, kind, payload) VALUES (?, 0, 'forged', '{}')",
        "REPLACE INTO {events} (id, ts, kind, payload) VALUES (?, 0, 'forged', '{}')",
        UPSERT,
    ],
    "postgres": [UPSERT],  # Postgres has no REPLACE
}


def test_replace_is_refused_like_update(backend: Backend, store: TraceStore) -> None:
    ids = _five(store)
    refused = sqlite3.IntegrityError if backend.name == "sqlite" else psycopg.errors.RaiseException
    for statement in REPLACES[backend.name]:
        with pytest.raises(refused, match="already stored"):
            backend.run(statement, ids[2])
    assert [e.kind for e in store.events()] == ["tool_call"] * 5
    assert store.verify() == []


def test_appending_an_id_already_stored_is_a_trace_error_naming_it(store: TraceStore) -> None:
    ids = _five(store)
    with pytest.raises(TraceError, match=f"trace event id '{ids[1]}' is already stored with other content"):
        store.append([TraceEvent("tool_call", {"n": 5}), TraceEvent("tool_call", {"n": 99}, id=ids[1], ts=101.0)])
    assert [e.payload["n"] for e in store.events()] == [0, 1, 2, 3, 4]  # the whole batch is refused
    assert store.verify() == []


def test_the_same_event_appended_again_is_stored_once(store: TraceStore) -> None:
    """A retried append (its commit's answer lost) finds its events stored as they are and skips them."""
    first = store.append(TraceEvent("tool_call", {"n": 1}, thread_id="t"))
    store.append([*first, TraceEvent("tool_call", {"n": 2}, thread_id="t")])
    store.append(first)
    assert [e.payload["n"] for e in store.events()] == [1, 2]
    assert store.head().seq == 2
    assert store.verify() == []


def test_trace_without_thread_or_verify_exits_2(backend: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", *backend.cli()]) == 2
    assert "Fix: pass --thread ID" in capsys.readouterr().err


# --- an existing trace, written before the chain --------------------------------------------
def _old_sqlite_trace(path: Path, ids: list[str]) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, step in SQLITE_MIGRATIONS[:2]:
        step(db)
        db.execute("INSERT INTO _migrations VALUES (?, ?)", (name, time.time()))
    for n, id_ in enumerate(ids):
        db.execute(
            "INSERT INTO events (id, ts, thread_id, kind, payload) VALUES (?, ?, 't', 'tool_call', ?)",
            (id_, 100.0 + n, json.dumps({"n": n})),
        )
    db.close()


def _old_postgres_trace(url: str, ids: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA ctxwarden")
        conn.execute("CREATE TABLE ctxwarden._migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)")
        for name, step in POSTGRES_MIGRATIONS[:2]:
            with conn.cursor() as cur:
                step(cur, "ctxwarden")
            conn.execute("INSERT INTO ctxwarden._migrations VALUES (%s, %s)", (name, time.time()))
        for n, id_ in enumerate(ids):
            conn.execute(
                "INSERT INTO ctxwarden.events (id, ts, thread_id, kind, payload) VALUES (%s, %s, 't', 'tool_call', %s)",
                (id_, 100.0 + n, json.dumps({"n": n, "x": 1e300})),
            )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_existing_trace_is_chained_by_its_migration_in_id_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ids = [f"{n:019d}-000000-00000000" for n in (5, 1, 4, 2, 3)]  # written out of id order
    if kind == "sqlite":
        target: str = str(tmp_path / "trace.sqlite")
        _old_sqlite_trace(Path(target), ids)
    else:
        target = request.getfixturevalue("postgres_url")
        _old_postgres_trace(target, ids)
    store = TraceStore(target)
    assert [e.id for e in store.events()] == sorted(ids)
    assert store.verify() == []
    head = store.head()
    assert (head.seq, head.id) == (5, max(ids))
    (added,) = store.append(TraceEvent("tool_call", {"n": 5}, thread_id="t"))
    assert store.head().id == added.id
    store.close()
    raw = (
        sqlite3.connect(target, isolation_level=None) if kind == "sqlite" else psycopg.connect(target, autocommit=True)
    )
    b = Backend(kind, target, raw)
    assert [r[0] for r in b.run("SELECT id FROM {events} ORDER BY seq")] == [*sorted(ids), added.id]
    migrations = [r[0] for r in b.run(f"SELECT name FROM {b.events.replace('events', '_migrations')} ORDER BY name")]
    assert migrations == ["m001_events", "m002_append_only", "m003_hash_chain"]
    expected = _edit(b, sorted(ids))  # an old row edited after the migration is named like any other
    b.raw.close()
    store = TraceStore(target)
    assert store.verify() == [f"hash chain broken: {expected}"]
    store.close()


# --- several processes append at once ----------------------------------------------------
def _append_from_process(target: str, writer: int, count: int) -> None:
    store = TraceStore(target)
    for i in range(count):
        events = [
            TraceEvent("tool_call", {"writer": writer, "i": i, "part": p}, thread_id="t") for p in range(1 + i % 3)
        ]
        store.append(events)
    store.close()


def test_two_processes_appending_at_once_keep_one_chain(tmp_path: Path) -> None:
    target = str(tmp_path / "trace.sqlite")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_from_process, args=(target, w, 120)) for w in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0]
    store = TraceStore(target)
    events = store.events()
    assert len(events) == 2 * (40 * 1 + 40 * 2 + 40 * 3)
    assert store.head().seq == len(events)
    assert store.verify() == []
    db = sqlite3.connect(target)
    assert [r[0] for r in db.execute("SELECT seq FROM events ORDER BY seq")] == list(range(1, len(events) + 1))
    writers = [r[0] for r in db.execute("SELECT json_extract(payload, '$.writer') FROM events ORDER BY seq")]
    db.close()
    assert writers.count(0) == writers.count(1) == len(events) // 2
    store.close()
