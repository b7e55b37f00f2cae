"""The agent's file tools never see, open or change ctxwarden's databases.

The embedded default keeps `checkpoints.sqlite` and `trace.sqlite` in the state dir the
agent's files live in. The model's `ls`, `glob`, `grep` and `read_file` must not show them
(they hold every thread's messages), `write_file` and `edit_file` must not change them, and
a search must not even open them: SQLite's locks are per process, so a tool opening and
closing the file inside the agent process drops that process's locks, and a second
process on the same state dir then corrupts the database. The last test runs two real
processes on one state dir while their models grep it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

from langchain_core.messages import AIMessage, ToolMessage

from ctxwarden import create_context_agent
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

SECRET = "token=other-thread-only-91c2"
WORKER = Path(__file__).with_name("grep_worker.py")

PROBES = [
    ("ls", {"path": "/"}),
    ("glob", {"pattern": "**/*"}),
    ("glob", {"pattern": "*.sqlite*"}),
    ("grep", {"pattern": SECRET}),
    ("grep", {"pattern": SECRET, "path": "/"}),
    ("grep", {"pattern": "SQLite format"}),
    ("read_file", {"file_path": "/checkpoints.sqlite"}),
    ("read_file", {"file_path": "/trace.sqlite-wal"}),
    ("read_file", {"file_path": "/./trace.sqlite"}),
    ("write_file", {"file_path": "/trace.sqlite", "content": "x"}),
    ("edit_file", {"file_path": "/checkpoints.sqlite", "old_string": "SQLite", "new_string": "gone"}),
]


def _other_thread(state_dir: Path) -> None:
    """A thread whose only copy of the secret is its checkpointed messages."""
    agent = create_context_agent(scripted_model(["noted"], window=200_000), [], state_dir=state_dir)
    agent.invoke({"messages": [("user", f"remember {SECRET}")]}, {"configurable": {"thread_id": "other"}})
    agent.checkpointer.conn.close()


def _probe(state_dir: Path) -> dict[str, ToolMessage]:
    calls = [{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(PROBES)]
    agent = create_context_agent(
        scripted_model([AIMessage("", tool_calls=calls), AIMessage("done")], window=200_000), [], state_dir=state_dir
    )
    out = agent.invoke({"messages": [("user", "look around")]}, {"configurable": {"thread_id": "prober"}})
    agent.checkpointer.conn.close()
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def test_the_models_file_tools_never_see_or_change_a_database(state_dir: Path) -> None:
    _other_thread(state_dir)
    (state_dir / "notes.md").write_text("the agent's own file\n", encoding="utf-8")
    before = len(TraceStore(state_dir / "trace.sqlite").events())
    results = _probe(state_dir)
    assert len(results) == len(PROBES)
    for call_id, message in results.items():
        assert SECRET not in str(message.content), (call_id, message.content)
    for call_id in ("c0", "c1", "c2", "c3", "c4", "c5"):  # listings and searches leave the databases out
        assert ".sqlite" not in str(results[call_id].content), (call_id, results[call_id].content)
    assert "notes.md" in str(results["c0"].content)  # the workspace itself is listed
    for call_id in ("c6", "c7", "c8", "c9", "c10"):
        assert "one of ctxwarden's own databases" in str(results[call_id].content), results[call_id].content
    assert (state_dir / "trace.sqlite").read_bytes().startswith(b"SQLite format 3")
    trace = TraceStore(state_dir / "trace.sqlite")
    assert trace.verify() == []
    assert len(trace.events()) > before  # every earlier event is still there, and the probe's were added
    with sqlite3.connect(state_dir / "checkpoints.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'other'").fetchone()[0] > 0


async def test_async_tools_never_see_a_database_either(state_dir: Path) -> None:
    _other_thread(state_dir)
    calls = [{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(PROBES)]
    agent = create_context_agent(
        scripted_model([AIMessage("", tool_calls=calls), AIMessage("done")], window=200_000), [], state_dir=state_dir
    )
    out = await agent.ainvoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": "aprober"}})
    agent.checkpointer.conn.close()
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            assert SECRET not in str(message.content)
            assert "checkpoints.sqlite-" not in str(message.content)
    assert TraceStore(state_dir / "trace.sqlite").verify() == []


def test_two_processes_sharing_a_state_dir_survive_models_that_grep_it(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    threads, steps = 8, 12  # on the old layout, 3 of 3 such runs crashed a worker or corrupted a database
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(state_dir), name, str(threads), str(steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    ran: list[str] = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err[-3000:]
            ran += json.loads(out.strip().splitlines()[-1])["threads"]
    finally:  # a failed worker must not leave its sibling running into the next test
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.communicate()
    assert len(ran) == 2 * threads

    for name in ("checkpoints.sqlite", "trace.sqlite"):
        with sqlite3.connect(state_dir / name) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", name
    trace = TraceStore(state_dir / "trace.sqlite")
    assert trace.verify() == []
    counts = Counter((e.thread_id, e.kind) for e in trace.events())
    for thread in ran:  # every event of every thread, none lost
        assert counts[(thread, "model_usage")] == steps + 1, thread
        assert counts[(thread, "tool_call")] == steps, thread
    with sqlite3.connect(state_dir / "checkpoints.sqlite") as conn:
        stored = {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert stored == set(ran)
