"""Two calls of a thread that share a call id (`call_0`, as many local model servers number them) keep their own files.

Replays two turns whose calls both use `call_0`: each large result is evicted to its own
file, byte for byte, and `recall` returns each call's own output.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model

FIRST = "\n".join(f"first build, line {i}: compiled module_{i}" for i in range(4_000))
SECOND = "\n".join(f"second build, line {i}: linked object_{i}" for i in range(3_000))


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return FIRST if target == "first" else SECOND


def _turn(target: str) -> list[AIMessage]:
    return [AIMessage("", tool_calls=[{"name": "build", "args": {"target": target}, "id": "call_0"}]), AIMessage("ok")]


def _evicted(messages: list) -> list[ToolMessage]:
    return [
        m for m in messages if isinstance(m, ToolMessage) and (m.response_metadata.get(METADATA_KEY) or {}).get("path")
    ]


def _check(state_dir: Path, agent: Any, messages: list) -> None:
    first, second = _evicted(messages)
    paths = [m.response_metadata[METADATA_KEY]["path"] for m in (first, second)]
    assert paths[0] != paths[1]
    assert (state_dir / paths[0].lstrip("/")).read_text(encoding="utf-8") == FIRST
    assert (state_dir / paths[1].lstrip("/")).read_text(encoding="utf-8") == SECOND

    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    for message, original in ((first, FIRST), (second, SECOND)):
        (reference,) = re.findall(r'recall\(call_id="([^"]+)"\)', str(message.content))
        assert reference.startswith("call_0#")
        text, number = "", 0
        while True:  # page through to the end
            number += 1
            page = recall.invoke({"call_id": reference, "state": state, "page": number, "limit": 50_000})
            body, _, note = page.rpartition("\n[ctxwarden: characters ")
            text += body if note else page
            if not note or "for the rest" not in note:
                break
        assert text == original

    bare = recall.invoke({"call_id": "call_0", "state": state})
    assert "2 tool results" in bare
    assert "share call id 'call_0'" in bare
    for message in (first, second):
        (reference,) = re.findall(r'recall\(call_id="([^"]+)"\)', str(message.content))
        assert reference in bare  # the answer lists both, each with the id that recalls it


def test_two_turns_reusing_a_call_id_keep_both_results(state_dir: Path) -> None:
    agent = create_context_agent(
        scripted_model([*_turn("first"), *_turn("second")], window=32_000), [build], state_dir=state_dir
    )
    config = {"configurable": {"thread_id": "reused"}}
    agent.invoke({"messages": [("user", "build the first")]}, config)
    messages = agent.invoke({"messages": [("user", "and the second")]}, config)["messages"]
    _check(state_dir, agent, messages)
    agent.checkpointer.conn.close()


async def test_async_turns_reusing_a_call_id_keep_both_results(state_dir: Path) -> None:
    agent = create_context_agent(
        scripted_model([*_turn("first"), *_turn("second")], window=32_000), [build], state_dir=state_dir
    )
    config = {"configurable": {"thread_id": "areused"}}
    await agent.ainvoke({"messages": [("user", "build the first")]}, config)
    messages = (await agent.ainvoke({"messages": [("user", "and the second")]}, config))["messages"]
    _check(state_dir, agent, messages)
    agent.checkpointer.conn.close()
