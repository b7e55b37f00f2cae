"""Offloaded files in LangGraph's store: per-thread namespaces, isolation, forks reading their parents, operators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import StoreBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

from ctxwarden import CtxwardenError, ThreadIsolatedStoreBackend, compact, context_middleware, create_context_agent
from ctxwarden.clip.names import call_key, recall_id, result_path
from ctxwarden.fold import DETERMINISTIC
from ctxwarden.replay import scripted_model

SECRET = "token=owner-only-7f3a"
LOG = "\n".join(f"INFO step {i}: {SECRET} compiled module_{i}" for i in range(700))


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def _calls(*calls: tuple[str, dict], message_id: str | None = None) -> AIMessage:
    return AIMessage(
        "", id=message_id, tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)]
    )


def _pages(reference: str) -> list[AIMessage]:
    """Recall the whole of `reference`, page by page: a log of 40,000 characters is two pages on a 32k window."""
    return [
        AIMessage(
            "",
            tool_calls=[
                {"name": "recall", "args": {"call_id": reference, "page": n, "limit": 50_000}, "id": f"page{n}"}
            ],
        )
        for n in (1, 2)
    ]


def _joined(pages: list[Any]) -> str:
    """The text the pages of a recall hold, without the note each ends with."""
    return "".join(str(page).rpartition("\n[ctxwarden: characters ")[0] for page in pages)


OWNER_FILE = result_path("owner", "", "c0", call_key("owner-build", 0))
"""Where thread `owner`'s evicted build log lives (the file name carries the call's key)."""
ASYNC_FILE = result_path("async", "", "c0", call_key("async-build", 0))


def _agent(replies: list[AIMessage], backend: Any, saver: Any, tmp_path: Path, **kwargs: Any) -> Any:
    model = scripted_model(replies, window=32_000)
    return create_context_agent(
        model, [build], checkpointer=saver, backend=backend, state_dir=tmp_path, trace=False, **kwargs
    )


def _run(agent: Any, thread: str, text: str = "go") -> dict[str, ToolMessage]:
    out = agent.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread}})
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


def _owner_thread(backend: Any, saver: Any, tmp_path: Path) -> None:
    """Thread `owner` evicts a large result and folds its history into the store."""
    build_call = _calls(("build", {"target": "all"}), message_id="owner-build")
    agent = _agent([build_call, AIMessage("built")], backend, saver, tmp_path)
    _run(agent, "owner", "build it")
    compact(agent, {"configurable": {"thread_id": "owner"}}, summarizer=DETERMINISTIC, backend=backend)


PROBES = [
    ("read_file", {"file_path": OWNER_FILE}),
    ("read_file", {"file_path": "/conversation_history/owner.md"}),
    ("ls", {"path": "/large_tool_results/owner"}),
    ("ls", {"path": "/large_tool_results"}),
    ("ls", {"path": "/"}),
    ("glob", {"pattern": "**/*"}),
    ("grep", {"pattern": "owner-only"}),
    ("grep", {"pattern": "owner-only", "path": "/large_tool_results/owner"}),
    ("edit_file", {"file_path": "/conversation_history/owner.md", "old_string": "## fold 1", "new_string": "gone"}),
    ("write_file", {"file_path": "/large_tool_results/owner/planted", "content": "planted"}),
]


@pytest.fixture
def postgres_store(postgres_url: str) -> Any:
    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        yield store


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> BaseStore:
    return InMemoryStore() if request.param == "memory" else request.getfixturevalue("postgres_store")


def test_another_thread_cannot_list_read_search_or_change_what_a_thread_offloaded(
    store: BaseStore, tmp_path: Path
) -> None:
    backend, saver = ThreadIsolatedStoreBackend(store), InMemorySaver()
    _owner_thread(backend, saver, tmp_path)
    results = _run(_agent([_calls(*PROBES), AIMessage("done")], backend, saver, tmp_path), "intruder", "look around")
    assert len(results) == len(PROBES)
    for call_id, message in results.items():
        assert SECRET not in str(message.content), (call_id, message.content)
    for call_id in ("c0", "c1", "c2", "c7", "c8", "c9"):
        assert "another thread" in str(results[call_id].content), results[call_id].content
    for call_id in ("c3", "c4", "c5", "c6"):  # listings and searches leave the other thread out
        assert "owner" not in str(results[call_id].content), results[call_id].content
    owner = {i.key: i.value for i in store.search(backend.thread_namespace("owner"), limit=100)}
    assert sorted(owner) == ["/conversation_history/owner.md", OWNER_FILE]
    assert "## fold 1" in owner["/conversation_history/owner.md"]["content"]


def test_the_probes_are_real_a_single_store_namespace_leaks(tmp_path: Path) -> None:
    store, saver = InMemoryStore(), InMemorySaver()
    shared = StoreBackend(store=store, namespace=lambda _rt: ("files",))
    _owner_thread(shared, saver, tmp_path)
    results = _run(_agent([_calls(*PROBES), AIMessage("done")], shared, saver, tmp_path), "intruder")
    assert SECRET in str(results["c0"].content)
    assert "owner" in str(results["c3"].content)


def test_a_thread_reads_its_own_files_from_any_worker(postgres_url: str, tmp_path: Path) -> None:
    """Two backends over two connections stand for two workers: what one evicted, the other reads back."""
    saver = InMemorySaver()
    with PostgresStore.from_conn_string(postgres_url) as first, PostgresStore.from_conn_string(postgres_url) as second:
        first.setup()
        _owner_thread(ThreadIsolatedStoreBackend(first), saver, tmp_path)
        reread = _calls(("read_file", {"file_path": OWNER_FILE, "limit": 5}))
        recalled = _pages(recall_id("c0", call_key("owner-build", 0)))
        agent = _agent([reread, *recalled, AIMessage("ok")], ThreadIsolatedStoreBackend(second), saver, tmp_path)
        results = _run(agent, "owner", "read it back")
    assert SECRET in str(results["c0"].content)
    assert _joined([results["page1"].content, results["page2"].content]) == LOG


def test_a_fork_reads_its_ancestors_files_but_never_changes_them(store: BaseStore, tmp_path: Path) -> None:
    backend, saver = ThreadIsolatedStoreBackend(store), InMemorySaver()
    _owner_thread(backend, saver, tmp_path)
    backend.record_fork("owner", "child")
    backend.record_fork("child", "grandchild")
    probes = [
        ("read_file", {"file_path": OWNER_FILE, "limit": 3}),
        ("grep", {"pattern": "owner-only", "path": "/large_tool_results/owner", "output_mode": "content"}),
        ("write_file", {"file_path": "/large_tool_results/owner/planted", "content": "x"}),
        ("edit_file", {"file_path": "/conversation_history/owner.md", "old_string": "## fold 1", "new_string": "x"}),
    ]
    for thread in ("child", "grandchild"):
        results = _run(_agent([_calls(*probes), AIMessage("ok")], backend, saver, tmp_path), thread)
        assert SECRET in str(results["c0"].content)
        assert SECRET in str(results["c1"].content)
        for call_id in ("c2", "c3"):
            assert "forked from" in str(results[call_id].content), results[call_id].content
    assert backend.ancestors("grandchild") == ["child", "owner"]
    results = _run(_agent([_calls(*probes), AIMessage("ok")], backend, saver, tmp_path), "unrelated")
    assert SECRET not in str(results["c0"].content)
    owner = {i.key for i in store.search(backend.thread_namespace("owner"), limit=100)}
    assert owner == {"/conversation_history/owner.md", OWNER_FILE}


def test_a_fork_has_one_parent_and_no_cycle(tmp_path: Path) -> None:
    backend = ThreadIsolatedStoreBackend(InMemoryStore())
    backend.record_fork("a", "b")
    backend.record_fork("a", "b")  # the same relation again is fine
    with pytest.raises(CtxwardenError, match="already recorded as a fork of 'a'"):
        backend.record_fork("c", "b")
    with pytest.raises(CtxwardenError, match="Fix: fork into a new thread id"):
        backend.record_fork("b", "a")
    with pytest.raises(CtxwardenError, match="is 'a' or one of its ancestors"):
        backend.record_fork("a", "a")
    # a second worker (a new backend on the same store) sees the relation
    assert ThreadIsolatedStoreBackend(backend.store).parent_of("b") == "a"


def test_outside_a_run_the_operator_reaches_every_thread() -> None:
    backend = ThreadIsolatedStoreBackend(InMemoryStore())
    backend.upload_files([("/large_tool_results/t1/c0", b"one"), ("/large_tool_results/t2/c0", b"two")])
    backend.write("/notes.md", "workspace")
    listing = backend.ls("/large_tool_results")
    assert [e["path"] for e in listing.entries or []] == ["/large_tool_results/t1/", "/large_tool_results/t2/"]
    assert [e["path"] for e in backend.ls("/").entries or []] == ["/large_tool_results/", "/notes.md"]
    found = backend.download_files(["/large_tool_results/t2/c0", "/large_tool_results/t1/c0", "/notes.md"])
    assert [f.content for f in found] == [b"two", b"one", b"workspace"]


def test_batches_answer_each_path_in_order() -> None:
    store = InMemoryStore()
    backend = ThreadIsolatedStoreBackend(store, current_thread=lambda: "me")
    uploaded = backend.upload_files([("/large_tool_results/me/a", b"mine"), ("/large_tool_results/you/b", b"x")])
    assert uploaded[0].error is None
    assert "permission_denied" in str(uploaded[1].error)
    assert store.search(("ctxwarden", "threads", "you")) == []
    ThreadIsolatedStoreBackend(store).upload_files([("/large_tool_results/you/b", b"theirs")])
    downloaded = backend.download_files(["/large_tool_results/you/b", "/large_tool_results/me/a", "/missing.md"])
    assert downloaded[0].content is None
    assert "permission_denied" in str(downloaded[0].error)
    assert downloaded[1].content == b"mine"
    assert downloaded[2].error == "file_not_found"


def test_a_path_naming_no_sanitized_thread_is_refused_not_raised() -> None:
    backend = ThreadIsolatedStoreBackend(InMemoryStore())
    assert "no thread is named 'a b'" in str(backend.read("/large_tool_results/a b/c0").error)


def test_without_a_store_outside_a_run_the_error_says_what_to_pass() -> None:
    with pytest.raises(CtxwardenError, match=r"Fix: pass the store, ThreadIsolatedStoreBackend\(store\)"):
        ThreadIsolatedStoreBackend().record_fork("a", "b")


def test_a_namespace_prefix_must_be_valid() -> None:
    with pytest.raises(CtxwardenError, match=r"prefix \('bad\*',\) is not a valid store namespace"):
        ThreadIsolatedStoreBackend(InMemoryStore(), prefix=("bad*",))


async def test_async_runs_are_isolated_and_use_the_graphs_own_store(tmp_path: Path) -> None:
    """With no store given, the backend uses the store the graph runs with (as under a LangGraph server)."""
    store, saver = InMemoryStore(), InMemorySaver()
    backend = ThreadIsolatedStoreBackend()
    build_call = _calls(("build", {"target": "all"}), message_id="owner-build")
    owner = _agent([build_call, AIMessage("built")], backend, saver, tmp_path, store=store)
    await owner.ainvoke({"messages": [("user", "build")]}, {"configurable": {"thread_id": "owner"}})
    assert store.get(("ctxwarden", "threads", "owner"), OWNER_FILE) is not None
    intruder = _agent([_calls(*PROBES), AIMessage("done")], backend, saver, tmp_path, store=store)
    out = await intruder.ainvoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": "intruder"}})
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == len(PROBES)
    assert all(SECRET not in str(m.content) for m in tool_messages)


async def test_an_async_agent_on_async_postgres_evicts_and_recalls(postgres_url: str, tmp_path: Path) -> None:
    async with (
        AsyncPostgresSaver.from_conn_string(postgres_url) as saver,
        AsyncPostgresStore.from_conn_string(postgres_url) as store,
    ):
        await saver.setup()
        await store.setup()
        backend = ThreadIsolatedStoreBackend(store)
        replies = [
            _calls(("build", {"target": "all"}), message_id="async-build"),
            *_pages("c0"),
            AIMessage("built"),
        ]
        agent = _agent(replies, backend, saver, tmp_path)
        out = await agent.ainvoke({"messages": [("user", "build")]}, {"configurable": {"thread_id": "async"}})
        stored = await store.aget(("ctxwarden", "threads", "async"), ASYNC_FILE)
    evicted, *recalled = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert str(evicted.content).count(SECRET) < LOG.count(SECRET) // 4  # the view keeps a preview, not the log
    assert _joined([m.content for m in recalled]) == LOG
    assert stored is not None
    assert stored.value["content"] == LOG


def test_a_run_without_a_thread_id_reaches_no_thread_s_files(tmp_path: Path) -> None:
    store = InMemoryStore()
    backend = ThreadIsolatedStoreBackend(store)
    _owner_thread(backend, InMemorySaver(), tmp_path)
    model = scripted_model([_calls(*PROBES), AIMessage("done")], window=32_000)
    agent = create_deep_agent(model, [build], backend=backend, middleware=[context_middleware(trace=False)])
    out = agent.invoke({"messages": [("user", "look around")]})  # no checkpointer, no thread id
    results = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    for call_id, message in results.items():
        assert SECRET not in str(message.content), (call_id, message.content)  # before: read_file returned it
    for call_id in ("c0", "c1", "c2", "c7", "c8", "c9"):
        assert "another thread" in str(results[call_id].content), results[call_id].content


def test_runs_without_a_thread_id_read_their_files_by_name_and_never_list_each_other_s(tmp_path: Path) -> None:
    backend = ThreadIsolatedStoreBackend(InMemoryStore())

    def run(replies: list[AIMessage], history: list[Any] | None = None) -> list[Any]:
        model = scripted_model([*replies, AIMessage("done")], window=32_000)
        agent = create_deep_agent(model, [build], backend=backend, middleware=[context_middleware(trace=False)])
        return agent.invoke({"messages": [*(history or []), ("user", "go on")]})["messages"]

    first = run([_calls(("build", {"target": "all"}))])
    path = next(m for m in first if isinstance(m, ToolMessage)).response_metadata["ctxwarden"]["path"]
    probes = [
        ("ls", {"path": "/large_tool_results/no-thread"}),
        ("glob", {"pattern": "**/*"}),
        ("grep", {"pattern": "owner-only"}),
    ]
    other = {m.tool_call_id: str(m.content) for m in run([_calls(*probes)]) if isinstance(m, ToolMessage)}
    assert len(other) == len(probes)
    assert all(SECRET not in answer and "no-thread/" not in answer for answer in other.values()), other
    again = run([_calls(("read_file", {"file_path": path, "limit": 5}))], history=first)
    assert SECRET in str([m for m in again if isinstance(m, ToolMessage)][-1].content)
