"""A worker process for the two-process test: many threads on one state dir whose model keeps grepping it.

`python grep_worker.py STATE_DIR WORKER THREADS STEPS` runs THREADS threads at once, each a
fresh agent on the shared state dir (one `checkpoints.sqlite`, one `trace.sqlite`) whose
scripted model calls `grep` over the whole backend, `ls /`, `glob` and a small tool, STEPS
times, then answers. Prints one JSON line: the threads it ran.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.replay import scripted_model

NEEDLE = "needle-in-every-thread"


@tool
def note(text: str) -> str:
    """Record a note and echo it."""
    return f"noted: {text} {NEEDLE}"


def _script(steps: int) -> list[AIMessage]:
    probes = [
        ("grep", {"pattern": NEEDLE}),
        ("grep", {"pattern": "SQLite format", "path": "/"}),
        ("ls", {"path": "/"}),
        ("glob", {"pattern": "**/*"}),
        ("note", {"text": "step"}),
    ]
    replies = []
    for i in range(steps):
        name, args = probes[i % len(probes)]
        replies.append(AIMessage(f"step {i}", tool_calls=[{"name": name, "args": args, "id": f"p{i}"}]))
    return [*replies, AIMessage("done")]


def _thread(state_dir: Path, thread: str, steps: int) -> str:
    agent = create_context_agent(scripted_model(_script(steps), window=200_000), [note], state_dir=state_dir)
    try:
        agent.invoke({"messages": [("user", f"look around {thread}")]}, {"configurable": {"thread_id": thread}})
    finally:
        agent.checkpointer.conn.close()
    return thread


def main() -> None:
    state_dir, worker, threads, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    names = [f"{worker}-{i}" for i in range(threads)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        done = list(pool.map(lambda name: _thread(state_dir, name, steps), names))
    sys.stdout.write(json.dumps({"threads": done}) + "\n")


if __name__ == "__main__":
    main()
