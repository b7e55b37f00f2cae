"""Two calls of a thread that share a call id (`call_0`, as many local model servers number them) keep their own files.

Replays two turns whose calls both use `call_0`: each large result is evicted to its own
file, byte for byte, and `recall` returns each call's own output.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import PrivateAttr

from ctxwarden import create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import ScriptedChatModel, scripted_model
from views import Views

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


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return "\n".join(f"page {page} line {i}: data /src/mod_{page}_{i}.py" for i in range(40))


class Watching(ScriptedChatModel):
    """Keeps what each of the agent's calls was shown."""

    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("ctxwarden_agent_call"):
            self._seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_the_newest_results_are_shown_whole_when_their_ids_answered_results_cleared_before(state_dir: Path) -> None:
    """A server that numbers calls `call_0`, `call_1` in each reply: once clearing hid an older `call_1`, the result of
    every later `call_1` was shown as a placeholder the moment it arrived, before the model had read it."""
    replies = [
        AIMessage(
            "Reading on. " * 20,
            tool_calls=[
                {"name": "fetch", "args": {"page": 10 * turn + k}, "id": f"call_{k}"}
                for k in range(2 if turn % 2 == 0 else 1)
            ],
        )
        for turn in range(16)
    ]
    model = Watching(messages=iter([*replies, AIMessage("done")]), profile={"max_input_tokens": 16_000})
    agent = create_context_agent(model, [fetch], state_dir=state_dir)
    agent.invoke({"messages": [("user", "Read the pages.")]}, {"configurable": {"thread_id": "numbered"}})
    agent.checkpointer.conn.close()

    cleared_any = False
    for view in model._seen:
        last = max((i for i, m in enumerate(view) if getattr(m, "tool_calls", None)), default=len(view))
        newest = [str(m.content) for m in view[last + 1 :] if isinstance(m, ToolMessage)]
        assert not any(text.startswith("[cleared") for text in newest)  # before: placeholders from the first read
        cleared_any |= any(isinstance(m, ToolMessage) and str(m.content).startswith("[cleared") for m in view)
    assert cleared_any  # older results were cleared all the same


def test_a_server_that_numbers_every_call_call_0_still_gets_clearing_each_placeholder_leading_to_its_own_output(
    state_dir: Path,
) -> None:
    """Clearing hides results by call id. With `call_0` in every reply the newest results shared their id with all
    the older ones, so no batch could take any: clearing never ran and folds did all the work. The stack's lists give
    each reused id the reference its eviction marker writes (`call_0#<key>`), and recall resolves it on the thread."""
    thought = "Let me think about the parser carefully. " * 40
    replies = [
        AIMessage(thought, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": "call_0"}]) for i in range(12)
    ]
    model = Watching(messages=iter([*replies, AIMessage("done")]), profile={"max_input_tokens": 6_000})
    agent = create_context_agent(model, [fetch], state_dir=state_dir, summarizer="deterministic")
    messages = agent.invoke({"messages": [("user", "Read the pages.")]}, {"configurable": {"thread_id": "call_0"}})[
        "messages"
    ]
    agent.checkpointer.conn.close()
    stamps = [m.response_metadata[METADATA_KEY] for m in messages if isinstance(m, AIMessage)]
    assert any("context_clear" in stamp["events"] for stamp in stamps)  # before: never, only folds

    outputs = {fetch.invoke({"page": i}) for i in range(12)}
    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}  # the thread as checkpointed: every call id `call_0`
    checked = 0
    for view in model._seen:
        for message in view:
            text = str(message.content)
            if not (isinstance(message, ToolMessage) and text.startswith("[cleared")):
                continue
            (reference,) = re.findall(r'recall\(call_id="([^"]+)"\)', text.splitlines()[0])
            if reference == "call_0":  # the first call keeps its id: the bare id lists every result to choose from
                assert "share call id 'call_0'" in recall.invoke({"call_id": reference, "state": state})
                continue
            original = recall.invoke({"call_id": reference, "state": state})
            assert original in outputs
            assert original.splitlines()[0] in text  # its own output, whose first line the gist kept
            checked += 1
    assert checked > 5


@tool
def emit(key: str) -> str:
    """Return the output named `key`."""
    if key == "k1":
        raise RuntimeError("backend unavailable")
    return "\n".join(f"OUT<{key}> line {i}: data {i}" for i in range(120))


def test_a_call_left_without_its_result_does_not_give_later_results_to_the_calls_before_them(tmp_path: Path) -> None:
    """Every call `call_0`; one turn's tool raised, so its call has no result (deepagents patches none: another
    result answers `call_0`). Results were given to the calls in one queue, so from then on each was paired with
    the call before its own: the view showed k2's output as the answer to k1's call, and recall of k3's placeholder
    returned k2's output."""
    script: list[AIMessage] = []
    for i in range(6):
        call = {"name": "emit", "args": {"key": f"k{i}"}, "id": "call_0"}
        script += [AIMessage(f"think k{i}", tool_calls=[call]), AIMessage(f"done k{i}")]
    del script[3]  # the turn whose tool raised has no closing reply
    views = Views()
    agent = create_context_agent(
        scripted_model(script, window=8_000), [emit], state_dir=tmp_path, summarizer="deterministic", middleware=[views]
    )
    config = {"configurable": {"thread_id": "dangling"}}
    for turn in range(6):
        try:
            agent.invoke({"messages": [("user", f"turn {turn}")]}, config)
        except RuntimeError:
            assert turn == 1
    thread = agent.get_state(config).values["messages"]
    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    view = views.views[-1]
    paired = 0
    for asked, answer in itertools.pairwise(view):
        if not (isinstance(asked, AIMessage) and asked.tool_calls and isinstance(answer, ToolMessage)):
            continue
        assert answer.tool_call_id == asked.tool_calls[0]["id"]
        key = asked.tool_calls[0]["args"]["key"]
        for reference in re.findall(r'recall\(call_id="([^"]+)"', str(answer.content)):
            if reference != "call_0":  # the bare id lists every result to choose from
                assert recall.invoke({"call_id": reference, "state": {"messages": thread}}).startswith(f"OUT<{key}>")
        paired += 1
    assert paired == 5  # every call but the one left without a result
