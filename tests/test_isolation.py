"""Isolation: one thread's offloaded results and history are not listed or readable through another's tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import (
    DETERMINISTIC,
    ContextPolicy,
    ThreadIsolatedBackend,
    compact,
    context_middleware,
    create_context_agent,
)
from ctxwarden.clip.names import call_key, result_path
from ctxwarden.core.identity import identified
from ctxwarden.fold.history import history_path
from ctxwarden.replay import scripted_model
from ctxwarden.stack.isolation import owner_of
from ctxwarden.thread.checkpoints import open_checkpointer

SECRET = "token=owner-only-7f3a"
LOG = "\n".join([f"INFO step {i}: {SECRET} compiled module_{i}" for i in range(900)])


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def _calls(*calls: tuple[str, dict], id: str | None = None) -> AIMessage:
    return AIMessage("", id=id, tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)])


OWNER_FILE = result_path("owner", "", "c0", call_key("owner-build", 0))
"""Where the owner thread's evicted build log goes (keyed by the call that made it)."""


def _owner_thread(state_dir: Path) -> None:
    """Thread `owner` evicts a large result and folds its history to a file."""
    agent = create_context_agent(
        scripted_model([_calls(("build", {"target": "all"}), id="owner-build"), AIMessage("built")], window=32_000),
        [build],
        state_dir=state_dir,
    )
    config = {"configurable": {"thread_id": "owner"}}
    agent.invoke({"messages": [("user", "build it")]}, config)
    compact(agent, config, summarizer="deterministic")
    agent.checkpointer.conn.close()
    assert (state_dir / OWNER_FILE.lstrip("/")).is_file()
    assert (state_dir / "conversation_history" / "owner.md").is_file()


PROBES = [
    ("read_file", {"file_path": OWNER_FILE}),
    ("read_file", {"file_path": "/conversation_history/owner.md"}),
    ("read_file", {"file_path": OWNER_FILE.replace("/owner/", "/intruder/../owner/")}),
    ("read_file", {"file_path": "/" + OWNER_FILE}),
    ("ls", {"path": "/large_tool_results/owner"}),
    ("ls", {"path": "/large_tool_results"}),
    ("ls", {"path": "/conversation_history"}),
    ("glob", {"pattern": "**/*"}),
    ("grep", {"pattern": "owner-only"}),
    ("grep", {"pattern": "owner-only", "path": "/large_tool_results/owner"}),
    ("edit_file", {"file_path": "/conversation_history/owner.md", "old_string": "## fold 1", "new_string": "gone"}),
]


def _intruder_results(state_dir: Path, *, isolate: bool = True) -> dict[str, ToolMessage]:
    plain = {} if isolate else {"checkpointer": open_checkpointer(state_dir.parent / "intruder.sqlite"), "trace": False}
    agent = create_context_agent(
        scripted_model([_calls(*PROBES), AIMessage("done")], window=200_000),
        [build],
        state_dir=state_dir,
        backend=None if isolate else FilesystemBackend(root_dir=state_dir, virtual_mode=True),
        **plain,
    )
    out = agent.invoke({"messages": [("user", "look around")]}, {"configurable": {"thread_id": "intruder"}})
    agent.checkpointer.conn.close()
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def test_another_thread_cannot_list_read_search_or_edit_what_a_thread_offloaded(state_dir: Path) -> None:
    _owner_thread(state_dir)
    results = _intruder_results(state_dir)
    assert len(results) == len(PROBES)
    for call_id, message in results.items():
        assert SECRET not in str(message.content), (call_id, message.content)
    assert "not allowed" in str(results["c2"].content)  # deepagents refuses `..` before the backend sees it
    for call_id in ("c0", "c1", "c3", "c4", "c9", "c10"):
        assert "another thread" in str(results[call_id].content), results[call_id].content
    for call_id in ("c5", "c6", "c7", "c8"):  # listings and searches leave the other thread out
        assert "owner" not in str(results[call_id].content), results[call_id].content
    assert "## fold 1" in (state_dir / "conversation_history" / "owner.md").read_text(encoding="utf-8")


def test_without_the_wrapper_the_same_tools_do_reach_it(state_dir: Path) -> None:
    """The probes are real: on a plain backend they find the other thread's data."""
    _owner_thread(state_dir)
    results = _intruder_results(state_dir, isolate=False)
    assert SECRET in str(results["c0"].content)
    assert "owner" in str(results["c5"].content)


def test_a_thread_still_reads_its_own_offloaded_files(state_dir: Path) -> None:
    _owner_thread(state_dir)
    agent = create_context_agent(
        scripted_model(
            [_calls(("read_file", {"file_path": OWNER_FILE, "limit": 5})), AIMessage("ok")],
            window=200_000,
        ),
        [build],
        state_dir=state_dir,
    )
    out = agent.invoke({"messages": [("user", "read it back")]}, {"configurable": {"thread_id": "owner"}})
    agent.checkpointer.conn.close()
    read = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert SECRET in str(read.content)


async def test_async_tools_are_isolated_too(state_dir: Path) -> None:
    _owner_thread(state_dir)
    agent = create_context_agent(
        scripted_model([_calls(*PROBES), AIMessage("done")], window=200_000), [build], state_dir=state_dir
    )
    out = await agent.ainvoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": "intruder"}})
    agent.checkpointer.conn.close()
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            assert SECRET not in str(message.content)


def test_outside_a_run_the_operator_reaches_every_thread(state_dir: Path) -> None:
    _owner_thread(state_dir)
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=state_dir, virtual_mode=True))
    (found,) = backend.download_files([OWNER_FILE])
    assert found.error is None
    assert found.content == LOG.encode()
    assert backend.cwd == state_dir.resolve()  # the wrapped backend's attributes show through


def test_batches_answer_each_path_in_order(tmp_path: Path) -> None:
    inner = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    backend = ThreadIsolatedBackend(inner, current_thread=lambda: "me")
    uploaded = backend.upload_files([("/large_tool_results/me/a", b"mine"), ("/large_tool_results/you/b", b"x")])
    assert next(u.error for u in uploaded) is None
    assert "permission_denied" in str(uploaded[1].error)
    assert not (tmp_path / "large_tool_results" / "you").exists()
    inner.upload_files([("/large_tool_results/you/b", b"theirs")])
    downloaded = backend.download_files(["/large_tool_results/you/b", "/large_tool_results/me/a", "/notes.md"])
    assert downloaded[0].content is None
    assert "permission_denied" in str(downloaded[0].error)
    assert downloaded[1].content == b"mine"
    assert downloaded[2].error is not None
    assert "permission_denied" not in str(downloaded[2].error)


@pytest.mark.parametrize(
    ("path", "owner"),
    [
        ("/large_tool_results/t1/c0", "t1"),
        ("/large_tool_results/t1/tools_abc/c0", "t1"),
        ("/conversation_history/t1.md", "t1"),
        ("/conversation_history/t1/tools_abc.md", "t1"),
        ("large_tool_results/t1", "t1"),
        ("/x/../large_tool_results/t2/c0", "t2"),
        ("/LARGE_TOOL_RESULTS/t2/c0", "t2"),
        ("/large_tool_results", None),
        ("/notes/large_tool_results/t1", None),
        ("/memory/MEMORY.md", None),
    ],
)
def test_owner_of_reads_the_thread_component(path: str, owner: str | None) -> None:
    assert owner_of(path) == owner


def test_the_policy_does_not_change_isolation(state_dir: Path) -> None:
    """Isolation holds on a small window too, where the probes' own results are evicted."""
    _owner_thread(state_dir)
    agent = create_context_agent(
        scripted_model([_calls(*PROBES), AIMessage("done")], window=8_000),
        [build],
        state_dir=state_dir,
        policy=ContextPolicy(),
    )
    out = agent.invoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": "intruder"}})
    agent.checkpointer.conn.close()
    assert all(SECRET not in str(m.content) for m in out["messages"] if isinstance(m, ToolMessage))
    assert not (state_dir / "large_tool_results" / "intruder").exists() or all(
        SECRET not in p.read_text(encoding="utf-8", errors="replace")
        for p in (state_dir / "large_tool_results" / "intruder").rglob("*")
        if p.is_file()
    )


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_run_without_a_thread_id_reaches_no_thread_s_files(state_dir: Path, how: str) -> None:
    """A run without a checkpointer has no thread id; it was let into every thread's folder, as ctxwarden's own work
    outside any run is, and read the owner's evicted log (`read_file`, `grep`)."""
    _owner_thread(state_dir)
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=state_dir, virtual_mode=True))
    model = scripted_model([_calls(*PROBES), AIMessage("done")], window=200_000)
    agent = create_deep_agent(model, [build], backend=backend, middleware=[context_middleware(trace=False)])
    state = {"messages": [("user", "look around")]}
    out = agent.invoke(state) if how == "sync" else asyncio.run(agent.ainvoke(state))
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert len(results) == len(PROBES)
    for call_id, message in results.items():
        assert SECRET not in str(message.content), (call_id, message.content)
    for call_id in ("c0", "c1", "c3", "c4", "c9", "c10"):
        assert "another thread" in str(results[call_id].content), results[call_id].content
    assert "## fold 1" in (state_dir / "conversation_history" / "owner.md").read_text(encoding="utf-8")


def test_runs_without_a_thread_id_read_their_files_by_name_and_never_list_each_other_s(tmp_path: Path) -> None:
    """Runs without a thread id share `/large_tool_results/no-thread/`; a stateless endpoint serving several users
    let one list and search another's evicted output there. A run reads a file there by the name its messages give
    (a client resending its history keeps its way back); listings and searches leave the folder out."""
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    def run(replies: list[AIMessage], history: list[Any] | None = None) -> list[Any]:
        agent = create_deep_agent(
            scripted_model([*replies, AIMessage("done")], window=32_000),
            [build],
            backend=backend,
            middleware=[context_middleware(trace=False)],
        )
        return agent.invoke({"messages": [*(history or []), ("user", "go on")]})["messages"]

    first = run([_calls(("build", {"target": "all"}))])
    path = next(m for m in first if isinstance(m, ToolMessage)).response_metadata["ctxwarden"]["path"]
    assert path.startswith("/large_tool_results/no-thread/")
    probes = [
        ("ls", {"path": "/large_tool_results/no-thread"}),
        ("glob", {"pattern": "**/*"}),
        ("grep", {"pattern": "owner-only"}),
        ("grep", {"pattern": "owner-only", "path": "/large_tool_results"}),
    ]
    other = {m.tool_call_id: str(m.content) for m in run([_calls(*probes)]) if isinstance(m, ToolMessage)}
    assert len(other) == len(probes)
    assert all(SECRET not in answer and "no-thread/" not in answer for answer in other.values()), other
    again = run(
        [_calls(("read_file", {"file_path": path, "limit": 5}))], history=first
    )  # the client resends its history
    assert SECRET in str([m for m in again if isinstance(m, ToolMessage)][-1].content)


def test_a_run_without_a_thread_id_folds_to_a_file_only_its_conversation_names(tmp_path: Path) -> None:
    """Every run without a thread id folded into `/conversation_history/no-thread.md`, a name any run could read."""
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    def run(replies: list[AIMessage], first: str) -> list[Any]:
        agent = create_deep_agent(
            scripted_model([*replies, AIMessage("done")], window=32_000),
            [build],
            backend=backend,
            middleware=[context_middleware(trace=False, summarizer="deterministic")],
        )
        return agent.invoke({"messages": [("user", first)]})["messages"]

    steps = [_calls(("build", {"target": f"t{i}"})) for i in range(3)]
    run([*steps, _calls(("compact_conversation", {}))], "alice's task")
    (history,) = (tmp_path / "conversation_history" / "no-thread").glob("*.md")
    assert SECRET in history.read_text(encoding="utf-8")  # the folded turns: the build log's preview
    assert not (tmp_path / "conversation_history" / "no-thread.md").exists()  # before: the one name every run shares
    guesses = [
        ("read_file", {"file_path": "/conversation_history/no-thread.md"}),
        ("ls", {"path": "/conversation_history/no-thread"}),
        ("grep", {"pattern": "alice"}),
    ]
    other = {
        m.tool_call_id: str(m.content) for m in run([_calls(*guesses)], "bob's task") if isinstance(m, ToolMessage)
    }
    assert all(SECRET not in answer and history.stem not in answer for answer in other.values()), other


def test_a_thread_a_client_names_no_thread_keeps_a_folder_of_its_own(tmp_path: Path) -> None:
    """A client may name its thread `no-thread`, the folder of the runs without a thread id: it shared that folder
    with them, and could list none of its own files there."""
    agent = create_context_agent(
        scripted_model(
            [_calls(("build", {"target": "all"})), _calls(("ls", {"path": "/large_tool_results"})), AIMessage("done")],
            window=32_000,
        ),
        [build],
        state_dir=tmp_path,
    )
    out = agent.invoke({"messages": [("user", "build")]}, {"configurable": {"thread_id": "no-thread"}})
    agent.checkpointer.conn.close()
    path = next(m for m in out["messages"] if isinstance(m, ToolMessage)).response_metadata["ctxwarden"]["path"]
    assert not path.startswith("/large_tool_results/no-thread/")  # before: the runs without a thread id's folder
    listed = [m for m in out["messages"] if isinstance(m, ToolMessage)][-1]
    assert path.rsplit("/", 2)[1] in str(listed.content)  # it lists its own folder

    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    probes = [("read_file", {"file_path": path}), ("grep", {"pattern": "owner-only"}), ("glob", {"pattern": "**/*"})]
    model = scripted_model([_calls(*probes), AIMessage("done")], window=32_000)
    stateless = create_deep_agent(model, [build], backend=backend, middleware=[context_middleware(trace=False)])
    answers = [
        str(m.content)
        for m in stateless.invoke({"messages": [("user", "look")]})["messages"]
        if isinstance(m, ToolMessage)
    ]
    assert all(SECRET not in answer for answer in answers), answers


def test_two_runs_without_a_thread_id_opening_alike_fold_into_files_neither_can_name(tmp_path: Path) -> None:
    """A history file of a run without a thread id was named from its first message's text when it had no id: every
    conversation opening with "hello" named the same file, and read another's folded turns from it."""
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    def run(replies: list[AIMessage]) -> list[Any]:
        model = scripted_model([*replies, AIMessage("done")], window=32_000)
        middleware = [context_middleware(trace=False, summarizer=DETERMINISTIC)]
        agent = create_deep_agent(model, [build], backend=backend, middleware=middleware)
        return agent.invoke({"messages": [("user", "hello")]})["messages"]

    builds = [_calls(("build", {"target": t}), id=f"b-{t}") for t in ("all", "docs", "tests", "lint")]
    fold = [AIMessage("", tool_calls=[{"name": "compact_conversation", "args": {}, "id": f"fold{n}"}]) for n in (1, 2)]
    run([builds[0], fold[0], builds[1], builds[2], builds[3], fold[1]])
    (mine,) = (tmp_path / "conversation_history" / "no-thread").iterdir()  # both folds of the run: one file
    assert mine.read_text(encoding="utf-8").count("## fold ") == 2
    guessed = history_path(None, "", identified([HumanMessage("hello")]))  # what the text alone gives
    answers = run([_calls(("read_file", {"file_path": guessed}))])
    read = [str(m.content) for m in answers if isinstance(m, ToolMessage)]
    assert all(SECRET not in answer for answer in read), read  # before: it returned the other run's history
    assert len(list((tmp_path / "conversation_history" / "no-thread").iterdir())) == 1
