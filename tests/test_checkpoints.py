"""The default checkpointer: a real SQLite file, usable from sync and async code, resumable in a new process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ctxwarden import create_context_agent, open_checkpointer
from ctxwarden.replay import scripted_model

CONFIG = {"configurable": {"thread_id": "resume-me"}}

RESUME = textwrap.dedent(
    """
    import sys
    from ctxwarden import create_context_agent
    from ctxwarden.replay import scripted_model

    agent = create_context_agent(scripted_model(["second answer"], window=8000), state_dir=sys.argv[1])
    out = agent.invoke({"messages": [("user", "second question")]}, {"configurable": {"thread_id": "resume-me"}})
    print("|".join(str(m.content) for m in out["messages"]))
    """
)


def test_a_thread_resumes_in_a_fresh_process(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["first answer"], window=8_000), state_dir=state_dir)
    agent.invoke({"messages": [("user", "first question")]}, CONFIG)
    agent.checkpointer.conn.close()

    done = subprocess.run([sys.executable, "-c", RESUME, str(state_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "first question|first answer|second question|second answer"


async def test_async_methods_work_on_the_sync_connection(tmp_path: Path) -> None:
    saver = open_checkpointer(tmp_path / "c.sqlite")
    agent = create_context_agent(scripted_model(["a"], window=8_000), state_dir=tmp_path, checkpointer=saver)
    await agent.ainvoke({"messages": [("user", "q")]}, CONFIG)
    listed = [c async for c in saver.alist(CONFIG)]
    assert listed
    assert (await saver.aget_tuple(CONFIG)) is not None
    await saver.adelete_thread("resume-me")
    assert (await saver.aget_tuple(CONFIG)) is None
    assert saver.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    saver.conn.close()
