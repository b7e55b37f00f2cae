"""A full disk under the whole state dir — databases included — ends in a clear error, never in debris.

The state dir lives on a real 4 MiB filesystem (tmpfs, mounted for the test). After one
ordinary turn the disk is filled to a few hundred KiB, and a tool returns 1.5 MB: the
eviction fails part way, and its cut-off file must not stay behind; the message keeps the
whole result; the checkpoint of that step cannot be written, and `invoke` raises an error
that names the database, the thread and the cause. Once space is freed the thread resumes
from its last saved step and finishes, with the result evicted exactly.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.errors import CheckpointWriteError
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

HUGE = "\n".join(f"row {i:07d}: " + "x" * 60 for i in range(21_000))  # about 1.5 MB


@tool
def dump(part: str) -> str:
    """Dump a table."""
    return HUGE if part == "all" else f"table {part}: 3 rows"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path, leave: int) -> Path:
    """Fill the filesystem holding `folder` until `leave` bytes are free."""
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    filler = folder / "filler.bin"
    with filler.open("wb") as out:
        out.write(b"\0" * max(0, free - leave))
    return filler


def _call(part: str, call_id: str) -> AIMessage:
    return AIMessage("", id=f"m-{call_id}", tool_calls=[{"name": "dump", "args": {"part": part}, "id": call_id}])


def test_a_full_disk_ends_in_a_clear_error_and_the_thread_resumes_once_space_is_back(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = small_disk / "state"
    replies = [_call("a", "small"), AIMessage("first done"), _call("all", "huge"), AIMessage("second done")]
    agent = create_context_agent(scripted_model(replies, window=32_000), [dump], state_dir=state_dir)
    config = {"configurable": {"thread_id": "full"}}
    agent.invoke({"messages": [("user", "dump table a")]}, config, durability="sync")

    filler = _fill(small_disk, leave=400_000)
    caplog.set_level(logging.WARNING)
    with pytest.raises(CheckpointWriteError) as failed:
        agent.invoke({"messages": [("user", "dump everything")]}, config, durability="sync")
    message = str(failed.value)
    assert str(state_dir / "checkpoints.sqlite") in message
    assert "'full'" in message
    assert "disk holding it is full" in message
    assert "resume" in message

    results = state_dir / "large_tool_results" / "full"
    assert not results.exists() or not any(results.iterdir())  # no cut-off copy left behind
    (event,) = TraceStore(state_dir / "trace.sqlite").events(kind="eviction")
    assert event.payload["ok"] is False
    assert "No space left on device" in event.payload["error"]
    assert event.payload["path"].startswith("/large_tool_results/full/huge-")
    assert not any("cannot rollback" in m for m in caplog.messages)  # no misleading cause anywhere

    with sqlite3.connect(state_dir / "checkpoints.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    filler.unlink()  # space is back: the thread goes on from its last saved step
    out = agent.invoke(None, config, durability="sync")
    assert out["messages"][-1].content == "second done"
    huge = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "huge")
    path = huge.response_metadata["ctxwarden"]["path"]
    assert (state_dir / path.lstrip("/")).read_text(encoding="utf-8") == HUGE
    assert [m.content for m in out["messages"] if isinstance(m, AIMessage) and m.content] == [
        "first done",
        "second done",
    ]
    agent.checkpointer.conn.close()
    assert TraceStore(state_dir / "trace.sqlite").verify() == []
