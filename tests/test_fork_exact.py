"""A fork keeps what its source's messages and history said, and a fork of a fork reads the history its summary names.

Before:
- To name its copies of the source's files, a fork replaced the source's paths across the whole text of every
  seeded message: a user's message naming `/conversation_history/src.md` was rewritten in the fork.
- The fork's copy of the history file had the same replacement made in it: a folded user message that named the
  path changed, and each section's heading still stated the old length, so the sections could no longer be walked.
  Now only ctxwarden's own lines in it (a part's first line, an evicted result's note) name the copies.
- A fork of a fork got no copy of the history file its seeded summary named (`fork-of-<source>.md`): the summary
  told the model to read a file of another thread, which it could not open.
"""

from __future__ import annotations

import re
from pathlib import Path

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, Session, ThreadIsolatedBackend
from ctxwarden.fold.history import _section_start
from ctxwarden.replay import scripted_model
from pages import steps


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"UNIQUE-PAGE-{page}-MARK " + "data " * 150


def _session(state_dir: Path, replies: list[AIMessage], thread: str = "src") -> Session:
    return Session(
        scripted_model(replies, window=200_000),
        [fetch],
        state_dir=state_dir,
        thread_id=thread,
        summarizer=DETERMINISTIC,
    )


def test_a_fork_keeps_a_users_words_that_name_the_sources_files(tmp_path: Path) -> None:
    said = "please never touch /conversation_history/src.md, I keep my notes in it"
    replies = [*steps(3), AIMessage("first done"), AIMessage("second done")]
    with _session(tmp_path, replies) as source:
        source.invoke("first task")
        source.compact()
        source.invoke(said)
        turn = [u.index for u in source.units() if u.kind == "turn"][-1]
        with source.fork([turn], thread_id="kid") as kid:
            assert kid.messages[0].content == said  # before: `/conversation_history/kid/fork-of-src.md`


@tool
def build(target: str) -> str:
    """Build `target` and return its log."""
    return "\n".join(f"BUILD<{target}> line {i}: compiled module_{i}" for i in range(3_000))


def test_a_forks_copy_of_the_history_keeps_the_folded_turns_as_they_were_said(tmp_path: Path) -> None:
    said = "my notes live in /conversation_history/src.md and /large_tool_results/src/b1, quote them back exactly"
    call = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "all"}, "id": "b1"}])
    replies = [AIMessage("noted"), call, AIMessage("built"), AIMessage("second done")]
    with Session(
        scripted_model(replies, window=200_000), [build], state_dir=tmp_path, thread_id="src", summarizer=DETERMINISTIC
    ) as source:
        source.invoke("task: build it")
        source.invoke(said)
        source.invoke("build all")
        assert source.compact() is not None
        fold = [u.index for u in source.units() if u.kind == "fold"]
        with source.fork(fold, thread_id="kid") as kid:
            summary = str(kid.messages[-1].content)
    original = (tmp_path / "conversation_history/src.md").read_text(encoding="utf-8")
    copy = (tmp_path / "conversation_history/kid/fork-of-src.md").read_text(encoding="utf-8")
    assert said in original
    assert said in copy  # before: the user's words named the fork's copies
    assert "/conversation_history/kid/fork-of-src.md" in summary  # the seed's own footer names the copy
    notes = [line for line in copy.splitlines() if line.startswith("[ctxwarden: evicted")]
    assert notes
    assert all("/large_tool_results/kid/b1" in line for line in notes)  # ctxwarden's own note names the copy
    assert _section_start(copy, 99) == len(copy)  # every section whole: its heading states its new length
    assert _section_start(original, 99) == len(original)


def test_a_fork_of_a_fork_reads_the_history_its_summary_names(tmp_path: Path) -> None:
    replies = [*steps(4), AIMessage("first done"), AIMessage("second done")]
    with _session(tmp_path, replies) as source:
        source.invoke("first task")
        source.compact()
        source.invoke("second task")
        fold = [u.index for u in source.units() if u.kind == "fold"]
        with source.fork(fold, thread_id="kid", model=scripted_model(["k"], window=200_000)) as kid:
            units = [u.index for u in kid.units()]
            with kid.fork(units, thread_id="grand", model=scripted_model(["g"], window=200_000)) as grand:
                named = re.findall(r"/conversation_history/\S+\.md", " ".join(str(m.content) for m in grand.messages))
    assert named == ["/conversation_history/grand/fork-of-kid-fork-of-src.md"]  # before: the kid's own copy
    ask = AIMessage("", tool_calls=[{"name": "read_file", "args": {"file_path": named[0]}, "id": "r1"}])
    with _session(tmp_path, [ask, AIMessage("read")], thread="grand") as grand:
        assert isinstance(grand.agent.ctxwarden_parts.backend, ThreadIsolatedBackend)
        out = grand.invoke("open the file the summary names")
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1"]
    assert answer.status != "error"
    assert "UNIQUE-PAGE-2-MARK" in str(answer.content)
