"""A fold asks the agent's own model for its summary by continuing the call it answered, so the cache serves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import ContextPolicy, ThreadIsolatedBackend, context_middleware
from ctxwarden.bench.harness import SeenCall
from ctxwarden.bench.metrics import _summarizer_bill
from ctxwarden.bench.strategies import Asked
from ctxwarden.core.meter import TokenMeter
from ctxwarden.errors import ReplayMismatchError
from ctxwarden.fold import SECTIONS, Folds
from ctxwarden.fold.engine import Folder, FoldInput
from ctxwarden.fold.in_place import SentCall
from ctxwarden.fold.preparation import PreparationDropped
from ctxwarden.fold.prepare import Preparer
from ctxwarden.fold.summarize import FOLD_REQUEST_SOURCE, asking, is_fold_request
from ctxwarden.replay import ScriptedChatModel
from ctxwarden.replay.model import ReplayChatModel
from ctxwarden.replay.recording import Recording
from ctxwarden.replay.scripted import AGENT_CALL
from ctxwarden.trace import TraceStore
from test_fold_prepare import _thread

WINDOW = 6_000
# ~400 tokens of assistant text per step; clear_call_text=False (in `_run`) keeps it in view: the window fills and folds
THOUGHT = "Let me think about the parser carefully. " * 40
SUMMARY = "\n".join(f"## {name}\n- from the agent's own model" for name in SECTIONS)


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 20


class AgentModel(ScriptedChatModel):
    """Scripted for the agent's calls; answers a fold's request with a summary. Keeps every request and its tools."""

    _requests: list[tuple[list[BaseMessage], Any]] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        self._bound = True
        return self.bind(**{AGENT_CALL: True}, tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        tools = kwargs.pop("tools", None)
        self._requests.append((list(messages), tools))
        if is_fold_request(messages):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY))])
        return super()._generate(messages, stop, run_manager, **kwargs)

    def split(self) -> tuple[list[tuple[int, list[BaseMessage], Any]], list[tuple[int, list[BaseMessage], Any]]]:
        """The agent's calls and the fold requests, each with its place in the order of all requests."""
        calls = [(i, m, t) for i, (m, t) in enumerate(self._requests) if not is_fold_request(m)]
        folds = [(i, m, t) for i, (m, t) in enumerate(self._requests) if is_fold_request(m)]
        return calls, folds


def _steps(n: int) -> list[AIMessage]:
    return [AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(n)]


def _run(tmp_path: Path, policy: ContextPolicy) -> tuple[AgentModel, Any, dict[str, Any]]:
    model = AgentModel(messages=iter([*_steps(16), AIMessage("done")]), profile={"max_input_tokens": WINDOW})
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    policy = policy.replace(clear_call_text=False)  # the THOUGHT of each step stays in view: the window fills, folds
    middleware = context_middleware(policy=policy, trace=tmp_path / "trace.sqlite", backend=backend)
    agent = create_agent(
        model, [fetch], system_prompt="You fix parsers.", middleware=middleware, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "in-place"}}
    agent.invoke({"messages": [HumanMessage("Fix the parser.")]}, config)
    return model, agent, config


def _same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return [(m.type, m.content, m.id) for m in a] == [(m.type, m.content, m.id) for m in b]


def test_a_prepared_fold_continues_the_answered_call_and_its_summary_is_applied(tmp_path: Path) -> None:
    model, agent, config = _run(tmp_path, ContextPolicy())
    calls, folds = model.split()
    assert folds  # the agent's own model was asked, as no summarizer was given
    for position, asked, tools in folds:
        ask = asked[-1]
        assert isinstance(ask, HumanMessage)
        assert ask.additional_kwargs["lc_source"] == FOLD_REQUEST_SOURCE
        assert "Do not call any tool" in str(ask.content)
        # everything before the instruction is a call the model had answered already, byte for byte, tools included
        answered = [(i, m, t) for i, m, t in calls if i < position and _same(m, asked[:-1])]
        assert answered, "the request does not begin with a call the model answered before it"
        assert answered[-1][2] == tools
        assert isinstance(asked[0], SystemMessage)
    record = Folds.from_state(agent.get_state(config).values).records[0]
    assert "from the agent's own model" in record.summary
    compaction = next(e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind="context_compaction"))
    assert compaction["prepared"] is True


def test_with_summarize_in_place_off_the_model_gets_the_transcript(tmp_path: Path) -> None:
    model, _agent, _config = _run(tmp_path, ContextPolicy(summarize_in_place=False))
    _calls, folds = model.split()
    assert folds
    for _position, asked, tools in folds:
        assert len(asked) == 1  # one user message: the transcript prompt
        assert "<conversation>" in str(asked[0].content)
        assert tools is None


def test_a_preparation_whose_call_was_not_answered_is_dropped_without_asking(tmp_path: Path) -> None:
    model = AgentModel(messages=iter(()), profile={"max_input_tokens": WINDOW})
    preparer = Preparer(Folder(ContextPolicy(), TokenMeter(), None))
    messages = _thread(8)
    sent = SentCall(model, SystemMessage("You fix parsers."), tuple(messages), (fetch,))
    given = FoldInput(messages, messages, Folds(), WINDOW, 0, 1.0, 4_000, "t", "", fallback_model=model, sent=sent)
    assert preparer.ahead(given, draft=False)  # started: it waits for the call's answer
    preparation = preparer.prepared("t")
    assert preparation is not None
    assert preparation.sent is not None
    # the next call comes, and the call that started it was never answered (it failed): dropped, nothing asked
    events = preparer.ahead(given, start=False, draft=False)
    assert [e[1].get("discarded") for e in events] == ["the call that started it was not answered"]
    with pytest.raises(PreparationDropped):
        preparation.future.result(timeout=10)
    assert model._requests == []
    assert preparation.unanswered
    assert preparer.prepared("t") is None
    # the call's answer comes after all (another thread dropped it first): ignored, and the call goes on
    preparation.answer(ModelRequest(model=model, messages=list(messages), tools=[fetch]))
    assert preparation.unanswered


def test_an_anthropic_request_marks_where_the_cache_is_read() -> None:
    class Anthropic(AgentModel):
        @property
        def _llm_type(self) -> str:
            return "anthropic-chat"

    bound = SentCall(Anthropic(messages=iter(())), None, (), (fetch,)).bound
    assert cast(Any, bound).kwargs["cache_control"] == {"type": "ephemeral"}
    plain = SentCall(AgentModel(messages=iter(())), None, (), (fetch,)).bound
    assert "cache_control" not in cast(Any, plain).kwargs


def test_the_bench_bills_a_request_by_the_prefix_it_shares_with_the_calls_before_it() -> None:
    meter = TokenMeter()
    tools = [convert_to_openai_tool(fetch)]
    call = [SystemMessage("You fix parsers."), *_thread(6)]
    ask = asking("Summarize.")
    in_place = Asked(1, [*call, ask], tools)
    transcript = Asked(1, [asking("Summarize this transcript: " + "data " * 400)], [])
    seen = [SeenCall(6, call, tools, 1.0)]
    run = cast(Any, type("Run", (), {"asked": [in_place, transcript], "calls": seen}))
    tokens, cached = _summarizer_bill(run, meter)
    prefix = meter.tools_tokens(tools) + sum(meter.message_tokens(m) for m in call)
    whole = meter.message_tokens(transcript.messages[0])
    assert tokens == prefix + meter.message_tokens(ask) + whole
    assert cached == prefix  # the in-place request reads the call's prefix from the cache; the transcript nothing
    # made before any call, the same request shares nothing
    run.asked = [Asked(0, in_place.messages, tools)]
    assert _summarizer_bill(run, meter) == (prefix + meter.message_tokens(ask), 0)


def test_a_replay_hands_fold_requests_to_its_summaries_model_without_taking_a_step(
    shipped_recording: Recording,
) -> None:
    summaries = AgentModel(messages=iter(()))
    replay = ReplayChatModel(recording=shipped_recording, summaries=summaries)
    bound = replay.bind_tools([fetch])
    reply = bound.invoke([SystemMessage("s"), HumanMessage("task"), asking("Summarize.")])
    assert reply.content == SUMMARY
    assert replay.position == 0  # the agent's next recorded step is still to come
    ((asked, tools),) = summaries._requests
    assert tools == [convert_to_openai_tool(fetch)]  # asked with the agent's tools, as the fold sent it
    assert is_fold_request(asked)
    refusing = ReplayChatModel(recording=shipped_recording).bind_tools([fetch])
    with pytest.raises(ReplayMismatchError):
        refusing.invoke([HumanMessage("task"), asking("Summarize.")])
