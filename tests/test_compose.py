"""`context_middleware()` composes in a plain list with the user's own middleware, before or after it.

In a deep agent it takes the summarization slot wherever it stands in the list, so it shapes every call ahead of the
user's middleware; with langchain's `create_agent` the list's order is the run order. Each order is run with a user
middleware that edits the request and one that records what it is handed. A middleware ahead of ctxwarden that
rewrites messages (a redactor) holds through folds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.middleware.summarization import SummarizationMiddleware as DeepSummarization
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelFallbackMiddleware, ModelRequest, ModelRetryMiddleware
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxwarden import CallBudget, ContextPolicy, LayerEdit, TraceStore, context_middleware
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import ScriptedChatModel, scripted_model

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


SECRET = "SECRET-TOKEN-abc123XYZ"
TASK_SECRET = "TASK-SECRET-9f8e7d"


class Redact(AgentMiddleware):
    """The user's middleware ahead of ctxwarden that takes secrets out of every message the model is sent (same ids;
    the thread keeps them)."""

    def _redacted(self, request: ModelRequest) -> ModelRequest:
        def clean(message: Any) -> Any:
            text = str(message.content)
            if SECRET not in text and TASK_SECRET not in text:
                return message
            return message.model_copy(update={"content": text.replace(SECRET, "[gone]").replace(TASK_SECRET, "[gone]")})

        return request.override(messages=[clean(m) for m in request.messages])

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return handler(self._redacted(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return await handler(self._redacted(request))


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    lines = [f"page {page} line {i}: data data data /src/mod_{page}_{i}.py" for i in range(30)]
    if page == 0:
        lines.insert(3, f"ERROR: auth failed with api_key={SECRET} at /etc/creds.cfg")
    return "\n".join(lines)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_with_create_agent_a_middleware_ahead_that_redacts_holds_through_folds(mode: str, tmp_path: Path) -> None:
    """The fold summaries, the pinned task and the gists are made from what the middleware ahead made of each message,
    not from the thread's originals: no call ever shows the model what it took out."""
    thought = "Let me think about the parser carefully. " * 40
    steps = [AIMessage(thought, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(16)]
    record = Record()
    policy = ContextPolicy(clear_call_text=False)  # the thoughts stay: folds do the work
    ctx = context_middleware(state_dir=tmp_path, policy=policy, trace=False, summarizer="deterministic")
    model = scripted_model([*steps, "done"], window=6_000)
    agent = create_agent(model, [fetch], middleware=[Redact(), ctx, record], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "redacted"}, "recursion_limit": 200}
    task = {"messages": [HumanMessage(f"Fix the parser. The staging login is {TASK_SECRET}.")]}
    out = agent.invoke(task, config) if mode == "sync" else asyncio.run(agent.ainvoke(task, config))
    folds = [
        m
        for m in out["messages"]
        if "context_compaction" in m.response_metadata.get(METADATA_KEY, {}).get("events", [])
    ]
    assert len(folds) >= 2
    assert any(SECRET in str(m.content) for m in out["messages"])  # the thread keeps its originals
    shown = [text for texts, _system in record.calls for text in texts]
    assert not [text for text in shown if SECRET in text or TASK_SECRET in text]


class _Down(ScriptedChatModel):
    """A primary that is down: every call fails, so the fallback answers."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        raise RuntimeError("503 primary overloaded")


class _Strict(ScriptedChatModel):
    """A fallback that refuses a prompt past its window, as a provider does, and records each prompt's size."""

    sizes: list[int] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        size = count_tokens_approximately(messages)
        self.sizes.append(size)
        if size > 16_000:
            raise ContextOverflowError(f"prompt is too long: {size} tokens > 16000")
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def read(page: int) -> str:
    """Read a page of the report."""
    return "\n".join(f"page {page} line {i}: " + "lorem ipsum dolor sit amet " * 3 for i in range(150))


@pytest.mark.parametrize("how", ["create_agent, fallback ahead", "deep agent, smallest window given"])
def test_a_fallback_model_with_a_smaller_window_is_sent_calls_that_fit_it(how: str, tmp_path: Path) -> None:
    """The two ways docs/stack.md gives to shape calls for a fallback's smaller window: no call is refused."""
    replies = [AIMessage("", tool_calls=[{"name": "read", "args": {"page": i}, "id": f"r{i}"}]) for i in range(8)]
    primary = _Down(messages=iter(()), profile=ModelProfile(max_input_tokens=128_000), name="primary")
    fallback = _Strict(
        messages=iter([*replies, AIMessage("done")]), profile=ModelProfile(max_input_tokens=16_000), name="fallback"
    )
    if how.startswith("create_agent"):
        ctx = context_middleware(state_dir=tmp_path, trace=False)
        middleware: list[Any] = [ModelFallbackMiddleware(fallback), ctx]
        agent = create_agent(primary, [read], middleware=middleware, checkpointer=InMemorySaver())
    else:
        ctx = context_middleware(state_dir=tmp_path, trace=False, policy=ContextPolicy(window=16_000))
        middleware = [ctx, ModelFallbackMiddleware(fallback)]
        agent = create_deep_agent(primary, [read], middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "fallback"}, "recursion_limit": 100}
    out = agent.invoke({"messages": [("user", "Read the report.")]}, config)
    assert out["messages"][-1].content == "done"
    assert len(fallback.sizes) == 9  # every call answered the first time it was sent
    assert max(fallback.sizes) <= 16_000
    windows = {m.response_metadata[METADATA_KEY]["window"] for m in out["messages"] if isinstance(m, AIMessage)}
    assert windows == {16_000}


class _Flaky(ScriptedChatModel):
    """Overloaded once on every call: the reply comes on the retry."""

    failed: list[int] = Field(default_factory=list)
    calls: int = 0

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls % 2 == 1:
            self.failed.append(self.calls)
            raise ConnectionError("503 overloaded")
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.mark.parametrize("flaky", [False, True])
def test_a_retry_ahead_of_the_stack_traces_each_batch_and_fold_once(flaky: bool, tmp_path: Path) -> None:
    """langchain's ModelRetryMiddleware ahead of ctxwarden sends the call again, and ctxwarden shapes it again: each
    failed attempt's clearing batches and folds were traced too (here every batch twice), and the report counted them.
    The trace keeps the shaping that was answered."""
    replies = [AIMessage("", tool_calls=[{"name": "read", "args": {"page": i}, "id": f"r{i}"}]) for i in range(14)]
    kind = _Flaky if flaky else ScriptedChatModel
    model = kind(messages=iter([*replies, AIMessage("done")]), profile=ModelProfile(max_input_tokens=6_000))
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False, retry_on=(ConnectionError,))
    ctx = context_middleware(trace=tmp_path / "trace.sqlite", summarizer="deterministic")
    agent = create_agent(model, [read], middleware=[retry, ctx], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [("user", "Read the report.")]}, {"configurable": {"thread_id": "retried"}})
    assert out["messages"][-1].content == "done"
    assert bool(getattr(model, "failed", [])) == flaky
    store = TraceStore(tmp_path / "trace.sqlite")
    batches = [e.payload["tokens_before"] for e in store.events(kind="context_clear")]
    folds = [e.payload["fold"] for e in store.events(kind="context_compaction")]
    store.close()
    assert batches
    assert len(batches) == len(set(batches))  # before: a batch made for a failed attempt was traced again
    assert len(folds) == len(set(folds))
