"""The trace in Postgres: the same table and migrations as trace.sqlite, append-only by the database, shared safely.

Every test runs on a real throwaway Postgres (`pg_server.py`), in a database of its own.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool

from ctxwarden import TraceEvent, TraceRecorder, TraceStore, context_report, create_context_agent
from ctxwarden.cli import main
from ctxwarden.errors import TraceError
from ctxwarden.replay import scripted_model
from ctxwarden.trace import PostgresTraceStore, SqliteTraceStore
from ctxwarden.trace.migrations import MIGRATIONS as SQLITE_MIGRATIONS
from ctxwarden.trace.postgres import redacted
from ctxwarden.trace.postgres_migrations import MIGRATIONS as POSTGRES_MIGRATIONS

# name, SQLite type, Postgres type, required, default, primary key
SCHEMA = [
    ("id", "TEXT", "text", False, None, True),
    ("ts", "REAL", "double precision", True, None, False),
    ("thread_id", "TEXT", "text", False, None, False),
    ("namespace", "TEXT", "text", True, "''", False),
    ("run_id", "TEXT", "text", False, None, False),
    ("kind", "TEXT", "text", True, None, False),
    ("model", "TEXT", "text", False, None, False),
    ("payload", "TEXT", "jsonb", True, None, False),
    ("seq", "INTEGER", "bigint", False, None, False),
    ("prev_hash", "TEXT", "text", False, None, False),
    ("hash", "TEXT", "text", False, None, False),
]


@pytest.fixture
def store(postgres_url: str) -> Iterator[TraceStore]:
    store = TraceStore(postgres_url)
    yield store
    store.close()


def _sample() -> list[TraceEvent]:
    """Events of every kind the layers write, on two threads, with the payload shapes they use."""
    usage = {"role": "main", "input_tokens": 1_200, "output_tokens": 40, "cached_input_tokens": 300}
    return [
        TraceEvent("model_usage", usage, thread_id="t1", model="m", ts=100.0),
        TraceEvent("model_usage", {**usage, "role": "summarizer", "input_tokens": 900}, thread_id="t1", ts=101.0),
        TraceEvent("model_usage", {"input_tokens": 7, "output_tokens": 1}, thread_id="t1", ts=101.5),
        TraceEvent("tool_call", {"name": "fetch", "error": None}, thread_id="t1", namespace="tools:abc", ts=102.0),
        TraceEvent("eviction", {"tokens": 5_000, "ok": True}, thread_id="t1", ts=103.0),
        TraceEvent("context_clear", {"freed": 2_000, "tokens": 2_400}, thread_id="t1", ts=104.0),
        TraceEvent("context_compaction", {"tokens": 9_000, "freed": 6_000, "ok": True}, thread_id="t1", ts=105.0),
        TraceEvent("context_compaction", {"tokens": 1, "ok": False}, thread_id="t1", ts=106.0),
        TraceEvent("model_usage", usage, thread_id="t2", run_id="run-1", ts=107.0),
        TraceEvent("model_switch", {"from_model": "a", "to_model": "b"}, thread_id=None, ts=108.0),
    ]


def test_a_url_a_connection_and_a_pool_each_open_the_postgres_trace(postgres_url: str, tmp_path: Path) -> None:
    by_url = TraceStore(postgres_url)
    by_url.append(TraceEvent("tool_call", {"via": "url"}, thread_id="t"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        by_connection = TraceStore(conn)
        by_connection.append(TraceEvent("tool_call", {"via": "connection"}, thread_id="t"))
    with ConnectionPool(postgres_url, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        by_pool = TraceStore(pool)
        by_pool.append(TraceEvent("tool_call", {"via": "pool"}, thread_id="t"))
        assert [e.payload["via"] for e in by_pool.events(thread_id="t")] == ["url", "connection", "pool"]
    for store in (by_url, by_connection, by_pool):
        assert isinstance(store, PostgresTraceStore)
    assert isinstance(TraceStore(tmp_path / "trace.sqlite"), SqliteTraceStore)
    assert isinstance(TraceStore(str(tmp_path / "trace.sqlite")), SqliteTraceStore)
    by_url.close()


def test_the_table_and_migrations_are_those_of_trace_sqlite(
    store: TraceStore, postgres_url: str, tmp_path: Path
) -> None:
    store.append(TraceEvent("model_usage", {"input_tokens": 1}))
    sqlite = TraceStore(tmp_path / "trace.sqlite")
    sqlite.append(TraceEvent("model_usage", {"input_tokens": 1}))
    lite = sqlite3.connect(tmp_path / "trace.sqlite")
    sqlite_columns = [
        (n, t, bool(nn), d, bool(pk)) for _c, n, t, nn, d, pk in lite.execute("PRAGMA table_info(events)")
    ]
    sqlite_indexes = {row[1] for row in lite.execute("PRAGMA index_list(events)") if row[1].startswith("events_")}
    lite.close()
    sqlite.close()
    with psycopg.connect(postgres_url) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type, is_nullable = 'NO', column_default FROM information_schema.columns "
            "WHERE table_schema = 'ctxwarden' AND table_name = 'events' ORDER BY ordinal_position"
        ).fetchall()
        (primary,) = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'ctxwarden.events'::regclass AND i.indisprimary"
        ).fetchone()
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'ctxwarden'")}
        migrations = [r[0] for r in conn.execute("SELECT name FROM ctxwarden._migrations ORDER BY applied_at")]
    assert sqlite_columns == [(n, lite_type, req, default, pk) for n, lite_type, _pg, req, default, pk in SCHEMA]
    assert [(n, t, req, (d or "").split("::")[0] or None) for n, t, req, d in columns] == [
        (n, pg_type, req or pk, default)  # a primary key is required in Postgres (SQLite lets a TEXT key be NULL)
        for n, _lite, pg_type, req, default, pk in SCHEMA
    ]
    assert primary == "id"
    assert sqlite_indexes == {"events_thread_ts", "events_kind_ts", "events_ts", "events_seq"} <= indexes
    assert migrations == [n for n, _ in POSTGRES_MIGRATIONS] == [n for n, _ in SQLITE_MIGRATIONS]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ctxwarden.events SET kind = 'forged'",
        "DELETE FROM ctxwarden.events",
        "TRUNCATE ctxwarden.events",
    ],
)
def test_changing_an_event_is_refused_by_the_database(store: TraceStore, postgres_url: str, statement: str) -> None:
    store.append(TraceEvent("tool_call", {"name": "x"}, thread_id="t"))
    with psycopg.connect(postgres_url, autocommit=True) as conn, pytest.raises(psycopg.errors.RaiseException) as err:
        conn.execute(statement)
    assert "trace events are append-only" in str(err.value)
    assert [e.kind for e in store.events()] == ["tool_call"]


def test_verify_passes_then_finds_a_disabled_guard(store: TraceStore, postgres_url: str) -> None:
    store.append(TraceEvent("tool_call", {}))
    assert store.verify() == []
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE ctxwarden.events DISABLE TRIGGER events_refuse_truncate")
    assert store.verify() == ["append-only trigger events_refuse_truncate is missing or disabled"]


def test_postgres_answers_every_read_as_sqlite_does(store: TraceStore, tmp_path: Path) -> None:
    sqlite = TraceStore(tmp_path / "trace.sqlite")
    events = [e.with_id() for e in _sample()]
    store.append(events)
    sqlite.append(events)
    for reader in ("threads", "spend", "lifecycle", "events"):
        for thread in ("t1", "t2", "nobody"):
            args = () if reader in ("threads", "events") else (thread,)
            assert getattr(store, reader)(*args) == getattr(sqlite, reader)(*args), (reader, thread)
    queries = [
        {"thread_id": "t1"},
        {"kind": "model_usage"},
        {"kind": ["eviction", "context_clear"], "since": 103.5},
        {"kind": []},
        {"limit": 3},
    ]
    for query in queries:
        assert store.events(**query) == sqlite.events(**query), query
    assert store.spend("t1") == {
        "main": {"calls": 2, "input_tokens": 1_207, "output_tokens": 41, "cached_input_tokens": 300},
        "summarizer": {"calls": 1, "input_tokens": 900, "output_tokens": 40, "cached_input_tokens": 300},
    }
    assert store.lifecycle("t1")["context_compaction"] == {"count": 1, "tokens": 9_000, "freed": 6_000}
    sqlite.close()


def test_a_nul_character_is_kept_as_a_replacement_character(store: TraceStore) -> None:
    """Postgres text cannot hold NUL: it becomes U+FFFD, and a filter with the original id still finds the event."""
    store.append(
        TraceEvent("tool_call", {"error": "bad\x00byte", "k\x00": ["\x00"]}, thread_id="a\x00b", model="m\x00")
    )
    (event,) = store.events(thread_id="a\x00b")
    assert event.thread_id == "a\ufffdb"
    assert event.model == "m\ufffd"
    assert event.payload == {"error": "bad\ufffdbyte", "k\ufffd": ["\ufffd"]}


def test_appending_an_event_twice_stores_it_once(store: TraceStore) -> None:
    """An append retried after a commit whose answer was lost must not duplicate the event."""
    (event,) = store.append(TraceEvent("tool_call", {"n": 1}, thread_id="t"))
    store.append([event, TraceEvent("tool_call", {"n": 2}, thread_id="t")])
    assert [e.payload["n"] for e in store.events(thread_id="t")] == [1, 2]


def test_a_lost_connection_is_reopened(store: TraceStore, postgres_url: str) -> None:
    store.append(TraceEvent("tool_call", {"n": 1}))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    assert killed == [(True,)]
    store.append(TraceEvent("tool_call", {"n": 2}))
    assert [e.payload["n"] for e in store.events()] == [1, 2]


def test_the_trace_keeps_to_its_own_schema(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id INT PRIMARY KEY, what TEXT)")
        conn.execute("INSERT INTO events VALUES (1, 'the application''s own row')")
    audit = TraceStore(postgres_url, schema="agent_audit")
    audit.append(TraceEvent("tool_call", {}, thread_id="t"))
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT what FROM public.events").fetchall() == [("the application's own row",)]
        assert conn.execute("SELECT count(*) FROM agent_audit.events").fetchone() == (1,)
    assert audit.verify() == []
    audit.close()
    with pytest.raises(TraceError, match="not a plain Postgres identifier"):
        TraceStore(postgres_url, schema="x; DROP TABLE events")


def _append_from_process(url: str, writer: int, count: int) -> None:
    store = TraceStore(url)
    for i in range(count):
        store.append(TraceEvent("model_usage", {"writer": writer, "i": i, "input_tokens": 1}, thread_id="shared"))
    store.close()


def test_eight_threads_and_two_processes_on_a_new_database_lose_and_repeat_nothing(postgres_url: str) -> None:
    """Everyone opens the empty database at once: the migrations run once, and every event is stored once."""
    errors: list[BaseException] = []
    store = TraceStore(postgres_url)
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_from_process, args=(postgres_url, 100 + n, 200)) for n in range(2)]

    def write(n: int) -> None:
        try:
            for i in range(100):
                store.append(TraceEvent("model_usage", {"writer": n, "i": i, "input_tokens": 1}, thread_id="shared"))
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for p in processes:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in processes:
        p.join(timeout=120)
    assert errors == []
    assert [p.exitcode for p in processes] == [0, 0]
    events = store.events(thread_id="shared")
    assert len(events) == 8 * 100 + 2 * 200
    for writer, count in [*((n, 100) for n in range(8)), (100, 200), (101, 200)]:
        assert sorted(e.payload["i"] for e in events if e.payload["writer"] == writer) == list(range(count))
    assert store.spend("shared")["main"]["calls"] == 1_200
    assert store.verify() == []  # the hash chain included
    assert store.head().seq == 1_200
    store.close()


def test_a_recorder_on_an_unreachable_database_costs_the_event_not_the_run() -> None:
    recorder = TraceRecorder(
        TraceStore("postgresql://ctxwarden:s3cret@127.0.0.1:1/nowhere", connect_timeout_s=1, retries=0)
    )
    assert recorder.record("model_usage", {"input_tokens": 1}) is None
    assert recorder.failures == 1
    assert "cannot reach the trace at postgresql://ctxwarden:***@127.0.0.1:1/nowhere" in (recorder.last_error or "")
    assert "s3cret" not in (recorder.last_error or "")
    assert redacted("postgresql://u@h/db") == "postgresql://u@h/db"


@tool
def lookup(key: str) -> str:
    """Look `key` up."""
    return f"{key} = 42"


def test_an_agent_traces_to_the_url_and_the_report_and_the_cli_read_it(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = scripted_model(
        [AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "k"}, "id": "c1"}]), AIMessage("k is 42")],
        window=200_000,
    )
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        agent = create_context_agent(model, [lookup], checkpointer=saver, trace=postgres_url, state_dir=tmp_path)
        config = {"configurable": {"thread_id": "asked"}}
        agent.invoke({"messages": [("user", "what is k?")]}, config)
        report = context_report(agent, config, trace=postgres_url)
    assert report.spend["main"]["calls"] == 2
    assert [e.kind for e in TraceStore(postgres_url).events(thread_id="asked")] == [
        "model_usage",
        "tool_call",
        "model_usage",
    ]

    assert main(["trace", "--url", postgres_url, "--thread", "asked", "--json"]) == 0
    traced = capsys.readouterr().out
    assert [json.loads(line)["kind"] for line in traced.splitlines()] == ["model_usage", "tool_call", "model_usage"]
    assert main(["context", "--url", postgres_url, "--thread", "asked", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["spend"]["main"]["calls"] == 2
    assert figures["calls"] == 2
    assert main(["trace", "--url", postgres_url, "--thread", "nobody"]) == 2
    assert "Known threads: asked." in capsys.readouterr().err
    assert main(["context", "--url", "mysql://x/y", "--thread", "t"]) == 2
    assert "is not a postgresql:// URL" in capsys.readouterr().err


def test_an_agent_with_an_in_memory_checkpointer_traces_to_a_pool(postgres_url: str, tmp_path: Path) -> None:
    with ConnectionPool(postgres_url, min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
        agent = create_context_agent(
            scripted_model(["hello"], window=200_000), checkpointer=InMemorySaver(), trace=pool, state_dir=tmp_path
        )
        agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "pooled"}})
        assert TraceStore(pool).spend("pooled")["main"]["calls"] == 1
