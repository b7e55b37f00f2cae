"""Ids the code did not expect: any string is a call id `recall` finds, and an empty thread id is refused up front.

A call id may end like a call key (`c#0badf00d`): `recall` takes it whole when the thread has a call by that
whole id; an id that is another call's keyed reference (`c1#<c1's key>`) gets the name of each, never the wrong
result. A thread id `""` is refused at the first model call with an error that says what to pass, before any
tool runs: a thread with no usable name gets no eviction or folding folder, so running it would overflow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.clip.names import call_key, shown_id
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.errors import CtxwardenError
from ctxwarden.replay import scripted_model

SMALL = "small output of the odd call"
LARGE = "\n".join(f"large output line {i}: linked object_{i}" for i in range(900))
RAN: list[str] = []


@tool
def fetch(what: str) -> str:
    """Fetch `what`."""
    RAN.append(what)
    return LARGE if what == "large" else SMALL


def _agent(state_dir: Path, script: list[AIMessage]) -> Any:
    return create_context_agent(scripted_model(script, window=32_000), [fetch], state_dir=state_dir)


def test_a_call_id_ending_like_a_call_key_is_recalled_by_that_id(state_dir: Path) -> None:
    calls = [
        {"name": "fetch", "args": {"what": "small"}, "id": "c#0badf00d"},
        {"name": "fetch", "args": {"what": "large"}, "id": "d#0badf00d"},
    ]
    script = [
        AIMessage("", id="ai-1", tool_calls=calls),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "c#0badf00d"}, "id": "r1"}]),
        AIMessage("done"),
    ]
    agent = _agent(state_dir, script)
    messages = agent.invoke({"messages": [("user", "fetch both")]}, {"configurable": {"thread_id": "odd"}})["messages"]
    agent.checkpointer.conn.close()
    recalled = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert recalled.content == SMALL

    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    assert recall.invoke({"call_id": "c#0badf00d", "state": state}) == SMALL
    large = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "d#0badf00d")
    assert large.response_metadata[METADATA_KEY]["evicted"]
    text = recall.invoke({"call_id": "d#0badf00d", "state": state, "limit": 50_000})
    assert text == LARGE


def test_a_call_id_that_is_another_calls_keyed_reference_gets_both_names_never_the_wrong_result(
    state_dir: Path,
) -> None:
    twin = f"c1#{call_key('ai-1', 0)}"  # the reference the eviction marker of call c1 writes
    script = [
        AIMessage("", id="ai-1", tool_calls=[{"name": "fetch", "args": {"what": "large"}, "id": "c1"}]),
        AIMessage("", id="ai-2", tool_calls=[{"name": "fetch", "args": {"what": "small"}, "id": twin}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": twin}, "id": "r1"}]),
        AIMessage("done"),
    ]
    agent = _agent(state_dir, script)
    messages = agent.invoke({"messages": [("user", "fetch both")]}, {"configurable": {"thread_id": "odd"}})["messages"]
    agent.checkpointer.conn.close()
    answer = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    own = f"{twin}#{call_key('ai-2', 0)}"
    assert f'recall(call_id="{own}")' in answer.content  # the odd call, by its own key
    assert 'recall(call_id="c1")' in answer.content
    assert "large output line" not in answer.content

    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    assert recall.invoke({"call_id": own, "state": state}) == SMALL
    assert recall.invoke({"call_id": "c1", "state": state, "limit": 50_000}) == LARGE


def test_an_empty_call_id_is_named_no_id_and_recall_finds_it_by_that_name(state_dir: Path) -> None:
    """A model server that sends `"id": ""`: the marker and the placeholders name the result `no-id`."""
    script = [AIMessage("", id="ai-1", tool_calls=[{"name": "fetch", "args": {"what": "large"}, "id": ""}])]
    script.append(
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "no-id", "limit": 50_000}, "id": "r1"}])
    )
    agent = _agent(state_dir, [*script, AIMessage("done")])
    messages = agent.invoke({"messages": [("user", "fetch it")]}, {"configurable": {"thread_id": "empty"}})["messages"]
    agent.checkpointer.conn.close()
    large = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "")
    assert f'recall(call_id="no-id#{call_key("ai-1", 0)}")' in str(large.content)  # keyed by its own call
    recalled = next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert recalled.content == LARGE  # before: "this thread has no tool result with this call id ('no-id')"
    assert shown_id("") == "no-id"  # a cleared result's placeholder names it so too


def test_a_call_whose_id_is_no_id_and_an_empty_call_id_are_each_recalled_by_its_key(state_dir: Path) -> None:
    calls = [
        {"name": "fetch", "args": {"what": "large"}, "id": ""},
        {"name": "fetch", "args": {"what": "small"}, "id": "no-id"},
    ]
    script = [AIMessage("", id="ai-1", tool_calls=calls), AIMessage("done")]
    agent = _agent(state_dir, script)
    messages = agent.invoke({"messages": [("user", "fetch")]}, {"configurable": {"thread_id": "no-id"}})["messages"]
    agent.checkpointer.conn.close()
    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    answer = recall.invoke({"call_id": "no-id", "state": state})
    empty, literal = f"no-id#{call_key('ai-1', 0)}", f"no-id#{call_key('ai-1', 1)}"
    assert f'recall(call_id="{empty}")' in answer
    assert f'recall(call_id="{literal}")' in answer
    assert recall.invoke({"call_id": empty, "state": state, "limit": 50_000}) == LARGE
    assert recall.invoke({"call_id": literal, "state": state}) == SMALL


def test_an_empty_thread_id_is_refused_at_the_first_call_saying_what_to_pass(state_dir: Path) -> None:
    RAN.clear()
    script = [AIMessage("", tool_calls=[{"name": "fetch", "args": {"what": "large"}, "id": "c0"}]), AIMessage("ok")]
    agent = _agent(state_dir, script)
    with pytest.raises(CtxwardenError) as raised:
        agent.invoke({"messages": [("user", "fetch")]}, {"configurable": {"thread_id": ""}})
    agent.checkpointer.conn.close()
    message = str(raised.value)
    assert "thread_id ''" in message
    assert '{"configurable": {"thread_id": ' in message  # says what to pass
    assert isinstance(raised.value, ValueError)
    assert RAN == []  # refused before any tool ran: nothing was done that could be lost


async def test_an_empty_thread_id_is_refused_on_the_async_path_too(state_dir: Path) -> None:
    RAN.clear()
    script = [AIMessage("", tool_calls=[{"name": "fetch", "args": {"what": "large"}, "id": "c0"}]), AIMessage("ok")]
    agent = _agent(state_dir, script)
    with pytest.raises(CtxwardenError, match="thread_id ''"):
        await agent.ainvoke({"messages": [("user", "fetch")]}, {"configurable": {"thread_id": ""}})
    agent.checkpointer.conn.close()
    assert RAN == []
