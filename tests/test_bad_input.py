"""Bad input at the edges of the stack: hostile ids, binary output, oversized messages, orphans in a resumed thread.

Each gets a clear error or a documented degradation, never a crash mid-run, and files
never leave the state dir. (Malformed skills, MEMORY.md and AGENTS.md: tests/test_admit.py;
a model without window information: tests/test_window.py; invalid policy values:
tests/test_policy.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, TraceStore, compact, create_context_agent
from ctxwarden.clip.recall import lookup_result
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model

LOG = "\n".join(f"line {i}: compiled module_{i} in {i % 7} ms" for i in range(1_500))

HOSTILE_IDS = [
    "../../escape",
    "/etc/passwd",
    "a\x00b",
    "..",
    ".",
    "x" * 5_000,
    "スレッド-é/..\\..\\win",
    "~/.ssh/id_rsa",
    " ",
]


@tool
def build(target: str) -> str:
    """Run the build and return its log."""
    return LOG


@tool
def raw_bytes(target: str) -> bytes:
    """Return raw bytes, as a careless tool might."""
    return bytes(range(256)) * 40


@tool
def undecodable(target: str) -> str:
    """Return text decoded from bytes that are not UTF-8 (lone surrogates)."""
    return (b"\xff\xfe latin-1: caf\xe9 " * 400).decode("utf-8", "surrogateescape")


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=lambda v: repr(v)[:20])
def test_hostile_thread_and_call_ids_never_leave_the_state_dir(tmp_path: Path, hostile: str) -> None:
    state_dir = tmp_path / "deep" / "state"
    calls = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "all"}, "id": hostile}])
    agent = create_context_agent(
        scripted_model([calls, AIMessage("built")], window=8_000), [build], state_dir=state_dir
    )
    config = {"configurable": {"thread_id": hostile}}
    out = agent.invoke({"messages": [("user", "build")]}, config)
    assert out["messages"][-1].content == "built"
    assert compact(agent, config, summarizer="deterministic") is not None
    agent.checkpointer.conn.close()

    assert _files(tmp_path) == _files(state_dir)  # nothing written beside or above the state dir
    (eviction,) = TraceStore(state_dir / "trace.sqlite").events(kind="eviction")
    written = (state_dir / eviction.payload["path"].lstrip("/")).resolve()
    assert written.is_relative_to(state_dir.resolve())
    assert written.read_text(encoding="utf-8") == LOG
    histories = list((state_dir / "conversation_history").rglob("*.md"))
    assert len(histories) == 1
    assert histories[0].resolve().is_relative_to(state_dir.resolve())
    placeholder = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert eviction.payload["path"] in str(placeholder.content)


def test_two_hostile_ids_that_sanitize_alike_keep_separate_files(tmp_path: Path) -> None:
    for thread in ("a/b", "a_b", "a\x00b"):
        calls = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "all"}, "id": "same"}])
        agent = create_context_agent(
            scripted_model([calls, AIMessage("ok")], window=8_000), [build], state_dir=tmp_path
        )
        agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": thread}})
        agent.checkpointer.conn.close()
    paths = {e.payload["path"] for e in TraceStore(tmp_path / "trace.sqlite").events(kind="eviction")}
    assert len(paths) == 3


@pytest.mark.parametrize("tool_fn", [raw_bytes, undecodable], ids=["bytes", "non-utf8"])
def test_binary_and_non_utf8_output_is_kept_exactly(tmp_path: Path, tool_fn: Any) -> None:
    calls = AIMessage("", tool_calls=[{"name": tool_fn.name, "args": {"target": "x"}, "id": "b1"}])
    agent = create_context_agent(scripted_model([calls, AIMessage("ok")], window=8_000), [tool_fn], state_dir=tmp_path)
    config = {"configurable": {"thread_id": "binary"}}
    out = agent.invoke({"messages": [("user", "go")]}, config)
    agent.checkpointer.conn.close()
    assert out["messages"][-1].content == "ok"
    message = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    original = tool_fn.invoke({"target": "x"})
    expected = original if isinstance(original, str) else str(original)
    record = message.response_metadata[METADATA_KEY]
    assert record["evicted"] is True
    raw = (tmp_path / record["raw_path"].lstrip("/")).read_bytes()  # the exact bytes, whatever the view shows
    assert raw == (original if isinstance(original, bytes) else original.encode("utf-8", "surrogateescape"))
    (tmp_path / record["path"].lstrip("/")).read_text(encoding="utf-8")  # the file of the view opens as text
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assert lookup_result(out["messages"], "b1", backend, raw=True) == (expected, None)  # recall(part="raw")
    reopened = create_context_agent(scripted_model([], window=8_000), [tool_fn], state_dir=tmp_path)
    stored = reopened.get_state(config).values["messages"]  # the checkpoint round-trips it too
    assert next(m for m in stored if isinstance(m, ToolMessage)).content == message.content
    reopened.checkpointer.conn.close()


def test_a_small_non_utf8_output_is_offloaded_for_its_exact_bytes(tmp_path: Path) -> None:
    @tool
    def sniff(target: str) -> str:
        """Read a few undecodable bytes."""
        return b"magic: \x89PNG\r\n ok".decode("utf-8", "surrogateescape")

    calls = AIMessage("", tool_calls=[{"name": "sniff", "args": {"target": "x"}, "id": "s1"}])
    agent = create_context_agent(scripted_model([calls, AIMessage("ok")], window=200_000), [sniff], state_dir=tmp_path)
    out = agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "small"}})
    agent.checkpointer.conn.close()
    message = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert str(message.content).startswith("magic: \\x89PNG\r\n ok\n[ctxwarden: this sniff output holds bytes")
    (file,) = (tmp_path / "large_tool_results" / "small").glob("s1-*")  # keyed by the call that made it
    assert file.read_bytes() == b"magic: \x89PNG\r\n ok"


def test_a_tool_result_larger_than_the_whole_window_is_evicted(tmp_path: Path) -> None:
    huge = LOG * 6  # ~90k tokens against an 8k window
    calls = AIMessage("", tool_calls=[{"name": "echo", "args": {"text": "x"}, "id": "h1"}])

    @tool
    def echo(text: str) -> str:
        """Echo a huge text."""
        return huge

    agent = create_context_agent(scripted_model([calls, AIMessage("ok")], window=8_000), [echo], state_dir=tmp_path)
    out = agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "huge"}})
    agent.checkpointer.conn.close()
    last_call = out["messages"][-1].response_metadata[METADATA_KEY]
    assert last_call["input_tokens"] < 8_000
    (file,) = (tmp_path / "large_tool_results" / "huge").glob("h1-*")
    assert file.read_text(encoding="utf-8") == huge


def _seed(tmp_path: Path, thread: str, messages: list) -> None:
    seeder = create_context_agent(scripted_model([], window=6_000), [build], state_dir=tmp_path)
    seeder.update_state({"configurable": {"thread_id": thread}}, {"messages": messages})
    seeder.checkpointer.conn.close()


def test_orphaned_tool_calls_and_results_in_a_resumed_thread(tmp_path: Path) -> None:
    thought = "Looking at the parser. " * 60
    orphan_call = AIMessage(thought, tool_calls=[{"name": "build", "args": {"target": "a"}, "id": "lost"}])
    orphan_result = ToolMessage("result of a call nobody made " * 50, tool_call_id="ghost", name="build")
    history: list = [HumanMessage("start"), orphan_call, HumanMessage("where were we?"), orphan_result]
    for i in range(8):
        history += [
            AIMessage(thought, tool_calls=[{"name": "build", "args": {"target": str(i)}, "id": f"b{i}"}]),
            ToolMessage(f"build {i} ok " * 80, tool_call_id=f"b{i}", name="build"),
        ]
    _seed(tmp_path, "orphans", history)
    calls = AIMessage("", tool_calls=[{"name": "build", "args": {"target": "z"}, "id": "z1"}])
    agent = create_context_agent(
        scripted_model([calls, AIMessage("resumed")], window=6_000),
        [build],
        state_dir=tmp_path,
        summarizer=DETERMINISTIC,
    )
    config = {"configurable": {"thread_id": "orphans"}}
    out = agent.invoke({"messages": [HumanMessage("go on")]}, config)
    agent.checkpointer.conn.close()
    assert out["messages"][-1].content == "resumed"
    ids = [m.id for m in out["messages"]]
    assert len(ids) == len(set(ids))
    for message in history:  # every seeded message is still in the checkpoint, as it was
        assert any(m.content == message.content for m in out["messages"])
    events = TraceStore(tmp_path / "trace.sqlite").events(thread_id="orphans")
    assert {"context_clear", "context_compaction"} & {e.kind for e in events}


@pytest.mark.parametrize("final", list("ABCDEFGHJKabdefr`"))
def test_a_sequence_parameter_of_thousands_of_digits_renders_and_the_raw_stays(tmp_path: Path, final: str) -> None:
    """Python's `int` refuses a string of more than 4,300 digits: a tool printing `CSI <5,000 digits> A` (a
    hostile or broken program) failed its call at arrival, and the run ended with a `ValueError`."""
    printed = f"built 3 targets\n\x1b[{'9' * 5_000}{final}\x1b[{'0' * 4_999}1{final}step \x1b[32mdone\x1b[0m\r\nend\n"

    @tool
    def make(target: str) -> str:
        """Run make."""
        return printed

    calls = AIMessage("", tool_calls=[{"name": "make", "args": {"target": "x"}, "id": "m1"}])
    agent = create_context_agent(scripted_model([calls, AIMessage("ok")], window=200_000), [make], state_dir=tmp_path)
    out = agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "digits"}})
    agent.checkpointer.conn.close()
    assert out["messages"][-1].content == "ok"
    message = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    shown = str(message.content)
    assert "done" in shown  # drawn where the moves put it
    assert "end" in shown
    assert "9999" not in shown  # no code reaches the view
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    assert lookup_result(out["messages"], "m1", backend, raw=True) == (printed, None)  # recall(part="raw")
