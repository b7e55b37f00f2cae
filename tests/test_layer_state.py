"""A custom layer's state is kept when declared, and refused with the fix when not: never dropped in silence."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents.middleware.types import AgentState, ModelRequest, PrivateStateAttr
from langchain_core.messages import AIMessage

from ctxwarden import create_context_agent
from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.errors import LayerStateError
from ctxwarden.replay import scripted_model


class CountState(AgentState):
    calls_seen: Annotated[NotRequired[int], PrivateStateAttr]


class CountingLayer:
    """Counts the model calls of a thread in its own state key."""

    name = "counting"

    def __init__(self, *, declare: bool = True) -> None:
        if declare:
            self.state_schema = CountState

    def shape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        seen = int((request.state or {}).get("calls_seen", 0))
        return LayerEdit(request, state={"calls_seen": seen + 1})

    async def ashape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        return self.shape(request, budget)


class Clashing(CountingLayer):
    name = "clashing"

    class State(AgentState):
        ctxwarden_fold: NotRequired[str]

    state_schema = State


def _agent(state_dir: Path, layer: Any, replies: list) -> Any:
    return create_context_agent(scripted_model(replies, window=32_000), [], state_dir=state_dir, layers=[layer])


def test_a_declared_layer_state_is_kept_from_call_to_call(state_dir: Path) -> None:
    agent = _agent(state_dir, CountingLayer(), ["one", "two", "three"])
    config = {"configurable": {"thread_id": "count"}}
    for text in ("a", "b", "c"):
        agent.invoke({"messages": [("user", text)]}, config)
    assert agent.get_state(config).values["calls_seen"] == 3
    agent.checkpointer.conn.close()


async def test_async_calls_keep_it_too(state_dir: Path) -> None:
    agent = _agent(state_dir, CountingLayer(), ["one", "two"])
    config = {"configurable": {"thread_id": "acount"}}
    for text in ("a", "b"):
        await agent.ainvoke({"messages": [("user", text)]}, config)
    assert (await agent.aget_state(config)).values["calls_seen"] == 2
    agent.checkpointer.conn.close()


def test_an_undeclared_key_stops_the_call_naming_the_key_and_the_fix(state_dir: Path) -> None:
    agent = _agent(state_dir, CountingLayer(declare=False), [AIMessage("never sent")])
    with pytest.raises(LayerStateError, match=r"'calls_seen'.*Fix: declare it on the layer"):
        agent.invoke({"messages": [("user", "a")]}, {"configurable": {"thread_id": "undeclared"}})
    agent.checkpointer.conn.close()


def test_a_key_clashing_with_ctxwarden_state_is_refused_at_build_time(state_dir: Path) -> None:
    with pytest.raises(LayerStateError, match=r"'ctxwarden_fold'.*Fix: rename"):
        _agent(state_dir, Clashing(declare=False), ["x"])  # its class declares the clashing schema


def test_a_schema_that_is_not_a_typeddict_is_refused_at_build_time(state_dir: Path) -> None:
    layer = CountingLayer()
    layer.state_schema = 42  # type: ignore[assignment]
    with pytest.raises(LayerStateError, match="not a TypedDict"):
        _agent(state_dir, layer, ["x"])
