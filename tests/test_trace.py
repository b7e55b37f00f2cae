"""trace.sqlite: schema by named migrations, append-only by the database, concurrent writers, verify()."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceEvent, TraceRecorder, TraceStore
from ctxwarden.trace.chain import link_hash
from ctxwarden.trace.migrations import MIGRATIONS
from ctxwarden.trace.store import SqliteTraceStore

EXPECTED_COLUMNS = [
    # name, type, notnull, default, primary key
    ("id", "TEXT", 0, None, 1),
    ("ts", "REAL", 1, None, 0),
    ("thread_id", "TEXT", 0, None, 0),
    ("namespace", "TEXT", 1, "''", 0),
    ("run_id", "TEXT", 0, None, 0),
    ("kind", "TEXT", 1, None, 0),
    ("model", "TEXT", 0, None, 0),
    ("payload", "TEXT", 1, None, 0),
    ("seq", "INTEGER", 0, None, 0),
    ("prev_hash", "TEXT", 0, None, 0),
    ("hash", "TEXT", 0, None, 0),
]


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    store = TraceStore(tmp_path / "trace.sqlite")
    yield store
    store.close()


def _raw(store: TraceStore) -> sqlite3.Connection:
    return sqlite3.connect(store.path)


def test_migrated_schema_has_every_column(store: TraceStore) -> None:
    store.append(TraceEvent("model_usage", {"input_tokens": 1}))
    db = _raw(store)
    columns = [
        (name, type_, notnull, default, pk)
        for _cid, name, type_, notnull, default, pk in db.execute("PRAGMA table_info(events)")
    ]
    assert columns == EXPECTED_COLUMNS
    indexes = {row[1] for row in db.execute("PRAGMA index_list(events)")}
    assert {"events_thread_ts", "events_kind_ts", "events_ts", "events_seq"} <= indexes
    assert [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY rowid")] == [n for n, _ in MIGRATIONS]
    db.close()


def test_reopening_applies_no_migration_twice(store: TraceStore) -> None:
    store.append(TraceEvent("tool_call", {}))
    store.close()
    again = TraceStore(store.path)
    again.append(TraceEvent("tool_call", {}))
    db = _raw(store)
    assert db.execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 2
    db.close()
    again.close()


def test_update_and_delete_are_refused_by_the_database(store: TraceStore) -> None:
    store.append(TraceEvent("model_usage", {"input_tokens": 5}, thread_id="t"))
    db = _raw(store)
    with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE refused"):
        db.execute("UPDATE events SET kind = 'forged'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
        db.execute("DELETE FROM events")
    db.close()
    assert [e.kind for e in store.events()] == ["model_usage"]


def test_payload_must_be_json(store: TraceStore) -> None:
    store.append(TraceEvent("x", {}))
    head = store.head()
    db = _raw(store)
    row = ("z", 0.0, None, "", None, "x", None, "not json")  # follows the chain: only the payload is wrong
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        db.execute(
            "INSERT INTO events (id, ts, thread_id, namespace, run_id, kind, model, payload, seq, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, head.seq + 1, head.hash, link_hash(head.hash, head.seq + 1, row)),
        )
    db.close()


def test_verify_passes_then_finds_a_removed_guard(store: TraceStore) -> None:
    store.append(TraceEvent("x", {}))
    assert store.verify() == []
    db = _raw(store)
    db.execute("DROP TRIGGER events_refuse_delete")
    db.commit()
    db.close()
    assert store.verify() == ["append-only trigger events_refuse_delete is missing"]


def test_wal_mode(store: TraceStore) -> None:
    store.append(TraceEvent("x", {}))
    db = _raw(store)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_ids_sort_in_append_order_and_filters_work(store: TraceStore) -> None:
    for i in range(50):
        store.append(TraceEvent("model_usage" if i % 2 else "tool_call", {"i": i}, thread_id=f"t{i % 3}"))
    events = store.events()
    assert [e.payload["i"] for e in events] == list(range(50))
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert {e.thread_id for e in store.events(thread_id="t1")} == {"t1"}
    assert {e.kind for e in store.events(kind="tool_call")} == {"tool_call"}
    assert len(store.events(kind=["tool_call", "model_usage"], thread_id="t0")) == 17
    assert store.events(since=time.time() + 60) == []
    assert store.threads() == ["t0", "t1", "t2"]


def test_spend_is_summed_per_role(store: TraceStore) -> None:
    store.append(
        [
            TraceEvent(
                "model_usage", {"role": "main", "input_tokens": 100, "output_tokens": 5, "cached_input_tokens": 60}, "t"
            ),
            TraceEvent(
                "model_usage", {"role": "main", "input_tokens": 200, "output_tokens": 7, "cached_input_tokens": 0}, "t"
            ),
            TraceEvent("model_usage", {"role": "summarizer", "input_tokens": 900, "output_tokens": 90}, "t"),
            TraceEvent("model_usage", {"role": "main", "input_tokens": 1, "output_tokens": 1}, "other"),
            TraceEvent("tool_call", {"name": "ls"}, "t"),
        ]
    )
    assert store.spend("t") == {
        "main": {"calls": 2, "input_tokens": 300, "output_tokens": 12, "cached_input_tokens": 60},
        "summarizer": {"calls": 1, "input_tokens": 900, "output_tokens": 90, "cached_input_tokens": 0},
    }


def test_lifecycle_sums_what_the_layers_did(store: TraceStore) -> None:
    store.append(
        [
            TraceEvent("eviction", {"tokens": 5_000, "ok": True}, "t"),
            TraceEvent("eviction", {"tokens": 7_000, "ok": False, "error": "disk full"}, "t"),
            TraceEvent("context_clear", {"freed": 900}, "t"),
            TraceEvent("context_clear", {"freed": 100}, "t"),
            TraceEvent("context_clear", {"freed": 5}, "other"),
        ]
    )
    assert store.lifecycle("t") == {
        "eviction": {"count": 1, "tokens": 5_000, "freed": 0},
        "context_clear": {"count": 2, "tokens": 0, "freed": 1_000},
    }


def test_eight_threads_share_one_store_without_losing_an_event(store: TraceStore) -> None:
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(150):
                store.append(TraceEvent("tool_call", {"writer": n, "i": i}, thread_id=f"w{n}"))
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    workers = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    events = store.events()
    assert len(events) == 8 * 150
    assert len({e.id for e in events}) == len(events)


def _write_from_process(path: str, writer: int, count: int) -> None:
    store = TraceStore(path)
    for i in range(count):
        store.append(TraceEvent("model_usage", {"writer": writer, "i": i, "input_tokens": 1}, thread_id="shared"))
    store.close()


def test_four_processes_append_to_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "trace.sqlite")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_from_process, args=(path, n, 250)) for n in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    store = TraceStore(path)
    events = store.events(thread_id="shared")
    assert len(events) == 1000
    for writer in range(4):
        assert sorted(e.payload["i"] for e in events if e.payload["writer"] == writer) == list(range(250))
    assert store.spend("shared")["main"]["calls"] == 1000
    assert store.verify() == []
    store.close()


def test_a_recorder_that_cannot_write_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    recorder = TraceRecorder(blocker / "trace.sqlite")
    assert recorder.record("model_usage", {"input_tokens": 1}) is None
    assert recorder.record_all([("tool_call", {}, None), ("tool_call", {}, None)]) == 0
    assert recorder.failures == 3
    assert f"cannot open the trace at {blocker}" in (recorder.last_error or "")


def test_a_disabled_recorder_records_nothing() -> None:
    recorder = TraceRecorder(None)
    assert not recorder.enabled
    assert recorder.record("x", {}) is None
    assert recorder.failures == 0


class _HeldStore(SqliteTraceStore):
    """A SQLite trace that holds `model_usage` appends until released, noting which thread appended what."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.appended_by: list[tuple[str, str]] = []

    def append(self, events: Any) -> list[TraceEvent]:
        batch = list(events)
        if any(e.kind == "model_usage" for e in batch):
            self.release.wait(10)
        self.appended_by.extend((e.kind, threading.current_thread().name) for e in batch)
        return super().append(batch)


def test_a_step_does_not_wait_for_its_usage_event_and_the_run_ends_with_all_written(tmp_path: Path) -> None:
    store = _HeldStore(tmp_path / "trace.sqlite")
    tool_ran = threading.Event()

    @tool
    def probe() -> str:
        """Look around."""
        tool_ran.set()
        return "nothing here"

    calls = [AIMessage("", tool_calls=[{"name": "probe", "args": {}, "id": "p1"}]), AIMessage("done")]
    agent = create_context_agent(scripted_model(calls, window=32_000), [probe], state_dir=tmp_path / "s", trace=store)
    caller = threading.Thread(
        target=lambda: agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "held"}})
    )
    caller.start()
    try:
        assert tool_ran.wait(10), "the first step waited for its usage event to be written"
        assert ("model_usage", "ctxwarden-trace") not in store.appended_by  # still held, and the tool already ran
    finally:
        store.release.set()
        caller.join(10)
    assert not caller.is_alive()
    usage = [name for kind, name in store.appended_by if kind == "model_usage"]
    assert usage == ["ctxwarden-trace", caller.name]  # the last call ends the run: written in it, after the first
    assert [e.kind for e in store.events(thread_id="held")] == ["model_usage", "tool_call", "model_usage"]
    agent.checkpointer.conn.close()


def test_a_later_event_that_cannot_be_written_is_counted(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    recorder = TraceRecorder(blocker / "trace.sqlite")
    assert recorder.record_later([("model_usage", {}, None), ("model_switch", {}, None)]) == 2
    assert recorder.flush()
    assert recorder.failures == 2
    assert f"cannot open the trace at {blocker}" in (recorder.last_error or "")


async def test_an_async_run_ends_with_every_usage_event_written(tmp_path: Path) -> None:
    @tool
    def look(page: int) -> str:
        """Look at a page."""
        return f"page {page}"

    calls = [AIMessage("", tool_calls=[{"name": "look", "args": {"page": i}, "id": f"l{i}"}]) for i in range(3)]
    trace = tmp_path / "trace.sqlite"
    agent = create_context_agent(
        scripted_model([*calls, AIMessage("done")], window=32_000), [look], state_dir=tmp_path / "s", trace=trace
    )
    await agent.ainvoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "async"}})
    rows = sqlite3.connect(trace).execute("SELECT kind FROM events WHERE thread_id = 'async' ORDER BY id").fetchall()
    assert [kind for (kind,) in rows] == ["model_usage", "tool_call"] * 3 + ["model_usage"]  # another reader's view
    agent.checkpointer.conn.close()
