"""`context_middleware()` composes in a plain list with the user's own middleware, before or after it.

In a deep agent it takes the summarization slot wherever it stands in the list, so it shapes every call ahead of the
user's middleware; with langchain's `create_agent` the list's order is the run order. Each order is run with a user
middleware that edits the request and one that records what it is handed.
"""

from __future__ import annotations

from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.middleware.summarization import SummarizationMiddleware as DeepSummarization
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import CallBudget, LayerEdit, context_middleware
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model

TAG = "[edited by the user's middleware]"
CONFIG = {"configurable": {"thread_id": "compose"}}


class Shorten:
    """A ctxwarden layer: replaces every user message's text with a short marker (what the stack did, visibly)."""

    name = "shorten"

    def shape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        messages = [HumanMessage("[short]", id=m.id) if isinstance(m, HumanMessage) else m for m in request.messages]
        return LayerEdit(request.override(messages=messages))

    async def ashape(self, request: ModelRequest, budget: CallBudget) -> LayerEdit:
        return self.shape(request, budget)


class Edit(AgentMiddleware):
    """The user's middleware that edits the request: a line added to the system prompt."""

    def _edited(self, request: ModelRequest) -> ModelRequest:
        text = request.system_message.text if request.system_message is not None else ""
        return request.override(system_message=SystemMessage(f"{text}\n{TAG}"))

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return handler(self._edited(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return await handler(self._edited(request))


class Record(AgentMiddleware):
    """The user's middleware that records what each call hands it: the messages and the system prompt."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[list[str], str]] = []

    def _keep(self, request: ModelRequest) -> None:
        system = request.system_message.text if request.system_message is not None else ""
        self.calls.append(([str(m.content) for m in request.messages], system))

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self._keep(request)
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self._keep(request)
        return await handler(request)


def _build(builder: str, order: str, record: Record) -> Any:
    ctx = context_middleware(layers=[Shorten()], trace=False)
    mine: list[AgentMiddleware] = [Edit(), record]
    middleware = [ctx, *mine] if order == "before" else [*mine, ctx]
    model = scripted_model(["ok"], window=8_000)
    if builder == "deepagents":
        return create_deep_agent(model, [], middleware=middleware, checkpointer=InMemorySaver())
    return create_agent(model, [], middleware=middleware, checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("order", ["before", "after"])
async def test_in_a_deep_agent_it_shapes_the_call_ahead_of_user_middleware_in_either_order(
    order: str, mode: str
) -> None:
    record = Record()
    agent = _build("deepagents", order, record)
    state = {"messages": [HumanMessage("a long request " * 50)]}
    out = agent.invoke(state, CONFIG) if mode == "sync" else await agent.ainvoke(state, CONFIG)
    (messages, system), *_ = record.calls
    assert messages == ["[short]"]  # ctxwarden ran first: the recorder sees its view, not the raw thread
    assert system.endswith(TAG)  # the user's own run in their list's order: the editor, then the recorder
    stamp = out["messages"][-1].response_metadata[METADATA_KEY]
    assert stamp["applied"] == ["shorten"]
    assert out["messages"][0].content == "a long request " * 50  # the thread keeps the original


@pytest.mark.parametrize("order", ["before", "after"])
def test_in_a_deep_agent_it_replaces_the_stock_summarization_in_either_order(
    order: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deepagents.graph

    built: list[list[AgentMiddleware]] = []
    real = deepagents.graph.create_agent

    def recording(*args: Any, **kwargs: Any) -> Any:
        built.append(list(kwargs["middleware"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(deepagents.graph, "create_agent", recording)
    _build("deepagents", order, Record())
    stack = built[-1]
    names = [m.name for m in stack]
    assert names.count("SummarizationMiddleware") == 1
    assert not any(isinstance(m, DeepSummarization) for m in stack)
    assert names.index("SummarizationMiddleware") < names.index("Edit") < names.index("Record")


def test_with_create_agent_first_in_the_list_it_shapes_what_user_middleware_sees() -> None:
    record = Record()
    out = _build("langchain", "before", record).invoke({"messages": [HumanMessage("a long request " * 50)]}, CONFIG)
    assert record.calls[0][0] == ["[short]"]
    assert out["messages"][-1].response_metadata[METADATA_KEY]["applied"] == ["shorten"]


def test_with_create_agent_last_in_the_list_it_measures_what_user_middleware_made() -> None:
    record = Record()
    agent = _build("langchain", "after", record)
    out = agent.invoke({"messages": [HumanMessage("a long request " * 50)]}, CONFIG)
    assert record.calls[0][0] == ["a long request " * 50]  # the list's order is the run order: the user's ran first
    stamp = out["messages"][-1].response_metadata[METADATA_KEY]
    assert stamp["applied"] == ["shorten"]
    assert stamp["system_tokens"] > 0  # the edited system prompt (the agent has none of its own) was measured


def test_the_older_spellings_still_work() -> None:
    """`middleware=context_middleware()` and `[*context_middleware(), mine]`: it reads as a list of itself."""
    ctx = context_middleware(trace=False)
    assert list(ctx) == [ctx]
    assert ctx[0] is ctx
    record = Record()
    agent = create_agent(scripted_model(["ok"], window=8_000), middleware=[*ctx, record])
    out = agent.invoke({"messages": [HumanMessage("hi")]})
    assert isinstance(out["messages"][-1], AIMessage)
    assert record.calls
    alone = create_deep_agent(scripted_model(["ok"], window=8_000), [], middleware=context_middleware(trace=False))
    assert METADATA_KEY in alone.invoke({"messages": [HumanMessage("hi")]})["messages"][-1].response_metadata
