"""The newest `keep_tool_results` results stay verbatim whatever their count: in clearing and in the forecast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.clip.clear import NO_MASK, Boundary, ClearLayer
from ctxwarden.clip.placeholders import is_cleared
from ctxwarden.core.meter import TokenMeter
from ctxwarden.replay import scripted_model
from ctxwarden.report import build_report
from ctxwarden.trace import TraceStore
from views import Views

WINDOW = 6_000
THOUGHT = "Working through the build output line by line before deciding. " * 60  # ~700 tokens, not clearable


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 400


def _two_results_over_clear_at(tmp_path: Path) -> tuple[list, Views]:
    """A thread with 2 tool results whose calls run past `clear_at`, with `keep_tool_results=3`."""
    steps = [AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(2)]
    policy = ContextPolicy(keep_tool_results=3, clear_at=0.5, clear_to=0.3, summarize_at=0.95)
    views = Views()
    agent = create_agent(
        scripted_model([*steps, AIMessage(THOUGHT + " done")], window=WINDOW),
        [fetch],
        middleware=[*context_middleware(policy=policy, trace=tmp_path / "trace.sqlite"), views],
        checkpointer=InMemorySaver(),
        system_prompt=THOUGHT * 2,
    )
    out = agent.invoke({"messages": [HumanMessage(THOUGHT)]}, {"configurable": {"thread_id": "keep"}})
    last = out["messages"][-1].response_metadata["ctxwarden"]
    assert last["input_tokens"] > policy.clear_threshold(WINDOW), "the thread must be over clear_at to prove anything"
    return out["messages"], views


def test_fewer_results_than_the_setting_are_never_cleared(tmp_path: Path) -> None:
    messages, views = _two_results_over_clear_at(tmp_path)
    assert len([m for m in messages if isinstance(m, ToolMessage)]) == 2
    assert not any(is_cleared(m) for view in views.views for m in view)
    cleared = [e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")]
    assert all(not p.get("results") for p in cleared), cleared


def test_the_forecast_keeps_the_newest_results_too(tmp_path: Path) -> None:
    messages, _views = _two_results_over_clear_at(tmp_path)
    policy = ContextPolicy(keep_tool_results=3, clear_at=0.5, clear_to=0.3, summarize_at=0.95)
    report = build_report(messages, policy=policy)
    assert report.used > report.clear_at
    assert report.clearable == 0  # both results are among the newest three
    assert report.next_clear_frees == 0
    kept_two = build_report(messages, policy=ContextPolicy(keep_tool_results=1, clear_at=0.5, clear_to=0.3))
    assert kept_two.clearable > 0  # the forecast does count what is clearable


def test_every_result_of_the_newest_step_stays_however_many_calls_it_made() -> None:
    """A step of parallel calls is read as one: clearing its third result would hide part of what the agent just
    asked for, so all of them stay even past `keep_tool_results`."""
    messages: list[Any] = [HumanMessage("go")]
    for i in range(3):
        messages += [
            AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"old{i}"}]),
            ToolMessage("page " + "data " * 400, tool_call_id=f"old{i}", name="fetch"),
        ]
    parallel = [{"name": "fetch", "args": {"page": 10 + i}, "id": f"new{i}"} for i in range(4)]
    messages += [AIMessage("", tool_calls=parallel)]
    messages += [ToolMessage("page " + "data " * 400, tool_call_id=f"new{i}", name="fetch") for i in range(4)]
    policy = ContextPolicy(keep_tool_results=2)
    layer = ClearLayer(policy, TokenMeter())
    order = [call_id for kind, call_id, _saving in layer._candidates(messages, Boundary(), NO_MASK) if kind == "result"]
    assert order == ["old0", "old1", "old2"]
    report = build_report(messages, policy=policy.replace(window=32_000))
    assert report.out_of_reach["the newest 2 tool results"] == sum(
        TokenMeter().message_tokens(m) for m in messages[-4:]
    )
    assert ClearLayer(ContextPolicy(keep_tool_results=0), TokenMeter())._candidates(messages, Boundary(), NO_MASK)


@tool
def listing(page: int) -> str:
    """List a page of files."""
    return "\n".join(f"src/pkg_{page}/module_{i}.py: def handler_{page}_{i}(request)" for i in range(40))


def test_by_default_a_result_older_than_the_newest_step_leaves_with_its_gist(tmp_path: Path) -> None:
    """The default keeps only the newest step whole: the step before is what the agent has already acted on, and
    its gist keeps its distinctive lines, so holding it whole costs tokens on every call for little it still needs."""
    policy = ContextPolicy(
        clear_at=0.45, clear_to=0.3, summarize_at=0.95, evict_window_share=0.5, clear_min_batch_share=0.05
    )
    steps = [AIMessage(THOUGHT, tool_calls=[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}]) for i in range(2)]
    views = Views()
    agent = create_agent(
        scripted_model([*steps, AIMessage("done")], window=WINDOW),
        [listing],
        middleware=[*context_middleware(policy=policy, trace=tmp_path / "trace.sqlite"), views],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("List both pages.")]}, {"configurable": {"thread_id": "default-keep"}})
    last = {m.tool_call_id: m for m in views.views[-1] if isinstance(m, ToolMessage)}
    assert not is_cleared(last["l1"])
    assert last["l1"].content == listing.invoke({"page": 1})
    assert is_cleared(last["l0"]), "the result before the newest step is cleared by default"
    assert 'recall(call_id="l0")' in last["l0"].content
    kept = last["l0"].content.splitlines()[1:]
    original = listing.invoke({"page": 0}).splitlines()
    assert kept
    assert all(line in original or line.startswith("…") for line in kept)
