"""A deleted thread takes its offloaded files with it, and a thread that takes its id sees nothing of it.

A thread id is the client's, and a deleted thread's id is free again. A checkpointer's own
`delete_thread` removes the checkpoints only: before, the new thread of that id listed and
read the evicted outputs and history of the one before it, and a fork of the deleted thread
searched the new one as its parent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import DeleteResult
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from ctxwarden import (
    ContextPolicy,
    Session,
    ThreadDeleteError,
    ThreadIsolatedBackend,
    ThreadIsolatedStoreBackend,
    TraceStore,
    adelete_thread,
    create_context_agent,
    delete_thread,
)
from ctxwarden.core.layout import folder_name
from ctxwarden.replay import scripted_model
from ctxwarden.stack.deletion import thread_paths
from ctxwarden.thread import known_threads

WINDOW = 8_000
THOUGHT = "Let me think about the parser carefully. " * 40
POLICY = ContextPolicy(clear_call_text=False)  # the reasoning stays in view, so the thread folds
OLD_LOG = "\n".join(f"old line {i}: OLD_SECRET_{i}" for i in range(400))  # ~2,400 tokens: evicted at arrival
NEW_LOG = "\n".join(f"new line {i}: NEW_SECRET_{i}" for i in range(400))


@tool
def sh(command: str) -> str:
    """Run a shell command."""
    return {"old-log": OLD_LOG, "new-log": NEW_LOG}.get(command, f"ran {command}: " + "ok " * 30)


def _call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": name, "args": args, "id": call_id}])


def _tool_answers(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in messages if isinstance(m, ToolMessage)}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".sqlite" not in p.name)


def _old_thread(tmp_path: Path, thread: str) -> Session:
    """A thread that evicted an output at arrival and folded its history."""
    script = [
        _call("sh", {"command": "old-log"}, "o-log"),
        *[_call("sh", {"command": f"step {i}"}, f"o{i}", THOUGHT) for i in range(14)],
        "done",
    ]
    session = Session(
        scripted_model(script, window=WINDOW),
        [sh],
        state_dir=tmp_path,
        thread_id=thread,
        summarizer="deterministic",
        policy=POLICY,
    )
    session.invoke("Fix the build. The password is OLD_PASSWORD.")
    return session


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_deleted_threads_id_used_again_starts_clean(tmp_path: Path, run: str) -> None:
    thread = "Chat-7"  # a client's own id, not a plain folder name
    other = _old_thread(tmp_path, "other")
    session = _old_thread(tmp_path, thread)
    folder = folder_name(thread)
    before = _files(tmp_path)
    assert f"conversation_history/{folder}.md" in before  # it folded
    assert any(f.startswith(f"large_tool_results/{folder}/o-log") for f in before)  # and evicted
    others = [f for f in before if folder not in f]
    assert others  # the other thread's files, which must stay

    deleted = session.delete() if run == "sync" else asyncio.run(session.adelete())

    assert deleted.thread_id == thread
    assert deleted.checkpoints
    assert set(deleted.paths) >= {f"/large_tool_results/{folder}", f"/conversation_history/{folder}.md"}
    assert set(deleted.paths) <= set(thread_paths(thread))  # and its parts' folder, when one was made
    assert _files(tmp_path) == others  # every file of the thread gone, every other thread's kept
    assert known_threads(session.checkpointer) == ["other"]
    (event,) = TraceStore(tmp_path / "trace.sqlite").events(thread_id=thread, kind="thread_deleted")
    assert sorted(event.payload["paths"]) == sorted(deleted.paths)

    # the same id, used again: nothing of the thread before it, by listing, reading or searching
    session.switch_model(
        scripted_model(
            [
                _call("ls", {"path": f"/large_tool_results/{folder}"}, "n-ls"),
                _call("read_file", {"file_path": f"/conversation_history/{folder}.md"}, "n-read"),
                _call("recall", {"query": "OLD_SECRET_250"}, "n-evicted"),
                _call("recall", {"query": "OLD_PASSWORD"}, "n-user"),
                "done",
            ],
            window=WINDOW,
        )
    )
    out = session.invoke("A new conversation.")
    answers = _tool_answers(out["messages"])
    assert "o-log" not in answers["n-ls"]
    assert "OLD_PASSWORD" not in answers["n-read"]
    assert "not found" in answers["n-read"].lower()
    for call_id in ("n-evicted", "n-user"):
        assert answers[call_id].startswith("[ctxwarden: no line of this conversation matches"), answers[call_id]
    report = session.context()
    assert report.calls == 5  # only the new thread's calls
    session.close()
    other.close()


def test_a_fork_never_searches_a_new_thread_that_took_its_parents_id(tmp_path: Path) -> None:
    parent = _old_thread(tmp_path, "parent")
    searches = {"f-old": "OLD_SECRET_250", "f-new": "NEW_SECRET_250", "f-new-args": "echo NEW_PASSWORD"}
    fork = parent.fork(
        [0],
        thread_id="fork",
        model=scripted_model([*(_call("recall", {"query": q}, i) for i, q in searches.items()), "done"], window=WINDOW),
    )
    parent.checkpointer.delete_thread("parent")  # the checkpointer alone, as a server deleting the thread does
    newcomer = Session(
        scripted_model(
            [_call("sh", {"command": "echo NEW_PASSWORD"}, "n1"), _call("sh", {"command": "new-log"}, "n2"), "ok"],
            window=WINDOW,
        ),
        [sh],
        state_dir=tmp_path,
        thread_id="parent",
        summarizer="deterministic",
    )
    newcomer.invoke("Someone else's conversation.")
    answers = _tool_answers(fork.invoke("Search.")["messages"])
    for call_id in searches:
        assert answers[call_id].startswith("[ctxwarden: no line of this conversation matches"), answers[call_id]
    for session in (parent, newcomer, fork):
        session.close()


def test_a_fork_keeps_searching_its_parent_until_it_is_deleted(tmp_path: Path) -> None:
    parent = _old_thread(tmp_path, "parent")
    parent.switch_model(scripted_model(["noted", "noted again"], window=WINDOW))
    parent.invoke("One more turn.")  # the parent goes on after the fork was made: still its parent
    model = scripted_model([_call("recall", {"query": "OLD_SECRET_250"}, "f1"), "done"], window=WINDOW)
    fork = parent.fork([0], thread_id="fork", model=model)
    parent.invoke("Another turn.")
    answer = _tool_answers(fork.invoke("Search.")["messages"])["f1"]
    assert "- parent thread 'parent': call o-log (sh, turn 1) result, line 251 [evicted]" in answer
    for session in (parent, fork):
        session.close()


def test_an_agent_built_by_create_context_agent_deletes_with_its_own_backend(tmp_path: Path) -> None:
    saver = InMemorySaver()
    script = [_call("sh", {"command": "old-log"}, "o-log"), "done"]
    agent = create_context_agent(scripted_model(script, window=32_000), [sh], state_dir=tmp_path, checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [("user", "go")]}, config)
    assert any(f.startswith("large_tool_results/t/") for f in _files(tmp_path))

    deleted = delete_thread(agent, config)

    assert deleted.checkpoints
    assert deleted.paths == ("/large_tool_results/t",)
    assert _files(tmp_path) == []
    assert agent.get_state(config).values == {}
    # deleted again, or files left by a checkpointer's own deletion: nothing held, nothing left, no error
    again = delete_thread(agent, config)
    assert not again.checkpoints
    assert again.paths == ()


class _RefusingBackend(FilesystemBackend):
    """A backend that cannot delete the history file (a file held open elsewhere, a read-only share)."""

    def delete(self, file_path: str) -> DeleteResult:
        if file_path.endswith(".md"):
            return DeleteResult(error=f"Error deleting '{file_path}': Permission denied")
        return super().delete(file_path)


def test_a_file_that_cannot_be_deleted_keeps_the_checkpoints_and_says_how_to_go_on(tmp_path: Path) -> None:
    session = _old_thread(tmp_path, "t")
    backend = ThreadIsolatedBackend(_RefusingBackend(root_dir=tmp_path, virtual_mode=True))
    with pytest.raises(ThreadDeleteError) as raised:
        delete_thread(session.checkpointer, session.config, backend=backend)
    message = str(raised.value)
    assert "/conversation_history/t.md: Error deleting" in message
    assert "call delete_thread again" in message
    assert known_threads(session.checkpointer) == ["t"]  # the thread is kept, to be deleted again
    assert "conversation_history/t.md" in _files(tmp_path)
    deleted = session.delete()  # the cause gone: what was already deleted is skipped
    assert deleted.paths == ("/conversation_history/t.md",)
    assert _files(tmp_path) == []
    session.close()


def test_an_agents_own_tool_cannot_delete_a_thread(tmp_path: Path) -> None:
    """Inside a run an agent's tool reaches only its own thread, whose originals it may not remove."""
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    saver = InMemorySaver()
    outcome: dict[str, str] = {}

    @tool
    def wipe(thread: str) -> str:
        """Delete a thread."""
        try:
            delete_thread(saver, {"configurable": {"thread_id": thread}}, backend=backend)
        except ThreadDeleteError as exc:
            outcome[thread] = str(exc)
        return "tried"

    script = [
        _call("sh", {"command": "old-log"}, "o-log"),
        _call("wipe", {"thread": "victim"}, "w1"),
        _call("wipe", {"thread": "me"}, "w2"),
        "done",
    ]
    backend.inner.write("/large_tool_results/victim/kept", "another thread's output")
    agent = create_context_agent(scripted_model(script, window=32_000), [sh, wipe], backend=backend, checkpointer=saver)
    agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "me"}})
    assert "permission_denied" in outcome["victim"]
    assert "another thread" in outcome["victim"]
    assert "is an original ctxwarden keeps" in outcome["me"]
    assert (tmp_path / "large_tool_results/victim/kept").is_file()
    assert any(f.startswith("large_tool_results/me/o-log") for f in _files(tmp_path))
    assert known_threads(saver) == ["me"]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_on_a_store_a_deleted_parent_is_no_forks_parent(run: str) -> None:
    store = InMemoryStore()
    operator = ThreadIsolatedStoreBackend(store, current_thread=lambda: None)
    saver = InMemorySaver()
    for thread in ("Parent-A", "other"):
        operator.write(f"/large_tool_results/{folder_name(thread)}/out", f"{thread}'s output")
        operator.write(f"/conversation_history/{folder_name(thread)}.md", f"{thread}'s history")
    operator.record_fork("Parent-A", "Fork-B")
    operator.record_fork("Fork-B", "Fork-C")
    fork = ThreadIsolatedStoreBackend(store, current_thread=lambda: "Fork-B")
    parent_output = f"/large_tool_results/{folder_name('Parent-A')}/out"
    assert fork.read(parent_output).error is None  # a fork reads its parent's files, whatever the ids' shapes

    config = {"configurable": {"thread_id": "Parent-A"}}
    if run == "sync":
        deleted = delete_thread(saver, config, backend=operator)
    else:
        deleted = asyncio.run(adelete_thread(saver, config, backend=operator))

    assert not deleted.checkpoints
    assert len(deleted.paths) == 2
    assert operator.read(f"/large_tool_results/{folder_name('other')}/out").error is None
    # a new thread takes the id and writes there: the fork does not read it, another worker's backend neither
    operator.write(parent_output, "a new thread's output")
    for backend in (fork, ThreadIsolatedStoreBackend(store, current_thread=lambda: "Fork-B")):
        assert "permission_denied" in (backend.read(parent_output).error or "")
        assert backend.ancestors("Fork-B") == []
    assert operator.ancestors("Fork-C") == [folder_name("Fork-B")]  # the relation between the forks stays
