"""The newest `keep_tool_results` results stay verbatim whatever their count: in clearing and in the forecast."""

from __future__ import annotations

from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.clip.placeholders import is_cleared
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
