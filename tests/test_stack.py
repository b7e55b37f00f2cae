"""The one-call stack: where it sits in a deep agent, the layer pipeline, sync/async/stream, calibration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deepagents.graph
import pytest
from deepagents.middleware.summarization import SummarizationMiddleware as DeepSummarization
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage

from ctxwarden import (
    CallBudget,
    ContextPolicy,
    ContextWindowMiddleware,
    LayerEdit,
    TokenMeter,
    context_middleware,
    create_context_agent,
)
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model
from views import Views, Watch

CONFIG = {"configurable": {"thread_id": "t"}}


class Shorten:
    """A test layer: replaces every user message's text with a short marker."""

    name = "shorten"

    def __init__(self) -> None:
        self.budgets: list[CallBudget] = []

    def shape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        self.budgets.append(budget)
        messages = [HumanMessage("[short]", id=m.id) if isinstance(m, HumanMessage) else m for m in request.messages]
        return LayerEdit(request.override(messages=messages))

    async def ashape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        return self.shape(request, budget)


def _stamps(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.response_metadata[METADATA_KEY] for m in messages if isinstance(m, AIMessage)]


def test_takes_the_summarization_slot_ahead_of_user_middleware(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[list[AgentMiddleware]] = []
    real_create_agent = deepagents.graph.create_agent

    def recording_create_agent(*args: Any, **kwargs: Any) -> Any:
        built.append(list(kwargs["middleware"]))
        return real_create_agent(*args, **kwargs)

    monkeypatch.setattr(deepagents.graph, "create_agent", recording_create_agent)
    probe = Views()
    agent = create_context_agent(scripted_model(["ok"], window=8_000), state_dir=state_dir, middleware=[probe])
    agent.checkpointer.conn.close()

    names = [type(m).__name__ for m in built[-1]]
    assert names[:5] == [
        "FilesystemMiddleware",
        "SubAgentMiddleware",
        "_ParentNotifierMiddleware",
        "ContextStack",
        "PatchToolCallsMiddleware",
    ]
    assert names.index("ContextStack") < names.index("Views")
    assert not any(isinstance(m, DeepSummarization) for m in built[-1])

    # the general-purpose subagent inherits the replacement for its own summarization slot
    subagents = next(m for m in built[-1] if type(m).__name__ == "SubAgentMiddleware")
    general = next(spec for spec in subagents._subagents if spec["name"] == "general-purpose")
    general_names = [type(m).__name__ for m in general["middleware"]]
    assert "ContextStack" in general_names
    assert not any(isinstance(m, DeepSummarization) for m in general["middleware"])


def test_user_middleware_sees_what_the_layers_produced(state_dir: Path) -> None:
    probe = Views()
    agent = create_context_agent(
        scripted_model(["ok"], window=8_000),
        state_dir=state_dir,
        middleware=[probe],
        layers=[Shorten()],
    )
    agent.invoke({"messages": [HumanMessage("a long request " * 50)]}, CONFIG)
    agent.checkpointer.conn.close()
    assert [m.content for m in probe.views[0]] == ["[short]"]


def test_with_a_plain_langchain_agent_the_stack_goes_first() -> None:
    probe = Views()
    agent = create_agent(
        scripted_model(["ok"], window=8_000), middleware=[*context_middleware(layers=[Shorten()]), probe]
    )
    agent.invoke({"messages": [HumanMessage("a long request " * 50)]})
    assert [m.content for m in probe.views[0]] == ["[short]"]


def test_layers_run_in_order_each_on_a_fresh_measurement() -> None:
    shorten, watch = Shorten(), Watch()
    agent = create_agent(scripted_model(["ok"], window=8_000), middleware=context_middleware(layers=[shorten, watch]))
    out = agent.invoke({"messages": [HumanMessage("x" * 4_000)]})
    assert watch.budgets[0].used < shorten.budgets[0].used
    stamp = _stamps(out["messages"])[0]
    assert stamp["applied"] == ["shorten"]
    assert stamp["input_tokens"] == watch.budgets[0].used
    # the checkpointed conversation keeps the original text: layers change the view only
    assert out["messages"][0].content == "x" * 4_000


def test_every_call_is_stamped_with_its_budget(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["one", "two"], window=8_000), state_dir=state_dir)
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    out = agent.invoke({"messages": [("user", "again")]}, CONFIG)
    agent.checkpointer.conn.close()
    first, second = _stamps(out["messages"])
    for stamp in (first, second):
        assert stamp["window"] == 8_000
        assert stamp["window_source"] == "profile"
        assert stamp["gauge"] in {"ok", "warn", "critical"}
        assert stamp["input_tokens"] == stamp["system_tokens"] + stamp["tool_schema_tokens"] + stamp["message_tokens"]
        assert stamp["tool_schema_tokens"] > 0  # the deep agent's file tools are part of what the model receives
    assert second["message_tokens"] > first["message_tokens"]
    assert second["fraction"] == pytest.approx(second["input_tokens"] / 8_000, abs=1e-4)


async def test_async_invoke_and_stream_on_the_sqlite_checkpointer(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["one", "two"], window=8_000), state_dir=state_dir)
    await agent.ainvoke({"messages": [("user", "hi")]}, CONFIG)
    chunks = [
        chunk async for chunk, _meta in agent.astream({"messages": [("user", "more")]}, CONFIG, stream_mode="messages")
    ]
    assert "".join(str(c.content) for c in chunks if c.type.startswith("AI")) == "two"
    state = await agent.aget_state(CONFIG)
    agent.checkpointer.conn.close()
    assert len(_stamps(state.values["messages"])) == 2


def test_sync_stream_records_the_same(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["streamed reply"], window=8_000), state_dir=state_dir)
    chunks = [c for c, _m in agent.stream({"messages": [("user", "hi")]}, CONFIG, stream_mode="messages")]
    state = agent.get_state(CONFIG)
    agent.checkpointer.conn.close()
    assert "".join(str(c.content) for c in chunks if c.type.startswith("AI")) == "streamed reply"
    assert _stamps(state.values["messages"])[0]["window"] == 8_000


def test_calibrates_against_reported_input_tokens() -> None:
    """A provider that reports twice the meter's count teaches the meter a factor of ~2."""
    meter = TokenMeter()
    middleware = ContextWindowMiddleware(meter=meter)
    probe_budgets: list[CallBudget] = []

    class Reporting(AgentMiddleware):
        def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
            probe_budgets.append(middleware.budget(request))
            response = handler(request)
            message = response.result[-1]
            estimate = probe_budgets[-1].measurement.estimate
            message.usage_metadata = {
                "input_tokens": 2 * estimate,
                "output_tokens": 1,
                "total_tokens": 2 * estimate + 1,
            }
            return response

    agent = create_agent(scripted_model(["a", "b"], window=8_000, name="m"), middleware=[middleware, Reporting()])
    first = agent.invoke({"messages": [HumanMessage("x" * 2_000)]})
    second = agent.invoke({"messages": [*first["messages"], HumanMessage("y")]})
    stamps = _stamps(second["messages"])
    assert stamps[0]["calibration"] == 1.0
    assert stamps[1]["calibration"] == pytest.approx(2.0, rel=0.01)
    assert stamps[1]["reported_input_tokens"] == pytest.approx(2 * (stamps[1]["input_tokens"] / 2), rel=0.01)
    assert meter.factor("m") == pytest.approx(2.0, rel=0.01)


def test_window_override_applies_to_every_model(state_dir: Path) -> None:
    agent = create_context_agent(
        scripted_model(["ok"], window=200_000), state_dir=state_dir, policy=ContextPolicy(window=4_000)
    )
    out = agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    agent.checkpointer.conn.close()
    stamp = _stamps(out["messages"])[0]
    assert (stamp["window"], stamp["window_source"]) == (4_000, "override")
