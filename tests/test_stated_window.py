"""A provider's refusal as too long: recognised in each provider's words, and the window it states kept for the thread.

A middleware of the user's runs inside ctxwarden in a deep agent, so one that picks a smaller model per call is sent
calls shaped for the model the request named. Before, each such call past the smaller window was refused and saved
by a forced round (which clears and folds as far as it can), and the next calls were shaped for the wrong window
again: three refusals in twelve steps here. Now the window the refusal states is the thread's window for that model
from the next shaping on, kept in its checkpoints. And refusals in the words of Gemini, xAI, Groq, Bedrock, Copilot,
Kimi, Mistral, LM Studio, MiniMax and llama-cpp-python ended the run before: none of them was recognised.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from pydantic import Field

from ctxwarden import (
    DETERMINISTIC,
    ContextPolicy,
    TraceStore,
    WindowTooSmallError,
    context_report,
    create_context_agent,
)
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.refusal import is_context_overflow, stated_limit
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.stated_window import STATED_KEY
from ctxwarden.replay import ScriptedChatModel
from ctxwarden.thread.compaction import _Parts
from ctxwarden.trace.recorder import TraceRecorder


class _Status(Exception):
    """A provider SDK's error with an HTTP status (as openai's and anthropic's carry it)."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class _GoogleStyle(Exception):
    """A google client error: the status is its `code`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _wrapped(message: str) -> Exception:
    """Gemini's refusal as langchain-google-genai raises it: its own error, raised from the client's."""
    try:
        try:
            raise _GoogleStyle(message, 400)
        except _GoogleStyle as inner:
            raise RuntimeError("Invalid argument provided to Gemini") from inner
    except RuntimeError as outer:
        return outer


REFUSALS: list[tuple[str, Exception, int | None]] = [
    ("anthropic", _Status("prompt is too long: 213462 tokens > 200000 maximum", 400), 200_000),
    (
        "openai",
        _Status(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532.", 400
        ),
        128_000,
    ),
    (
        "openrouter, the reply counted in",
        _Status(
            "This endpoint's maximum context length is 131072 tokens. However, you requested about 136000 tokens "
            "(120000 of text input, 16000 in the output). Please reduce the length of either one.",
            400,
        ),
        115_072,
    ),
    (
        "vllm, the reply counted in",
        _Status(
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
            "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            400,
        ),
        3_096,
    ),
    ("openai responses", _Status("Input tokens exceed the configured limit of 272,000 tokens.", 400), 272_000),
    (
        "gemini",
        _wrapped("The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."),
        1_048_575,
    ),
    (
        "xai",
        _Status("This model's maximum prompt length is 131072 but the request contains 537812 tokens.", 400),
        131_072,
    ),
    ("groq", _Status("Please reduce the length of the messages or completion.", 400), None),
    ("copilot", _Status("prompt token count of 140000 exceeds the limit of 128000", 400), 128_000),
    ("kimi", _Status("Your request exceeded model token limit: 262144 (requested: 300000)", 400), 262_144),
    (
        "mistral",
        _Status(
            "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
            400,
        ),
        32_768,
    ),
    (
        "llama.cpp server",
        _Status(
            '{"code":400,"message":"the request exceeds the available context size, try increasing it",'
            '"type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}',
            400,
        ),
        4_096,
    ),
    ("llama-cpp-python", ValueError("Requested tokens (5000) exceed context window of 4096"), 4_096),
    ("lm studio", _Status("tokens to keep from the initial prompt is greater than the context length", 400), None),
    ("bedrock", ValueError("ValidationException: Input is too long for requested model."), None),
    ("minimax", _Status("invalid params, context window exceeds limit (2013)", 400), None),
]


@pytest.mark.parametrize(("provider", "error", "limit"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_each_providers_refusal_is_recognised_and_the_limit_it_names_is_read(
    provider: str, error: Exception, limit: int | None
) -> None:
    assert is_context_overflow(error)
    assert stated_limit(error) == limit


@pytest.mark.parametrize(
    "error",
    [
        _Status("Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.", 429),
        _Status("prompt is too long: 213462 tokens > 200000 maximum", 500),
        _Status("Invalid value for 'temperature': 3 is greater than the maximum of 2.", 400),
        ConnectionError("connection reset by peer"),
    ],
    ids=["a rate limit in tokens", "a server error", "another bad request", "a network error"],
)
def test_an_error_that_is_no_refusal_of_the_prompts_size_is_not_taken_for_one(error: Exception) -> None:
    assert not is_context_overflow(error)


def test_an_error_raised_while_a_refusal_was_handled_is_not_taken_for_one() -> None:
    """The retry after a refusal fails for another reason: that error is raised as it is, not retried as a refusal."""

    def retry_fails() -> None:
        try:
            raise _Status("prompt is too long: 213462 tokens > 200000 maximum", 400)
        except _Status:
            raise ConnectionError("connection reset by peer") from None

    with pytest.raises(ConnectionError) as caught:
        retry_fails()
    assert caught.value.__context__ is not None
    assert not is_context_overflow(caught.value)


class _Small(ScriptedChatModel):
    """A 16k model that refuses, in Anthropic's words, a prompt past its window (counted as langchain counts)."""

    sizes: list[int] = Field(default_factory=list)
    refused: list[int] = Field(default_factory=list)
    limit: int = 16_000

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        size = count_tokens_approximately(messages)
        self.sizes.append(size)
        if size > self.limit:
            self.refused.append(size)
            raise ContextOverflowError(f"prompt is too long: {size} tokens > {self.limit} maximum")
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def read(page: int) -> str:
    """Read a page of the report."""
    return "\n".join(f"page {page} line {i}: " + "lorem ipsum dolor sit amet " * 3 for i in range(150))


def _steps(first: int, count: int, last: str) -> list[AIMessage]:
    calls = [
        AIMessage("", tool_calls=[{"name": "read", "args": {"page": i}, "id": f"r{i}"}])
        for i in range(first, first + count)
    ]
    return [*calls, AIMessage(last)]


class _PickSmall(AgentMiddleware):
    """The user's own middleware: every call goes to the small model, whatever the request names."""

    def __init__(self, small: _Small) -> None:
        super().__init__()
        self.small = small

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(model=self.small))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return await handler(request.override(model=self.small))


def _agent(state_dir: Path, small: _Small) -> Any:
    """An agent on a 128k model whose own middleware sends every call to `small` instead."""
    big = ScriptedChatModel(messages=iter(()), profile=ModelProfile(max_input_tokens=128_000), name="big")
    return create_context_agent(big, [read], state_dir=state_dir, middleware=[_PickSmall(small)])


def _windows(messages: list[Any]) -> list[tuple[int, str]]:
    return [
        (m.response_metadata[METADATA_KEY]["window"], m.response_metadata[METADATA_KEY]["window_source"])
        for m in messages
        if isinstance(m, AIMessage) and METADATA_KEY in m.response_metadata
    ]


def _run(agent: Any, config: dict[str, Any], text: str, how: str) -> dict[str, Any]:
    task = {"messages": [("user", text)]}
    return agent.invoke(task, config) if how == "sync" else asyncio.run(agent.ainvoke(task, config))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_after_one_refusal_every_call_is_shaped_for_the_window_it_stated(tmp_path: Path, how: str) -> None:
    small = _Small(messages=iter(_steps(0, 12, "done")), name="small")
    config = {"configurable": {"thread_id": "picked"}, "recursion_limit": 200}
    out = _run(_agent(tmp_path, small), config, "Read the report.", how)

    assert out["messages"][-1].content == "done"
    assert len(small.refused) == 1  # before: 3, each saved by a forced round, the next calls shaped for 128k again
    windows = _windows(out["messages"])
    stated = windows.index((16_000, "refusal"))
    assert set(windows[:stated]) == {(128_000, "profile")}  # the calls before the refusal
    assert set(windows[stated:]) == {(16_000, "refusal")}  # the refused call and every one after it
    overflow = TraceStore(tmp_path / "trace.sqlite").events(kind="context_overflow")
    assert [e.payload["stated_window"] for e in overflow] == [16_000]
    forced = [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.payload.get("forced")]
    assert not forced  # shaped as usual for the stated window: no forced round cleared what that window holds


def test_a_resumed_thread_keeps_the_stated_window_and_another_thread_starts_without_it(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "resumed"}, "recursion_limit": 200}
    first = _Small(messages=iter(_steps(0, 8, "first part done")), name="small")
    _run(_agent(tmp_path, first), config, "Read the first pages.", "sync")
    assert len(first.refused) == 1

    later = _Small(messages=iter(_steps(8, 6, "second part done")), name="small")
    agent = _agent(tmp_path, later)  # a new process: a new stack on the same state dir
    out = _run(agent, config, "Read the next pages.", "sync")
    assert out["messages"][-1].content == "second part done"
    assert not later.refused
    stamps = _windows(out["messages"])
    assert stamps[-7:] == [(16_000, "refusal")] * 7  # every call of the resumed run, its first too
    assert agent.get_state(config).values[STATED_KEY] == {"big": 16_000}
    report = context_report(
        agent, config, model=ScriptedChatModel(messages=iter(()), profile={"max_input_tokens": 128_000}, name="big")
    )
    assert (report.window, report.window_source) == (16_000, "refusal")
    budgeted = context_report(agent, config, policy=ContextPolicy(window=128_000))  # a budget above it, no model
    assert (budgeted.window, budgeted.window_source) == (16_000, "refusal")
    # a compaction on demand, given the named model's window, folds for the one the provider stated
    parts = _Parts(None, TraceRecorder(None), ContextPolicy(window=128_000), TokenMeter(), DETERMINISTIC)
    assert parts.fold_input(agent.get_state(config).values, "resumed", None).window == 16_000

    other = _Small(messages=iter(_steps(0, 1, "other done")), name="small")
    fresh = _run(_agent(tmp_path, other), {"configurable": {"thread_id": "other"}}, "Read page 0.", "sync")
    assert _windows(fresh["messages"])[0] == (128_000, "profile")  # a limit one thread was told is its own


def test_a_stated_window_the_fixed_prompt_fills_says_so(tmp_path: Path) -> None:
    small = _Small(messages=iter(_steps(0, 4, "done")), name="small", limit=1_000)
    config = {"configurable": {"thread_id": "tiny"}, "recursion_limit": 200}
    with pytest.raises(WindowTooSmallError) as caught:
        _run(_agent(tmp_path, small), config, "Read the report.", "sync")
    message = str(caught.value)
    assert "is 1,000 tokens, as the provider said refusing a call of the thread as too long" in message
    assert "Fix: use a model with a larger window" in message


def test_a_stated_window_no_smaller_than_the_calls_is_not_kept_and_the_forced_round_follows(tmp_path: Path) -> None:
    """A refusal that names a limit above the window the call was shaped for says nothing new."""

    class Odd(_Small):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            size = count_tokens_approximately(messages)
            if size > self.limit:
                self.refused.append(size)
                raise ContextOverflowError(f"prompt is too long: {size} tokens > 500000 maximum")
            return ScriptedChatModel._generate(self, messages, stop, run_manager, **kwargs)

    small = Odd(messages=iter(_steps(0, 8, "done")), name="small")
    config = {"configurable": {"thread_id": "odd"}, "recursion_limit": 200}
    agent = _agent(tmp_path, small)
    out = _run(agent, config, "Read the report.", "sync")
    assert out["messages"][-1].content == "done"
    assert small.refused  # shaped for 128k, refused at 16k
    assert {w for w, _ in _windows(out["messages"])} == {128_000}
    assert STATED_KEY not in agent.get_state(config).values
    assert [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.payload.get("forced")]
