"""The scripted and replay models stream like real chat models, so every example agent can be streamed.

Each agent is run three ways on the same script — `invoke`, `stream(stream_mode="messages")` and
`astream(...)` — and must end in the same thread: same texts, same tool calls, nothing cut short.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import DETERMINISTIC, Session, context_middleware, create_context_agent
from ctxwarden.bench.harness import CapturingReplay
from ctxwarden.replay import ReplayChatModel, parse_recording, replay_tools, scripted_model
from ctxwarden.replay.streaming import chunks_of
from sessions import SMALL_SESSION


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def _script() -> list[AIMessage | str]:
    return [
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}]),
        AIMessage(
            "Adding two more.",
            tool_calls=[
                {"name": "add", "args": {"a": 3, "b": 4}, "id": "c2"},
                {"name": "add", "args": {"a": 5, "b": 6}, "id": "c3"},
            ],
        ),
        "The sums are 3, 7 and 11.",
    ]


def _shape(messages: list[BaseMessage]) -> list[tuple[str, str, list[Any]]]:
    return [
        (m.type, str(m.content), [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])])
        for m in messages
    ]


EXPECTED = [
    ("human", "add", []),
    ("ai", "", [("add", {"a": 1, "b": 2}, "c1")]),
    ("tool", "3", []),
    ("ai", "Adding two more.", [("add", {"a": 3, "b": 4}, "c2"), ("add", {"a": 5, "b": 6}, "c3")]),
    ("tool", "7", []),
    ("tool", "11", []),
    ("ai", "The sums are 3, 7 and 11.", []),
]

CONFIG = {"configurable": {"thread_id": "streamed"}}


def _context_agent(tmp_path: Path) -> Any:
    return create_context_agent(scripted_model(_script(), window=32_000), [add], state_dir=tmp_path / "state")


def _readme_agent(tmp_path: Path) -> Any:
    return create_deep_agent(
        scripted_model(_script(), window=32_000),
        [add],
        middleware=context_middleware(state_dir=tmp_path / "state"),
        checkpointer=InMemorySaver(),
    )


def _langchain_agent(tmp_path: Path) -> Any:
    return create_agent(
        scripted_model(_script(), window=32_000),
        [add],
        middleware=context_middleware(state_dir=tmp_path / "state"),
        checkpointer=InMemorySaver(),
    )


AGENTS: dict[str, Callable[[Path], Any]] = {
    "create_context_agent": _context_agent,
    "create_deep_agent": _readme_agent,
    "create_agent": _langchain_agent,
}


def _close(agent: Any) -> None:
    conn = getattr(agent.checkpointer, "conn", None)
    if conn is not None:
        conn.close()


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
def test_sync_stream_runs_the_whole_script(build: Callable[[Path], Any], tmp_path: Path) -> None:
    agent = build(tmp_path)
    chunks = [chunk for chunk, _meta in agent.stream({"messages": [("user", "add")]}, CONFIG, stream_mode="messages")]
    messages = agent.get_state(CONFIG).values["messages"]
    _close(agent)
    assert _shape(messages) == EXPECTED
    streamed_calls = [c for chunk in chunks if isinstance(chunk, AIMessageChunk) for c in chunk.tool_call_chunks]
    assert {c["id"] for c in streamed_calls if c["id"]} == {"c1", "c2", "c3"}
    text = "".join(str(c.content) for c in chunks if isinstance(c, AIMessageChunk))
    assert "The sums are 3, 7 and 11." in text


@pytest.mark.parametrize("build", AGENTS.values(), ids=AGENTS.keys())
async def test_async_stream_runs_the_whole_script(build: Callable[[Path], Any], tmp_path: Path) -> None:
    agent = build(tmp_path)
    chunks = [c async for c, _m in agent.astream({"messages": [("user", "add")]}, CONFIG, stream_mode="messages")]
    state = await agent.aget_state(CONFIG)
    _close(agent)
    assert _shape(state.values["messages"]) == EXPECTED
    assert any(isinstance(c, AIMessageChunk) and c.tool_call_chunks for c in chunks)


def test_streamed_and_invoked_threads_are_the_same(tmp_path: Path) -> None:
    invoked = _context_agent(tmp_path / "a")
    invoked.invoke({"messages": [("user", "add")]}, CONFIG)
    streamed = _context_agent(tmp_path / "b")
    for _ in streamed.stream({"messages": [("user", "add")]}, CONFIG, stream_mode=["updates", "messages"]):
        pass
    one, two = invoked.get_state(CONFIG).values["messages"], streamed.get_state(CONFIG).values["messages"]
    _close(invoked)
    _close(streamed)
    assert _shape(one) == _shape(two) == EXPECTED
    for a, b in zip(one, two, strict=True):
        if isinstance(a, AIMessage):
            stamp_a, stamp_b = a.response_metadata["ctxwarden"], b.response_metadata["ctxwarden"]
            assert stamp_a["input_tokens"] == stamp_b["input_tokens"]


def test_chunks_merge_back_to_the_message() -> None:
    message = AIMessage(
        "  Two  calls,\nthen done. ",
        id="m1",
        tool_calls=[
            {"name": "bash", "args": {"command": "ls -la", "nested": {"n": [1, 2.5, None]}}, "id": "t1"},
            {"name": "bash", "args": {}, "id": "t2"},
        ],
        usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
        response_metadata={"model_name": "replay", "replay": {"step": 4}},
    )
    chunks = chunks_of(message)
    assert len(chunks) > 3
    merged = message_chunk_to_message(sum(chunks[1:], chunks[0]))
    assert isinstance(merged, AIMessage)
    assert merged.content == message.content
    assert merged.tool_calls == message.tool_calls
    assert merged.usage_metadata == message.usage_metadata
    assert merged.response_metadata == message.response_metadata
    assert merged.id == "m1"


def test_an_empty_reply_still_streams_one_chunk() -> None:
    chunks = chunks_of(AIMessage(""))
    assert len(chunks) == 1
    assert chunks[0].chunk_position == "last"


RECORDED = SMALL_SESSION


@pytest.mark.parametrize("model_class", [ReplayChatModel, CapturingReplay])
async def test_the_replay_model_streams_sync_and_async(model_class: type[ReplayChatModel], tmp_path: Path) -> None:
    recording = parse_recording(json.loads(json.dumps(RECORDED)))
    runs = []
    for mode in ("invoke", "stream", "astream"):
        model = model_class(recording=recording, usage="received", profile={"max_input_tokens": 32_000})
        agent = create_context_agent(
            model, replay_tools(recording), state_dir=tmp_path / mode, summarizer=DETERMINISTIC
        )
        config = {"configurable": {"thread_id": mode}}
        inputs = {"messages": [recording.turns[0].user]}
        if mode == "invoke":
            agent.invoke(inputs, config)
        elif mode == "stream":
            chunks = [c for c, _m in agent.stream(inputs, config, stream_mode="messages")]
            assert any(isinstance(c, AIMessageChunk) and c.tool_call_chunks for c in chunks)
        else:
            assert [c async for c, _m in agent.astream(inputs, config, stream_mode="messages")]
        messages = agent.get_state(config).values["messages"]
        _close(agent)
        runs.append(_shape(messages))
        assert model.finished, (mode, model.position)
        if isinstance(model, CapturingReplay):  # the benchmark's capture still sees every call
            assert len(model.seen) == 2
    assert runs[0] == runs[1] == runs[2]
    assert [kind for kind, _text, _calls in runs[0]] == ["human", "ai", "tool", "ai"]


def test_a_session_streams(tmp_path: Path) -> None:
    with Session(scripted_model(_script(), window=32_000), [add], state_dir=tmp_path / "state") as session:
        chunks = [chunk for chunk, _meta in session.stream("add", stream_mode="messages")]
        assert _shape(session.messages) == EXPECTED
    assert any(isinstance(c, AIMessageChunk) and c.tool_call_chunks for c in chunks)
