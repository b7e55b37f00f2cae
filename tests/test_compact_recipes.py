"""A compaction on demand never makes the view larger, and the documented cheaper-summarizer recipe summarizes.

A manual `compact()` of a thread too short to fold profitably used to apply a fold that freed
a negative amount; it now leaves the view as it is and says so (`None`, a `fold_held` event).
A scripted model given as the summarizer (docs/recipes.md) used to refuse every fold request
as if it were the agent's own model, so every fold fell back to the built-in summary.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, Session, TraceStore, create_context_agent
from ctxwarden.fold import FOLD_STATE_KEY
from ctxwarden.replay import scripted_model

SUMMARY = "## Session intent\n- read the pages of the report\n## Next steps\n- keep reading"


def test_a_compaction_that_would_free_nothing_leaves_the_view_and_says_so(tmp_path: Path) -> None:
    with Session(scripted_model(["hi there", "ok"], window=200_000), state_dir=tmp_path) as session:
        session.invoke("hello")
        session.invoke("again")
        before = session.agent.get_state(session.config).values
        assert session.compact() is None
        after = session.agent.get_state(session.config).values
        assert not (after.get(FOLD_STATE_KEY) or {}).get("records")
        assert after["messages"] == before["messages"]
    held = [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.kind == "fold_held"]
    assert len(held) == 1
    assert held[0].payload["freed"] <= 0
    assert not [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.kind == "context_compaction"]


@tool
def fetch(page: int) -> str:
    """Fetch a page of the report."""
    return f"page {page}: " + "figures and notes " * 120


def test_a_scripted_model_given_as_the_summarizer_writes_the_summaries(tmp_path: Path) -> None:
    steps = [AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"p{i}"}]) for i in range(12)]
    model = scripted_model([*steps, "done"], window=4_000, name="large-model")
    summarizer = scripted_model([SUMMARY] * 10, window=32_000, name="small-model")
    agent = create_context_agent(
        model, [fetch], state_dir=tmp_path, summarizer=summarizer, policy=ContextPolicy(fold_prepare_ahead=0)
    )
    agent.invoke({"messages": [("user", "read the report")]}, {"configurable": {"thread_id": "recipe"}})
    folds = [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.kind == "context_compaction"]
    assert folds
    for fold in folds:
        assert fold.payload["summarizer"] == "small-model"
        assert fold.payload["fallback"] is False
        assert fold.payload["error"] is None
    usage = [e for e in TraceStore(tmp_path / "trace.sqlite").events() if e.kind == "model_usage"]
    assert any(e.payload["role"] == "summarizer" for e in usage)
