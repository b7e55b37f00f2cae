"""A call whose every result is cleared leaves its text out of the view: the call stays, recall returns the text."""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.clip import CLIP_STATE_KEY, ClearLayer, make_recall_tool
from ctxwarden.clip.boundary import Boundary
from ctxwarden.clip.clear import NO_MASK
from ctxwarden.clip.index import FRAMING_TOKENS, ThreadIndex, result_saving
from ctxwarden.clip.placeholders import args_placeholder, is_cleared
from ctxwarden.clip.search import message_sources
from ctxwarden.clip.shown import last_view
from ctxwarden.replay import scripted_model
from views import Views

WINDOW = 10_000
PAGE = "word " * 480  # about 500 tokens: cleared in batches on a 10k window


def thought(i: int) -> str:
    return f"Page {i} should hold the parser table; reading it next. " * 6


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: {PAGE}"


def _run(policy: ContextPolicy) -> tuple[list[Any], list[list[Any]], dict[str, Any]]:
    """16 fetches with their reasoning: the thread as checkpointed, the view of every call, and the final state."""
    views = Views()
    replies = [
        AIMessage(thought(i), tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(16)
    ]
    model = scripted_model([*replies, AIMessage("done")], window=WINDOW)
    agent = create_agent(
        model, [fetch], middleware=[*context_middleware(policy=policy), views], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "text"}}
    agent.invoke({"messages": [HumanMessage("read every page")]}, config)
    state = agent.get_state(config).values
    return state["messages"], views.views, state


def _dump(message: Any) -> str:
    return json.dumps([message.type, message.content, message.tool_calls], sort_keys=True, default=str)


def test_a_cleared_call_leaves_its_text_keeps_its_call_and_recall_returns_the_text() -> None:
    thread, views, state = _run(ContextPolicy())
    last = views[-1]
    cleared = {m.tool_call_id for m in last if isinstance(m, ToolMessage) and is_cleared(m)}
    assert len(cleared) >= 5
    originals = {m.tool_calls[0]["id"]: m for m in thread if isinstance(m, AIMessage) and m.tool_calls}
    callers = [m for m in last if isinstance(m, AIMessage) and m.tool_calls]
    for shown in callers:
        call_id = shown.tool_calls[0]["id"]
        original = originals[call_id]
        assert shown.tool_calls == original.tool_calls  # what the agent did stays, ids and arguments whole
        assert shown.content == ("" if call_id in cleared else original.content)
    assert all(originals[i].content == thought(int(i[1:])) for i in originals)  # the thread keeps every text

    recall = make_recall_tool(None)
    for call_id in cleared:
        answer = recall.invoke({"call_id": call_id, "part": "text", "state": {"messages": thread}})
        assert answer == originals[call_id].content
    assert last_view(thread, state[CLIP_STATE_KEY], ContextPolicy())[: len(last)] == last


def test_a_call_without_its_text_is_the_same_bytes_on_every_later_call() -> None:
    _thread, views, _state = _run(ContextPolicy())
    shown: dict[str, str] = {}
    for view in views:
        for message in view:
            if isinstance(message, AIMessage) and message.tool_calls and not message.content:
                call_id = message.tool_calls[0]["id"]
                assert shown.setdefault(call_id, _dump(message)) == _dump(message)
    assert len(shown) >= 5


def test_with_clear_call_text_off_every_text_stays() -> None:
    thread, views, _state = _run(ContextPolicy(clear_call_text=False))
    assert any(is_cleared(m) for m in views[-1])
    texts = [m.content for m in views[-1] if isinstance(m, AIMessage) and m.tool_calls]
    assert texts == [m.content for m in thread if isinstance(m, AIMessage) and m.tool_calls][: len(texts)]
    assert all(texts)


def test_a_call_with_a_result_still_in_view_keeps_its_text() -> None:
    calls = [{"name": "fetch", "args": {"page": i}, "id": f"p{i}"} for i in range(2)]
    messages = [
        HumanMessage("read"),
        AIMessage("Both pages, at once.", tool_calls=calls),
        ToolMessage(f"page 0: {PAGE}", tool_call_id="p0", name="fetch"),
        ToolMessage(f"page 1: {PAGE}", tool_call_id="p1", name="fetch"),
    ]
    layer = ClearLayer(ContextPolicy(), TokenMeter())
    one = layer.view(messages, Boundary(results=("p0",)), NO_MASK)
    both = layer.view(messages, Boundary(results=("p0", "p1")), NO_MASK)
    assert one[1].content == "Both pages, at once."
    assert both[1].content == ""
    assert both[1].tool_calls == messages[1].tool_calls


def test_a_provider_s_content_blocks_keep_everything_but_the_text() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "fetch", "input": {"page": 1}}
    thinking = {"type": "thinking", "thinking": "page 1 first", "signature": "sig"}
    message = AIMessage(
        [thinking, {"type": "text", "text": "Reading page 1."}, use],
        tool_calls=[{"name": "fetch", "args": {"page": 1}, "id": "t1"}],
    )
    shown = args_placeholder(message, set(), keep_text=False)
    assert shown.content == [thinking, use]
    assert shown.tool_calls == message.tool_calls


def test_a_batch_counts_the_text_that_leaves_with_a_result() -> None:
    """Clearing weighs a result with its call's text, which leaves with it; a call of several results keeps it."""
    meter, policy = TokenMeter(), ContextPolicy()
    alone = AIMessage(thought(1), tool_calls=[{"name": "fetch", "args": {"page": 1}, "id": "a"}])
    shared = AIMessage(
        thought(2),
        tool_calls=[{"name": "fetch", "args": {"page": p}, "id": i} for p, i in ((2, "b"), (3, "c"))],
    )
    results = [ToolMessage(f"page: {PAGE}", tool_call_id=i, name="fetch") for i in "abc"]
    index = ThreadIndex(policy, meter).sync([HumanMessage("go"), alone, results[0], shared, *results[1:]])
    bare = result_saving(meter.message_tokens(results[0]), policy)
    text = meter.message_tokens(alone) - sum(meter.call_args_tokens(alone).values()) - FRAMING_TOKENS
    assert text > 50
    assert [c.saving for c in index.results] == [bare + text, bare, bare]
    off = ThreadIndex(ContextPolicy(clear_call_text=False), meter).sync([HumanMessage("go"), alone, results[0]])
    assert [c.saving for c in off.results] == [bare]


def test_a_result_smaller_than_its_placeholder_stays_whole_while_its_call_loses_its_text() -> None:
    """A short error is cheaper than any pointer to it: clearing it takes only the reasoning around it."""
    error = "bash: -c: line 2: syntax error: unexpected end of file"
    messages = [
        HumanMessage("fix it"),
        AIMessage(thought(1), tool_calls=[{"name": "bash", "args": {"command": "sed -i '750i x"}, "id": "s"}]),
        ToolMessage(error, tool_call_id="s", name="bash"),
    ]
    meter, policy = TokenMeter(), ContextPolicy()
    (candidate,) = ThreadIndex(policy, meter).sync(messages).results
    text = meter.message_tokens(messages[1]) - meter.call_args_tokens(messages[1])["s"] - FRAMING_TOKENS
    assert candidate.saving == text
    shown = ClearLayer(policy, meter).view(messages, Boundary(results=("s",)), NO_MASK)
    assert shown[2] is messages[2]
    assert shown[1].content == ""
    assert shown[1].tool_calls == messages[1].tool_calls


def test_a_search_marks_a_cleared_call_s_text_as_cleared() -> None:
    thread, views, _state = _run(ContextPolicy())
    sources = message_sources(thread, views[-1], lambda _paths: {})
    texts = {s.text: s.status for s in sources if s.what == "assistant"}
    assert texts[thought(0)] == "cleared"  # out of the view, with its result
    assert texts[thought(15)] == "in view"  # the newest call keeps its text


def test_a_provider_s_blocks_are_weighed_by_their_text_not_by_the_arguments_they_repeat() -> None:
    """Anthropic-style content repeats a call's arguments in its tool-use block: only the text leaves with the result,
    so only the text is counted as freed."""
    meter, policy = TokenMeter(), ContextPolicy()
    said = "Reading the parser table on page 1 next. " * 8
    use = {"type": "tool_use", "id": "t1", "name": "fetch", "input": {"page": 1, "note": "word " * 300}}
    caller = AIMessage(
        [{"type": "text", "text": said}, use], tool_calls=[{"name": "fetch", "args": use["input"], "id": "t1"}]
    )
    result = ToolMessage(f"page: {PAGE}", tool_call_id="t1", name="fetch")
    (candidate,) = ThreadIndex(policy, meter).sync([HumanMessage("go"), caller, result]).results
    assert candidate.saving == result_saving(meter.message_tokens(result), policy) + len(said) // 4
