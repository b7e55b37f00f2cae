"""What the stack records: model usage, tool calls, switches and overflows — sync, async, streaming, subagents."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, context_middleware, create_context_agent
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.trace import TraceStore

CONFIG = {"configurable": {"thread_id": "traced"}}


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise ValueError(f"bad input {x}")


def _call(name: str, args: dict, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _trace(state_dir: Path) -> TraceStore:
    return TraceStore(state_dir / "trace.sqlite")


def test_model_usage_and_tool_calls_are_recorded(state_dir: Path) -> None:
    replies = [_call("add", {"a": 2, "b": 3}, "c1"), AIMessage("five")]
    agent = create_context_agent(scripted_model(replies, window=8_000, name="fake"), [add], state_dir=state_dir)
    agent.invoke({"messages": [("user", "add 2 and 3")]}, CONFIG)
    agent.checkpointer.conn.close()

    events = _trace(state_dir).events(thread_id="traced")
    assert [e.kind for e in events] == ["model_usage", "tool_call", "model_usage"]
    usage = events[0]
    assert usage.model == "fake"
    assert usage.namespace == ""
    assert usage.payload["role"] == "main"
    assert usage.payload["window"] == 8_000
    assert usage.payload["estimated"] is True  # the fake model reports no usage, so the meter's figure stands in
    assert usage.payload["input_tokens"] == usage.payload["measured_input_tokens"] > 0
    call = events[1].payload
    assert (call["name"], call["call_id"], call["result_chars"], call["error"]) == ("add", "c1", 1, None)
    assert call["args_chars"] == len('{"a": 2, "b": 3}')
    assert call["duration_ms"] >= 0


def test_reported_usage_is_recorded_as_reported(state_dir: Path) -> None:
    reply = AIMessage(
        "hi",
        usage_metadata={
            "input_tokens": 1234,
            "output_tokens": 7,
            "total_tokens": 1241,
            "input_token_details": {"cache_read": 1000},
        },
    )
    agent = create_context_agent(scripted_model([reply], window=8_000), state_dir=state_dir)
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    (before_call,) = [s.config for s in agent.get_state_history(CONFIG) if s.next == ("model",)]
    agent.checkpointer.conn.close()
    (usage,) = _trace(state_dir).events(kind="model_usage")
    assert usage.payload | {"measured_input_tokens": 0} == {
        "checkpoint": before_call["configurable"]["checkpoint_id"],  # the step's own: which branch it belongs to
        "role": "main",
        "window": 8_000,
        "measured_input_tokens": 0,
        "input_tokens": 1234,
        "output_tokens": 7,
        "cached_input_tokens": 1000,
        "estimated": False,
        "fraction": round(1234 / 8_000, 4),
    }


def test_a_failing_tool_is_recorded_with_its_error(state_dir: Path) -> None:
    replies = [_call("explode", {"x": 1}, "c1"), AIMessage("never")]
    agent = create_context_agent(scripted_model(replies, window=8_000), [explode], state_dir=state_dir)
    with pytest.raises(ValueError, match="bad input 1"):
        agent.invoke({"messages": [("user", "go")]}, CONFIG)
    agent.checkpointer.conn.close()
    (call,) = _trace(state_dir).events(kind="tool_call")
    assert call.payload["error"] == "ValueError: bad input 1"


def test_a_model_switch_is_recorded(state_dir: Path) -> None:
    big = create_context_agent(scripted_model(["a"], window=200_000, name="big"), state_dir=state_dir)
    big.invoke({"messages": [("user", "one")]}, CONFIG)
    big.checkpointer.conn.close()
    small = create_context_agent(scripted_model(["b"], window=8_000, name="small"), state_dir=state_dir)
    small.invoke({"messages": [("user", "two")]}, CONFIG)
    small.checkpointer.conn.close()
    (switch,) = _trace(state_dir).events(kind="model_switch")
    assert {k: v for k, v in switch.payload.items() if k != "checkpoint"} == {
        "from_model": "big",
        "to_model": "small",
        "from_window": 200_000,
        "to_window": 8_000,
    }


def test_a_measured_overflow_is_recorded(state_dir: Path) -> None:
    agent = create_context_agent(
        scripted_model(["a"], window=200_000), state_dir=state_dir, policy=ContextPolicy(window=5_000)
    )
    agent.invoke({"messages": [("user", " ".join(f"w{i}" for i in range(6_000)))]}, CONFIG)
    agent.checkpointer.conn.close()
    (overflow,) = _trace(state_dir).events(kind="context_overflow")
    assert overflow.payload["stage"] == "measured"
    assert overflow.payload["window"] == 5_000
    assert overflow.payload["input_tokens"] > 5_000


class OverflowingModel(ScriptedChatModel):
    """A provider that rejects the request as too long."""

    def _generate(self, *args: object, **kwargs: object) -> object:
        raise ContextOverflowError("prompt is too long: 250000 tokens > 200000 maximum")


def test_a_provider_overflow_is_recorded_and_raised(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "trace.sqlite")
    model = OverflowingModel(messages=iter([]), profile={"max_input_tokens": 200_000})
    agent = create_agent(model, middleware=context_middleware(trace=store))
    with pytest.raises(ContextOverflowError, match="refused the call as too long twice"):
        agent.invoke({"messages": [("user", "hi")]})
    overflows = store.events(kind="context_overflow")
    assert [e.payload["stage"] for e in overflows] == ["provider", "provider"]  # the call, then the one retry
    assert "prompt is too long" in overflows[0].payload["error"]
    store.close()


async def test_async_and_streaming_runs_record_the_same(state_dir: Path) -> None:
    replies = [_call("add", {"a": 1, "b": 1}, "c1"), AIMessage("two"), AIMessage("again")]
    agent = create_context_agent(scripted_model(replies, window=8_000), [add], state_dir=state_dir)
    await agent.ainvoke({"messages": [("user", "1+1")]}, CONFIG)
    async for _chunk in agent.astream({"messages": [("user", "more")]}, CONFIG, stream_mode="messages"):
        pass
    agent.checkpointer.conn.close()
    kinds = [e.kind for e in _trace(state_dir).events(thread_id="traced")]
    assert kinds == ["model_usage", "tool_call", "model_usage", "model_usage"]


def test_a_subagent_records_under_its_namespace(state_dir: Path) -> None:
    replies = [
        _call("task", {"description": "look around", "subagent_type": "general-purpose"}, "t1"),
        AIMessage("sub agent done"),
        AIMessage("main done"),
    ]
    agent = create_context_agent(scripted_model(replies, window=8_000), state_dir=state_dir)
    agent.invoke({"messages": [("user", "delegate")]}, CONFIG)
    agent.checkpointer.conn.close()
    usage = _trace(state_dir).events(kind="model_usage")
    namespaces = [e.namespace for e in usage]
    assert len(usage) == 3
    assert namespaces[0] == namespaces[2] == ""
    assert namespaces[1].startswith("tools:")
    assert {e.thread_id for e in usage} == {"traced"}


def test_trace_can_be_turned_off(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["a"], window=8_000), state_dir=state_dir, trace=False)
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    agent.checkpointer.conn.close()
    assert not (state_dir / "trace.sqlite").exists()


def test_an_unwritable_trace_does_not_stop_the_agent(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    agent = create_context_agent(
        scripted_model(["still answers"], window=8_000), state_dir=tmp_path / "s", trace=blocker / "trace.sqlite"
    )
    out = agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    agent.checkpointer.conn.close()
    assert out["messages"][-1].content == "still answers"
