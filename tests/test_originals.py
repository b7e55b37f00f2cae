"""Originals are immutable to the agent: its file tools cannot change an evicted output or a history file.

`write_file`, `edit_file` and `delete` on `/large_tool_results/...` or `/conversation_history/...`
get a refusal the model can read, and the file is as it was. ctxwarden's own writes (eviction,
the history file) go on. A file changed behind the agent's back (on disk) is never passed off as
the original: `recall` checks it against the hash kept at eviction and says it was changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from ctxwarden import ThreadIsolatedStoreBackend, compact, create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model

LOG = "\n".join(f"INFO step {i}: compiled module_{i} checksum=ab{i:04d}" for i in range(900))
THREAD = "keeper"
HISTORY = f"/conversation_history/{THREAD}.md"


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": THREAD}}


def _calls(*calls: tuple[str, dict[str, Any]], id: str | None = None) -> AIMessage:
    return AIMessage(
        "", id=id, tool_calls=[{"name": n, "args": a, "id": f"{id}-{i}"} for i, (n, a) in enumerate(calls)]
    )


def _evict_and_fold(state_dir: Path) -> tuple[str, str]:
    """A thread evicts a build log and folds once; returns the evicted file's path and the call id."""
    agent = create_context_agent(
        scripted_model([_calls(("build", {"target": "all"}), id="b"), AIMessage("built")], window=32_000),
        [build],
        state_dir=state_dir,
    )
    messages = agent.invoke({"messages": [("user", "build it")]}, _config())["messages"]
    compact(agent, _config(), summarizer="deterministic")
    agent.checkpointer.conn.close()
    evicted = next(m for m in messages if isinstance(m, ToolMessage) and m.response_metadata.get(METADATA_KEY))
    assert (state_dir / HISTORY.lstrip("/")).is_file()
    return evicted.response_metadata[METADATA_KEY]["path"], evicted.tool_call_id


def _probe(
    state_dir: Path, calls: list[tuple[str, dict[str, Any]]], window: int = 200_000
) -> tuple[list[ToolMessage], list[Any]]:
    one_each = [  # one call a turn: deepagents refuses parallel changes to one path before the backend sees them
        AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"p-{i}"}]) for i, (n, a) in enumerate(calls)
    ]
    agent = create_context_agent(
        scripted_model([*one_each, AIMessage("done")], window=window), [build], state_dir=state_dir
    )
    messages = agent.invoke({"messages": [("user", "tidy up")]}, _config())["messages"]
    agent.checkpointer.conn.close()
    return [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id.startswith("p-")], messages


def test_the_agents_file_tools_cannot_change_its_originals(state_dir: Path) -> None:
    path, _call = _evict_and_fold(state_dir)
    history = (state_dir / HISTORY.lstrip("/")).read_text(encoding="utf-8")
    results, _messages = _probe(
        state_dir,
        [
            ("edit_file", {"file_path": path, "old_string": "INFO step 1:", "new_string": "EDITED"}),
            ("write_file", {"file_path": path, "content": "rewritten"}),
            ("write_file", {"file_path": HISTORY, "content": "rewritten"}),
            ("edit_file", {"file_path": HISTORY, "old_string": "## fold 1", "new_string": "## gone"}),
            ("write_file", {"file_path": f"/large_tool_results/{THREAD}/planted", "content": "fake original"}),
            ("delete", {"file_path": path}),
        ],
    )
    assert len(results) == 6
    for message in results:
        assert "an original ctxwarden keeps" in str(message.content), message.content
        assert "never change" in str(message.content)
    assert (state_dir / path.lstrip("/")).read_text(encoding="utf-8") == LOG
    assert (state_dir / HISTORY.lstrip("/")).read_text(encoding="utf-8") == history
    assert not (state_dir / "large_tool_results" / THREAD / "planted").exists()


def test_the_agent_still_reads_its_originals_and_ctxwarden_still_writes_them(state_dir: Path) -> None:
    path, _call = _evict_and_fold(state_dir)
    results, messages = _probe(
        state_dir, [("read_file", {"file_path": path, "limit": 3}), ("build", {"target": "again"})], window=32_000
    )
    assert "compiled module_1" in str(results[0].content)
    record = results[1].response_metadata[METADATA_KEY]  # evicted during a run: ctxwarden's own write went through
    assert (state_dir / record["path"].lstrip("/")).read_text(encoding="utf-8") == LOG
    compact_agent = create_context_agent(scripted_model([AIMessage("x")], window=200_000), [build], state_dir=state_dir)
    compact(compact_agent, _config(), summarizer="deterministic")
    compact_agent.checkpointer.conn.close()
    assert "## fold 2" in (state_dir / HISTORY.lstrip("/")).read_text(encoding="utf-8")
    assert messages


def test_recall_says_plainly_when_an_evicted_file_was_changed(state_dir: Path) -> None:
    path, call = _evict_and_fold(state_dir)
    on_disk = state_dir / path.lstrip("/")
    on_disk.write_text(LOG.replace("compiled module_7 ", "TAMPERED module_7 "), encoding="utf-8")
    results, messages = _probe(state_dir, [("recall", {"call_id": call}), ("recall", {"query": "TAMPERED"})])
    by_id, by_query = (str(m.content) for m in results)
    assert "TAMPERED" not in by_id
    assert "was changed after ctxwarden evicted it" in by_id
    assert path in by_id
    assert "TAMPERED module_7" not in by_query  # the search never quotes the changed file as the original

    recall = make_recall_tool(None)
    assert "TAMPERED" not in recall.invoke({"call_id": call, "state": {"messages": messages}})


def test_a_store_backend_keeps_originals_from_the_agents_tools_too(tmp_path: Path) -> None:
    backend = ThreadIsolatedStoreBackend(InMemoryStore())
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": THREAD}}
    first = create_context_agent(
        scripted_model([_calls(("build", {"target": "all"}), id="b"), AIMessage("built")], window=32_000),
        [build],
        checkpointer=saver,
        backend=backend,
        state_dir=tmp_path,
        trace=False,
    )
    messages = first.invoke({"messages": [("user", "build it")]}, config)["messages"]
    path = next(m for m in messages if isinstance(m, ToolMessage)).response_metadata[METADATA_KEY]["path"]
    probes = [
        ("edit_file", {"file_path": path, "old_string": "INFO step 1:", "new_string": "EDITED"}),
        ("write_file", {"file_path": f"/large_tool_results/{THREAD}/planted", "content": "fake original"}),
        ("write_file", {"file_path": "/notes/mine.md", "content": "the agent's own notes"}),
    ]
    one_each = [AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"p-{i}"}]) for i, (n, a) in enumerate(probes)]
    second = create_context_agent(
        scripted_model([*one_each, AIMessage("done")], window=200_000),
        [build],
        checkpointer=saver,
        backend=backend,
        state_dir=tmp_path,
        trace=False,
    )
    out = second.invoke({"messages": [("user", "tidy up")]}, config)["messages"]
    answers = {m.tool_call_id: str(m.content) for m in out if isinstance(m, ToolMessage)}
    assert "an original ctxwarden keeps" in answers["p-0"]
    assert "an original ctxwarden keeps" in answers["p-1"]
    assert "an original" not in answers["p-2"]  # the agent's other files are its own to write
    (found,) = backend.download_files([path])
    assert found.content == LOG.encode()
