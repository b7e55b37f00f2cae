"""A placeholder names a long provider call id by its last characters; recall resolves them to the one call."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import TokenMeter, context_middleware
from ctxwarden.clip import make_recall_tool
from ctxwarden.clip.names import shown_id
from ctxwarden.clip.placeholders import args_placeholder, is_cleared, result_placeholder
from ctxwarden.clip.recoverability import check_outputs
from ctxwarden.replay import scripted_model
from views import Views

WINDOW = 10_000
PAGE = "word " * 480  # about 500 tokens: cleared in batches on a 10k window


def provider_id(i: int) -> str:
    """An id as providers make them: a fixed prefix and 24 random-looking characters."""
    return "call_00_" + hashlib.sha256(str(i).encode()).hexdigest()[:24]


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: {PAGE}"


def _run() -> tuple[list[Any], list[list[Any]]]:
    views = Views()
    replies = [
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": provider_id(i)}]) for i in range(16)
    ]
    model = scripted_model([*replies, AIMessage("done")], window=WINDOW)
    agent = create_agent(model, [fetch], middleware=[*context_middleware(), views], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "handles"}}
    agent.invoke({"messages": [HumanMessage("read every page")]}, config)
    return agent.get_state(config).values["messages"], views.views


def test_a_placeholder_shows_the_end_of_a_long_id_and_recall_returns_the_exact_original() -> None:
    thread, views = _run()
    cleared = [m for m in views[-1] if isinstance(m, ToolMessage) and is_cleared(m)]
    assert len(cleared) >= 5
    originals = {m.tool_call_id: m.content for m in thread if isinstance(m, ToolMessage)}
    recall = make_recall_tool(None)
    for message in cleared:
        handle = shown_id(message.tool_call_id)
        assert handle == "…" + message.tool_call_id[-8:]
        pointer = str(message.content).splitlines()[0]  # the size and the way back; the gist's lines follow
        assert re.fullmatch(r'\[cleared, [\d,]+ tokens: recall\(call_id="…[0-9a-f]{8}"\)\]', pointer)
        assert f'recall(call_id="{handle}")' in pointer
        assert message.tool_call_id not in message.content  # the whole id is not repeated
        original = originals[message.tool_call_id]
        assert recall.invoke({"call_id": handle, "state": {"messages": thread}}) == original
        assert recall.invoke({"call_id": handle[1:], "state": {"messages": thread}}) == original  # mark left out
        assert recall.invoke({"call_id": message.tool_call_id, "state": {"messages": thread}}) == original
    # the proof of recoverability follows the handle back to every original
    proof = check_outputs(views[-1], thread, originals, None)
    assert proof.lost == ()
    assert proof.fraction == 1.0


def test_the_handle_costs_fewer_tokens_than_the_id_it_stands_for() -> None:
    meter = TokenMeter()
    long_id = provider_id(3)
    result = ToolMessage("x\n" * 400, tool_call_id=long_id, name="fetch", id="r3")
    short = result_placeholder(result, 400).content
    whole = short.replace(shown_id(long_id), long_id)
    assert meter.counter(str(whole)) - meter.counter(str(short)) >= 10


def test_short_ids_are_shown_whole() -> None:
    for call_id in ("call_7", "toolu_0123456789", "functions.bash:1"):
        assert shown_id(call_id) == call_id


def test_an_end_two_ids_share_gets_the_list_and_the_whole_id_still_works() -> None:
    first, second = "call_aaaaaaaaaaaa_SAME1234", "call_bbbbbbbbbbbb_SAME1234"
    thread = [
        HumanMessage("go", id="h"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": 1}, "id": first}], id="a1"),
        ToolMessage("first page", tool_call_id=first, name="fetch", id="t1"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": 2}, "id": second}], id="a2"),
        ToolMessage("second page", tool_call_id=second, name="fetch", id="t2"),
    ]
    recall = make_recall_tool(None)
    answer = recall.invoke({"call_id": "…SAME1234", "state": {"messages": thread}})
    assert repr(first) in answer
    assert repr(second) in answer
    assert "whole id" in answer
    assert recall.invoke({"call_id": second, "state": {"messages": thread}}) == "second page"
    unknown = recall.invoke({"call_id": "…NOTHERE9", "state": {"messages": thread}})
    assert unknown.startswith("[ctxwarden: this thread has no tool result")


def test_clipped_arguments_name_the_call_by_its_handle_and_recall_returns_them() -> None:
    long_id = provider_id(5)
    script = "cat > fix.py << 'EOF'\n" + "value = compute(1)\n" * 60 + "EOF"
    call = AIMessage("", tool_calls=[{"name": "sh", "args": {"command": script}, "id": long_id}], id="a5")
    clipped = args_placeholder(call, {long_id})
    shown = clipped.tool_calls[0]["args"]["command"]
    assert f'recall(call_id="{shown_id(long_id)}", part="args")' in shown
    recall = make_recall_tool(None)
    answer = recall.invoke({"call_id": shown_id(long_id), "part": "args", "state": {"messages": [call]}})
    assert json.loads(answer) == {"command": script}
