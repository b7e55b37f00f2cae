"""The results of one reply's parallel calls together fit the window.

They are the newest results, which clearing never takes. Each was weighed alone against the eviction threshold (10%
of the window), so twenty parallel calls of 3,000 tokens each, every one under it, made a call of 63,000 tokens at a
32k window: the provider refused it, the forced round could clear nothing, and the run ended with
`ContextStillTooLargeError`. Three parallel calls of eight screenshots each did the same.
"""

from __future__ import annotations

import asyncio
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import create_context_agent
from test_images import SCREEN, Billing, frames


def _output(i: int) -> str:
    return "\n".join(f"line {j} of output {i}: value={j * i}" for j in range(240))  # about 3,000 tokens


@tool
def run(i: int) -> str:
    """Run job `i` and return its log."""
    return _output(i)


def _invoke(agent: Any, how: str, thread: str) -> dict[str, Any]:
    state = {"messages": [HumanMessage("go")]}
    config = {"configurable": {"thread_id": thread}}
    return agent.invoke(state, config) if how == "sync" else asyncio.run(agent.ainvoke(state, config))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_twenty_parallel_results_fit_and_each_stays_whole_in_its_file(tmp_path: Path, how: str) -> None:
    calls = [{"name": "run", "args": {"i": i}, "id": f"r{i}"} for i in range(20)]
    model = Billing(
        messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]), profile={"max_input_tokens": 32_000}
    )
    agent = create_context_agent(model, [run], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, how, f"parallel-{how}")

    assert out["messages"][-1].content == "done"
    assert max(model._billed) <= 16_000 + 4_000  # half the window, and the prompt; before: refused at 63,000
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 20
    for message in results:
        record = message.response_metadata["ctxwarden"]
        original = _output(int(message.tool_call_id.removeprefix("r")))
        assert (tmp_path / record["path"].lstrip("/")).read_text() == original


def test_a_single_result_keeps_the_eviction_threshold(tmp_path: Path) -> None:
    calls = [{"name": "run", "args": {"i": 1}, "id": "r1"}]
    model = Billing(
        messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]), profile={"max_input_tokens": 32_000}
    )
    agent = create_context_agent(model, [run], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, "sync", "one")
    (result,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert result.content == _output(1)  # 3,000 tokens, under 10% of 32k: whole, as before


@pytest.mark.parametrize("how", ["sync", "async"])
def test_three_parallel_calls_of_screenshots_share_the_room(tmp_path: Path, how: str) -> None:
    calls = [{"name": "frames", "args": {"count": 8}, "id": f"f{i}"} for i in range(3)]
    model = Billing(
        messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]), profile={"max_input_tokens": 32_000}
    )
    agent = create_context_agent(model, [frames], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, how, f"frames-{how}")

    assert out["messages"][-1].content == "done"  # before: ContextStillTooLargeError, refused at 33,177 tokens
    for message in (m for m in out["messages"] if isinstance(m, ToolMessage)):
        kept = [b for b in message.content if isinstance(b, dict) and b.get("type") == "image"]
        assert [b["base64"] for b in kept] == [SCREEN] * 3  # a third of half the window: three screenshots each
        assert len(message.response_metadata["ctxwarden"]["media"]) == 5  # the other five in files


@tool
def build(target: str) -> str:
    """Build `target` and return its log."""
    return "\n".join(f"line {j} of the {target} build: value={j}" for j in range(2_000))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_parallel_recall_pages_share_the_room_and_say_where_the_rest_is(tmp_path: Path, how: str) -> None:
    pages = [{"name": "recall", "args": {"call_id": "b1", "page": p}, "id": f"p{p}"} for p in range(1, 9)]
    replies = [
        AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}]),
        AIMessage("", tool_calls=pages),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "b1", "page": 2}, "id": "alone"}]),
        AIMessage("done"),
    ]
    model = Billing(messages=iter(replies), profile={"max_input_tokens": 16_000}, limit=16_000)
    agent = create_context_agent(model, [build], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, how, f"pages-{how}")

    assert out["messages"][-1].content == "done"  # before: eight pages of 8,000 characters, refused at 16,664
    answers = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    notes = [_PART.search(answers[f"p{p}"]) for p in range(1, 9)]
    assert all(notes)
    shown = [tuple(_number(n.group(k)) for k in ("start", "end", "page_start", "page_end")) for n in notes if n]
    assert [int(n.group("page")) for n in notes if n] == list(range(1, 9))
    assert shown[0][2] == 0
    assert all(start == page_start and end < page_end for start, end, page_start, page_end in shown)
    assert all(a[3] == b[2] for a, b in pairwise(shown))  # the pages themselves follow each other, as a lone recall's
    alone = re.search(r"characters ([\d,]+)-([\d,]+) of", answers["alone"])
    assert alone is not None
    assert (_number(alone.group(1)), _number(alone.group(2))) == shown[1][2:]  # page 2 whole, when asked alone


_PART = re.compile(
    r"characters (?P<start>[\d,]+)-(?P<end>[\d,]+) of [\d,]+: the start of page (?P<page>\d+) "
    r"\((?P<page_start>[\d,]+)-(?P<page_end>[\d,]+)\)"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_lone_recall_keeps_its_pages(tmp_path: Path) -> None:
    replies = [
        AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "b1"}, "id": "p1"}]),
        AIMessage("done"),
    ]
    model = Billing(messages=iter(replies), profile={"max_input_tokens": 32_000})
    agent = create_context_agent(model, [build], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, "sync", "lone")
    answer = next(m.content for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "p1")
    assert re.search(r"characters 0-7,\d\d\d of", answer)  # pages of 8,000 characters, as before


def test_parallel_recalls_of_screenshots_bring_what_fits_and_say_so(tmp_path: Path) -> None:
    again = [{"name": "recall", "args": {"call_id": "f1"}, "id": f"again{i}"} for i in range(3)]
    replies = [
        AIMessage("", tool_calls=[{"name": "frames", "args": {"count": 30}, "id": "f1"}]),  # 10 stay in view
        AIMessage("", tool_calls=again),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "f1"}, "id": "alone"}]),
        AIMessage("done"),
    ]
    model = Billing(messages=iter(replies), profile={"max_input_tokens": 32_000})
    agent = create_context_agent(model, [frames], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, "sync", "again")

    assert max(model._billed) <= 32_000  # before: three answers of eleven screenshots, 45,000 tokens
    answers = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    for i in range(3):
        text, *images = answers[f"again{i}"]
        assert images == [{"type": "image", "base64": SCREEN, "mime_type": "image/png"}] * 3
        assert "this result holds 10 images; 3 of them fit beside the other calls of this turn" in text["text"]
    text, *images = answers["alone"]
    assert len(images) == 10
    assert text["text"].endswith("[ctxwarden: this result's 10 images follow.]")
    filed = re.search(r"20 more of this result's images and PDFs are in (\S+)/, one file each", text["text"])
    assert filed is not None  # the other 20, moved to files at arrival, stay named when the result is recalled
    assert filed.group(1).endswith(".media")


def test_parallel_searches_share_the_room(tmp_path: Path) -> None:
    searches = [{"name": "recall", "args": {"query": f"value={d}"}, "id": f"s{d}"} for d in range(1, 9)]
    replies = [
        AIMessage("", tool_calls=[{"name": "build", "args": {"target": "app"}, "id": "b1"}]),
        AIMessage("", tool_calls=searches),
        AIMessage("done"),
    ]
    model = Billing(messages=iter(replies), profile={"max_input_tokens": 16_000}, limit=16_000)
    agent = create_context_agent(model, [build], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = _invoke(agent, "sync", "searches")

    assert out["messages"][-1].content == "done"  # before: eight pages of 2,000 tokens, past the window
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id.startswith("s")]
    assert len(answers) == 8
    assert all("of this page's" in a and "with no other call beside it for all of them" in a for a in answers)
