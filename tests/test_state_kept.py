"""Writes outside a model call keep every key; forks carry their files; recall never passes off a preview.

`compact()` and `Session.fork()` write to threads without running the agent. They must not
drop what ctxwarden does not own — deepagents' todos and in-state files, a middleware's own
state — and a fork must be able to recall what its parent evicted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NotRequired

import pytest
from deepagents.backends import FilesystemBackend, StateBackend
from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, Session, acompact, compact, create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold import FOLD_STATE_KEY
from ctxwarden.replay import scripted_model

THOUGHT = "Reasoning about the next step in some detail. " * 40
BIG = "\n".join(f"line {i}: compiled module_{i} with the parent's only copy of this output" for i in range(3_000))


class NotesState(AgentState):
    my_notes: NotRequired[list[str]]


class Notes(AgentMiddleware):
    """A user middleware keeping its own state key: one note per model reply."""

    state_schema = NotesState

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"my_notes": [*(state.get("my_notes") or []), f"note {len(state['messages'])}"]}


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


@tool
def build(target: str) -> str:
    """Run the build and return its log."""
    return BIG


def _call(name: str, args: dict, call_id: str) -> AIMessage:
    return AIMessage(THOUGHT, tool_calls=[{"name": name, "args": args, "id": call_id}])


def _replies() -> list[AIMessage]:
    return [
        _call("write_todos", {"todos": [{"content": "read the pages", "status": "in_progress"}]}, "t1"),
        _call("write_file", {"file_path": "/notes.md", "content": "kept in state"}, "w1"),
        *(_call("fetch", {"page": i}, f"f{i}") for i in range(4)),
        AIMessage("all read"),
    ]


def _others(values: dict[str, Any]) -> dict[str, Any]:
    """Every key of the thread but ctxwarden's fold state (which compact() is meant to change).

    Messages are compared by what they say (LangGraph may show the first input message without
    the id it later reads back with).
    """
    out = {k: v for k, v in values.items() if k not in (FOLD_STATE_KEY, "messages")}
    out["messages"] = [(m.type, m.content, getattr(m, "tool_calls", None)) for m in values["messages"]]
    return out


def _agent(state_dir: Path) -> Any:
    return create_context_agent(
        scripted_model(_replies(), window=200_000),
        [fetch],
        state_dir=state_dir,
        backend=StateBackend(),
        middleware=[TodoListMiddleware(), Notes()],
    )


def _ran(agent: Any, config: dict) -> dict[str, Any]:
    agent.invoke({"messages": [("user", "read every page")]}, config)
    values = dict(agent.get_state(config).values)
    assert {"todos", "files", "my_notes", "messages"} <= set(values), sorted(values)
    return values


def test_compact_keeps_todos_in_state_files_and_a_middleware_state(state_dir: Path) -> None:
    agent = _agent(state_dir)
    config = {"configurable": {"thread_id": "keys"}}
    before = _ran(agent, config)
    record = compact(agent, config, summarizer=DETERMINISTIC)
    assert record is not None
    state = agent.get_state(config)
    assert _others(dict(state.values)) == _others(before)  # nothing but the fold state changed
    assert state.values[FOLD_STATE_KEY]["records"][0]["number"] == 1
    assert state.next == ()  # the finished turn stays finished
    agent.checkpointer.conn.close()


async def test_acompact_keeps_them_too(state_dir: Path) -> None:
    agent = _agent(state_dir)
    config = {"configurable": {"thread_id": "akeys"}}
    await agent.ainvoke({"messages": [("user", "read every page")]}, config)
    before = dict((await agent.aget_state(config)).values)
    assert await acompact(agent, config, summarizer=DETERMINISTIC) is not None
    after = dict((await agent.aget_state(config)).values)
    assert _others(after) == _others(before)
    assert after[FOLD_STATE_KEY]["records"]
    agent.checkpointer.conn.close()


def test_compact_through_the_checkpointer_alone_keeps_them_as_well(state_dir: Path) -> None:
    """Without the agent's graph, the write widens its schema with every stored key."""
    agent = _agent(state_dir)
    config = {"configurable": {"thread_id": "saver"}}
    before = _ran(agent, config)
    files = FilesystemBackend(root_dir=state_dir / "files", virtual_mode=True)
    assert compact(agent.checkpointer, config, summarizer=DETERMINISTIC, backend=files) is not None
    after = dict(agent.get_state(config).values)
    assert _others(after) == _others(before)
    assert after[FOLD_STATE_KEY]["records"]
    agent.checkpointer.conn.close()


def test_a_fork_gets_the_parents_other_state_and_can_recall_what_it_evicted(state_dir: Path) -> None:
    replies = [
        _call("write_todos", {"todos": [{"content": "build", "status": "in_progress"}]}, "t1"),
        _call("build", {"target": "all"}, "b1"),
        AIMessage("built"),
    ]
    kwargs = {"middleware": [TodoListMiddleware(), Notes()], "summarizer": DETERMINISTIC}
    with Session(scripted_model(replies, window=32_000), [build], state_dir=state_dir, **kwargs) as parent:
        values = dict(parent.invoke("build it"))
        evicted = next(m for m in values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "b1")
        parent_path = evicted.response_metadata[METADATA_KEY]["path"]
        assert parent_path.startswith("/large_tool_results/main/")

        child = parent.fork([0], thread_id="child", model=scripted_model(["ok"], window=32_000))
        child_values = dict(child.agent.get_state(child.config).values)
        assert child_values["todos"] == values["todos"]
        assert child_values["my_notes"] == values["my_notes"]
        copied = next(m for m in child_values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "b1")
        child_path = copied.response_metadata[METADATA_KEY]["path"]
        assert child_path.startswith("/large_tool_results/child/")
        assert child_path in str(copied.content)
        assert parent_path not in str(copied.content)
        assert "line 1500:" not in str(copied.content)  # the child's message holds only the preview

        # the child recalls inside its own run, through the isolating backend
        recall_reply = AIMessage(
            "", tool_calls=[{"name": "recall", "args": {"call_id": "b1", "limit": 50_000}, "id": "r1"}]
        )
        child.switch_model(scripted_model([recall_reply, AIMessage("got it")], window=200_000))
        out = child.invoke("recall the build log")
        recalled = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
        page = str(recalled.content).rpartition("\n\n[ctxwarden: characters ")[0]
        assert BIG.startswith(page)  # the original, page by page
        assert len(str(recalled.content)) > 40_000  # a page of it, not the preview
        child.close()
        assert parent.messages[-1].content == "built"  # the parent is untouched
        assert (state_dir / parent_path.lstrip("/")).read_text(encoding="utf-8") == BIG


def test_a_fork_of_a_fold_carries_the_history_file_and_the_results_it_names(state_dir: Path) -> None:
    replies = [
        _call("build", {"target": "all"}, "b1"),
        AIMessage("built"),
        *(_call("fetch", {"page": i}, f"f{i}") for i in range(3)),
        AIMessage("read"),
    ]
    with Session(
        scripted_model(replies, window=32_000), [build, fetch], state_dir=state_dir, summarizer=DETERMINISTIC
    ) as parent:
        parent.invoke("build it")
        parent.invoke("now read")
        parent.compact()
        fold = next(u.index for u in parent.units() if u.kind == "fold")
        child = parent.fork([fold], thread_id="child")
        assert child.messages[0].content == "build it"  # the task the fold kept above its summary comes along
        summary = str(child.messages[1].content)
        child.close()
    assert "/conversation_history/child/fork-of-main.md" in summary
    history = (state_dir / "conversation_history" / "child" / "fork-of-main.md").read_text(encoding="utf-8")
    named = list(re.findall(r"/large_tool_results/[\w./-]*[\w-]", history))
    assert named
    assert all(p.startswith("/large_tool_results/child/") for p in named)  # the copy names the child's copies
    assert (state_dir / named[0].lstrip("/")).read_text(encoding="utf-8") == BIG


PROGRESS = (
    "".join(f"\rdownloading {i}%" for i in range(100))
    + "\n"
    + "\n".join(f"\x1b[32mok\x1b[0m test_{i}" for i in range(40))
)


@tool
def download(target: str) -> str:
    """Download `target`, with a progress bar."""
    return PROGRESS


def test_a_fork_recalls_the_raw_bytes_its_parent_kept_of_a_rendered_output(state_dir: Path) -> None:
    """The seed's record names the fork's copy of the raw file, which the fork may read, not the parent's."""
    replies = [_call("download", {"target": "all"}, "d1"), AIMessage("downloaded")]
    with Session(scripted_model(replies, window=32_000), [download], state_dir=state_dir) as parent:
        parent.invoke("download it")
        child = parent.fork([u.index for u in parent.units()], thread_id="child")
    copied = next(m for m in child.messages if isinstance(m, ToolMessage))
    record = copied.response_metadata[METADATA_KEY]
    assert record["rendered"]
    assert record["raw_path"].startswith("/large_tool_results/child/")
    recall = _call("recall", {"call_id": "d1", "part": "raw", "limit": 50_000}, "r1")
    child.switch_model(scripted_model([recall, AIMessage("got it")], window=32_000))
    out = child.invoke("the raw bytes, please")  # inside the fork's own run, through the isolating backend
    child.close()
    recalled = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert recalled.content == PROGRESS


def test_recall_says_which_file_is_missing_instead_of_returning_the_preview(state_dir: Path) -> None:
    with Session(
        scripted_model([_call("build", {"target": "all"}, "b1"), AIMessage("built")], window=32_000),
        [build],
        state_dir=state_dir,
    ) as session:
        messages = session.invoke("build it")["messages"]
        path = next(m for m in messages if isinstance(m, ToolMessage)).response_metadata[METADATA_KEY]["path"]
        (state_dir / path.lstrip("/")).unlink()  # e.g. another worker's disk
        answer = make_recall_tool(session.backend).invoke({"call_id": "b1", "state": {"messages": messages}})
    assert path in answer
    assert "cannot be read" in answer
    assert "not the original" in answer
    assert "line 0:" not in answer  # no part of the preview handed back as if it were the result


@pytest.mark.parametrize("reference", ["nope", "b1#00000000"])
def test_recall_of_an_unknown_call_says_so(state_dir: Path, reference: str) -> None:
    messages = [
        AIMessage("", tool_calls=[{"name": "build", "args": {}, "id": "b1"}]),
        ToolMessage("x", tool_call_id="b1"),
    ]
    answer = make_recall_tool(None).invoke({"call_id": reference, "state": {"messages": messages}})
    assert "has no tool result" in answer
