"""Fold and clear events on the custom stream: a client sees "compacting…" start and end, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.core.stream import STREAM_KEY
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

WINDOW = 6_000
THOUGHT = "Let me think about the parser carefully. " * 30  # ~300 tokens of assistant text per step


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


def _agent(tmp_path: Path) -> Any:
    replies = [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(24)
    ]
    policy = ContextPolicy(clear_call_text=False)  # clearing keeps THOUGHT in view: the window fills and folds
    middleware = context_middleware(state_dir=tmp_path, summarizer="deterministic", policy=policy)
    model = scripted_model([*replies, AIMessage("done")], window=WINDOW)
    return create_agent(model, [fetch], middleware=middleware, checkpointer=InMemorySaver())


def _check(events: list[dict[str, Any]], chunks: list[tuple[str, Any]], tmp_path: Path) -> None:
    kinds = [e[STREAM_KEY] for e in events]
    assert {"clear", "fold_start", "fold_end", "gauge_note"} <= set(kinds)
    # every fold starts, then ends, before anything else happens
    for i, kind in enumerate(kinds):
        if kind == "fold_start":
            end = events[i + 1]
            assert end[STREAM_KEY] == "fold_end"
            assert end["fold"] == events[i]["fold"]
            assert end["tokens_before"] == events[i]["tokens_before"]
            assert end["tokens_after"] < end["tokens_before"]
            assert end["path"] == "/conversation_history/stream.md"
            assert end["source"] == "deterministic"
            assert end["ok"] is True
    folds = [e["fold"] for e in events if e[STREAM_KEY] == "fold_end"]
    assert folds == list(range(1, len(folds) + 1))
    # the same batches and folds, in the same order, as the trace records
    trace = TraceStore(tmp_path / "trace.sqlite").events(
        thread_id="stream", kind=["context_clear", "context_compaction"]
    )
    streamed = [(e[STREAM_KEY], e["tokens_before"]) for e in events if e[STREAM_KEY] in {"clear", "fold_end"}]
    recorded = [("clear" if t.kind == "context_clear" else "fold_end", t.payload["tokens_before"]) for t in trace]
    assert streamed == recorded
    clears = [e for e in events if e[STREAM_KEY] == "clear"]
    assert all(e["results"] + e["args"] > 0 and e["tokens_after"] < e["tokens_before"] for e in clears)
    # they arrive while the model step that does them runs, before its update
    order = [mode if mode == "updates" else chunk[STREAM_KEY] for mode, chunk in chunks]
    first_fold = order.index("fold_start")
    assert order[first_fold + 1] == "fold_end"
    assert "updates" in order[first_fold + 2 :]


def _split(chunks: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [c for mode, c in chunks if mode == "custom" and isinstance(c, dict) and STREAM_KEY in c]


def test_a_client_streaming_custom_sees_each_clear_and_fold_in_order(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "stream"}}
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, config, stream_mode=["custom", "updates"]))
    _check(_split(chunks), chunks, tmp_path)


async def test_the_async_stream_carries_the_same_events(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "stream"}}
    chunks = [
        c async for c in agent.astream({"messages": [HumanMessage("go")]}, config, stream_mode=["custom", "updates"])
    ]
    _check(_split(chunks), chunks, tmp_path)


@pytest.mark.parametrize("mode", ["updates", "messages"])
def test_nothing_is_written_to_other_stream_modes(tmp_path: Path, mode: str) -> None:
    agent = _agent(tmp_path)
    config = {"configurable": {"thread_id": "stream"}}
    for chunk in agent.stream({"messages": [HumanMessage("go")]}, config, stream_mode=mode):
        assert not (isinstance(chunk, dict) and STREAM_KEY in chunk)
