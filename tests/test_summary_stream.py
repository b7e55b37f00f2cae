"""Fold summaries never reach `stream_mode="messages"`: a chat UI shows only what the agent itself said."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, ContextPolicy, create_context_agent
from ctxwarden.fold import SECTIONS
from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.trace import TraceStore

WINDOW = 4_000
THOUGHT = "Let me think about the parser carefully before the next step. " * 30
SUMMARY = "\n".join(f"## {name}\n- summarytoken {name.lower()} kept" for name in SECTIONS)


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


def _replies() -> list[AIMessage]:
    steps = [
        AIMessage(f"step {i}. {THOUGHT}", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}])
        for i in range(24)
    ]
    return [*steps, AIMessage("all pages read")]


class StreamingAgentModel(ScriptedChatModel):
    """A scripted agent model that streams like a provider: its text word by word, then its tool calls."""

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[Any]:
        reply = next(self.messages)
        assert isinstance(reply, AIMessage)
        for word in re.findall(r"\S+\s*", str(reply.content)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk
        calls = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(reply.tool_calls)
        ]
        if calls:
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=calls))


class SummarizingAgentModel(StreamingAgentModel):
    """The agent's model, also asked for the summaries (no summarizer given): it streams those word by word too."""

    def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Iterator[Any]:
        if not is_fold_request(messages):
            yield from super()._stream(messages, stop, run_manager, **kwargs)
            return
        for word in re.findall(r"\S+\s*", SUMMARY):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if is_fold_request(messages):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY))])
        return super()._generate(messages, stop, run_manager, **kwargs)


def _summarizer() -> Any:
    """A chat model that streams its summary token by token when asked to (as real providers do)."""
    model = scripted_model([], window=100_000, name="summarizer")
    model.messages = iter(AIMessage(SUMMARY) for _ in cycle([0]))  # as many summaries as folds
    return model


def _agent(state_dir: Path, kind: str) -> Any:
    """An agent whose folds summarize with a summarizer model, its own model (in place) or deterministically."""
    own = kind == "own model"
    summarizer = _summarizer() if kind == "model" else None if own else DETERMINISTIC
    make = SummarizingAgentModel if own else StreamingAgentModel
    model = make(messages=iter(_replies()), profile={"max_input_tokens": WINDOW}, name="agent-model")
    policy = ContextPolicy(clear_call_text=False)  # each step's words stay in view: the window fills, folds free room
    return create_context_agent(model, [fetch], state_dir=state_dir, summarizer=summarizer, policy=policy)


def _streamed(chunks: list[tuple[Any, dict]]) -> dict[str, str]:
    """The text streamed per message id."""
    texts: dict[str, str] = {}
    for message, _metadata in chunks:
        if isinstance(message, AIMessageChunk | AIMessage) and isinstance(message.content, str):
            texts[str(message.id)] = texts.get(str(message.id), "") + message.content
    return texts


def _check(
    state_dir: Path, thread: str, chunks: list[tuple[Any, dict]], values: dict[str, Any], kind: str = "model"
) -> None:
    folds = list(TraceStore(state_dir / "trace.sqlite").events(thread_id=thread, kind="context_compaction"))
    assert len([e for e in folds if e.payload["ok"]]) >= 2, "the run must fold twice to prove anything"
    if kind == "own model":  # its summaries were written by the agent's model, asked in place, streaming
        assert {(e.payload["summarizer"], e.payload["fallback"]) for e in folds} == {("agent-model", False)}
    streamed = _streamed(chunks)
    joined = "".join(streamed.values())
    assert "summarytoken" not in joined
    assert "Session intent" not in joined
    assert all(m.get("lc_source") != "summarization" for _c, m in chunks)
    said = {str(m.id): m.content for m in values["messages"] if isinstance(m, AIMessage) and m.content}
    assert streamed == said  # the agent's own tokens, every one of them, and nothing else


@pytest.mark.parametrize("kind", ["model", "own model", DETERMINISTIC])
def test_a_run_with_two_folds_streams_only_the_agents_words(state_dir: Path, kind: str) -> None:
    agent = _agent(state_dir, kind)
    config = {"configurable": {"thread_id": "stream"}}
    chunks = list(agent.stream({"messages": [HumanMessage("read every page")]}, config, stream_mode="messages"))
    _check(state_dir, "stream", chunks, agent.get_state(config).values, kind)
    agent.checkpointer.conn.close()


@pytest.mark.parametrize("kind", ["model", "own model", DETERMINISTIC])
async def test_async_streams_keep_summaries_out_too(state_dir: Path, kind: str) -> None:
    agent = _agent(state_dir, kind)
    config = {"configurable": {"thread_id": "astream"}}
    chunks = [c async for c in agent.astream({"messages": [HumanMessage("go")]}, config, stream_mode="messages")]
    _check(state_dir, "astream", chunks, (await agent.aget_state(config)).values, kind)
    agent.checkpointer.conn.close()
