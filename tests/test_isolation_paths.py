"""The agent's file tools on paths that reach past one file: a folder above everything, a file a search widens, a
thread id shaped like deepagents' own history names, a backend of real paths.

Before:
- `delete` of `/` (or `.`, or a folder holding `trace.sqlite`) removed the whole state dir: every thread's evicted
  outputs and history, and the databases.
- deepagents' Python search (where ripgrep is not installed), handed a file, walks the file's folder: `grep` of
  `/notes.txt` opened the databases and every thread's files, and a search cut at `max_count` stopped early on
  another thread's match, which told its text a bit at a time.
- A thread `"session_" + uuid4().hex` had its history named as deepagents names its own, which any thread may open by
  name: another thread read and edited it, and the thread's own agent overwrote and deleted it.
- `FilesystemBackend(virtual_mode=False)` under the isolating wrapper was accepted, and the agent overwrote
  `trace.sqlite` by its absolute path.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend
from deepagents.backends import filesystem as deepagents_filesystem
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import BuildArgumentError, ThreadIsolatedBackend, compact, create_context_agent
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import Folds
from ctxwarden.replay import scripted_model

SECRET = "token=owner-only-7f3a"
LOG = "\n".join(f"INFO step {i}: {SECRET} compiled module_{i}" for i in range(900))

OPENED: list[str] = []
"""Files opened in this process while `_ARMED` holds (an audit hook cannot be removed once added)."""
_ARMED: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _ARMED[0] and event == "open" and isinstance(args[0], str | Path):
        OPENED.append(str(args[0]))


sys.addaudithook(_audit)


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def _owner(state_dir: Path, thread: str = "owner", **kwargs: Any) -> tuple[str, str]:
    """A thread that evicted the secret build log and folded it: (its evicted file's path, its history file's)."""
    call = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "all"}, "id": "c0"}])
    agent = create_context_agent(
        scripted_model([call, AIMessage("built")], window=32_000), [build], state_dir=state_dir, **kwargs
    )
    config = {"configurable": {"thread_id": thread}}
    out = agent.invoke({"messages": [("user", "build it")]}, config)
    compact(agent, config, summarizer="deterministic")
    history = Folds.from_state(agent.get_state(config).values).last
    agent.checkpointer.conn.close()
    evicted = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.response_metadata.get(METADATA_KEY))
    assert history is not None
    assert history.path is not None
    return evicted.response_metadata[METADATA_KEY]["path"], history.path


def _probe(
    state_dir: Path, thread: str, probes: list[tuple[str, dict[str, Any]]], run: str = "sync", **kwargs: Any
) -> list[ToolMessage]:
    """Thread `thread`'s agent makes each of `probes`, all in one turn; the results in order."""
    calls = [{"name": name, "args": args, "id": f"p{i}"} for i, (name, args) in enumerate(probes)]
    model = scripted_model([AIMessage("", tool_calls=calls), AIMessage("done")], window=200_000)
    agent = create_context_agent(model, [build], state_dir=state_dir, **kwargs)
    config = {"configurable": {"thread_id": thread}}
    request = {"messages": [("user", "look around")]}
    out = agent.invoke(request, config) if run == "sync" else asyncio.run(agent.ainvoke(request, config))
    agent.checkpointer.conn.close()
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    return [answers[f"p{i}"] for i in range(len(probes))]


def _tree(state_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(state_dir)) for p in state_dir.rglob("*"))


@pytest.mark.parametrize("run", ["sync", "async"])
@pytest.mark.parametrize("target", ["/", ".", "", "/logs"])
def test_a_delete_of_a_folder_above_the_offloaded_files_or_a_database_is_refused(
    tmp_path: Path, run: str, target: str
) -> None:
    state = tmp_path / "state"
    trace = state / "logs" / "trace.sqlite"  # a trace kept in a folder of its own
    _owner(state, trace=trace)
    before = _tree(state)
    (answer,) = _probe(state, "intruder", [("delete", {"file_path": target})], run, trace=trace)
    assert answer.status == "error"
    assert "permission_denied" in str(answer.content)
    assert _tree(state) == before  # before: the state dir (or the folder with the trace) was gone


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_grep_naming_a_file_opens_that_file_alone(tmp_path: Path, run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deepagents_filesystem, "_resolve_ripgrep_path", lambda: None)  # deepagents' Python search
    state = tmp_path / "state"
    _owner(state)
    _probe(state, "intruder", [("write_file", {"file_path": "/notes.txt", "content": "my notes\nmore notes\n"})])
    right, wrong = SECRET[:-1] + SECRET[-1], SECRET[:-1] + "0"
    probes: list[tuple[str, dict[str, Any]]] = [
        ("grep", {"pattern": "notes", "path": "/notes.txt", "output_mode": "content"}),
        ("grep", {"pattern": "notes", "output_mode": "content"}),
        ("grep", {"pattern": right, "max_count": 1, "output_mode": "content", "glob": "large_tool_results/**"}),
        ("grep", {"pattern": wrong, "max_count": 1, "output_mode": "content", "glob": "large_tool_results/**"}),
        ("grep", {"pattern": "notes", "path": "/notes.txt", "glob": "*.py"}),
    ]
    OPENED.clear()
    _ARMED[0] = True
    try:
        named, whole, guessed, missed, globbed = _probe(state, "intruder", probes, run)
    finally:
        _ARMED[0] = False
    opened = {Path(p).resolve() for p in OPENED}
    assert any(p.name == "notes.txt" for p in opened)  # the hook sees what the searches open
    assert not {p for p in opened if ".sqlite" in p.name}  # before: both databases and their sidecars
    assert not {p for p in opened if "owner" in str(p)}  # before: the other thread's evicted output and history
    assert "my notes" in str(named.content)
    assert "more notes" in str(named.content)
    assert "my notes" in str(whole.content)
    assert str(guessed.content) == str(missed.content)  # before: only the right guess "stopped early"
    assert "my notes" not in str(globbed.content)  # the include glob holds for a file named whole too


def test_a_thread_named_as_deepagents_names_its_history_keeps_that_history_its_own(tmp_path: Path) -> None:
    state = tmp_path / "state"
    thread = "session_" + uuid.uuid4().hex
    _evicted, history = _owner(state, thread)
    assert history != f"/conversation_history/{thread}.md"  # before: a name any thread may open
    original = (state / history.lstrip("/")).read_text()
    read, edited = _probe(
        state,
        "intruder",
        [
            ("read_file", {"file_path": history}),
            ("edit_file", {"file_path": history, "old_string": "## fold 1", "new_string": "## forged"}),
        ],
    )
    assert read.status == edited.status == "error"
    assert SECRET not in str(read.content)
    written, deleted = _probe(
        state,
        thread,
        [
            ("write_file", {"file_path": history, "content": "nothing happened here\n"}),
            ("delete", {"file_path": history}),
        ],
    )
    assert written.status == deleted.status == "error"
    assert (state / history.lstrip("/")).read_text() == original


@pytest.mark.parametrize("where", ["wrapped", "a composite's default", "a composite's route"])
def test_a_backend_reading_the_machines_own_paths_cannot_be_isolated(tmp_path: Path, where: str) -> None:
    real = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    inner: Any = real
    if where == "a composite's default":
        inner = CompositeBackend(default=real, routes={"/memories/": StateBackend()})
    elif where == "a composite's route":
        inner = CompositeBackend(default=StateBackend(), routes={"/workspace/": real})
    with pytest.raises(BuildArgumentError, match=r"virtual_mode=True"):
        ThreadIsolatedBackend(inner)
    ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))  # the way that works
