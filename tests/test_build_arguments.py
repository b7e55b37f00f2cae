"""Wrong arguments fail when the agent is built, naming the value and the fix; a scripted agent keeps its replies."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import BuildArgumentError, ContextPolicy, Session, context_middleware, create_context_agent
from ctxwarden.replay import scripted_model


def test_a_misspelt_summarizer_fails_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(BuildArgumentError, match=r"summarizer='determinstic'.*Fix: pass summarizer='deterministic'"):
        context_middleware(summarizer="determinstic", trace=False)
    with pytest.raises(ValueError, match="determinstic"):  # also what a generic handler expects
        create_context_agent(scripted_model([], window=8_000), state_dir=tmp_path, summarizer="determinstic")


def test_a_summarizer_that_cannot_be_called_fails_at_build_time() -> None:
    with pytest.raises(BuildArgumentError, match=r"summarizer=42 is a int, which cannot be invoked"):
        context_middleware(summarizer=42, trace=False)


def test_a_dict_policy_fails_with_the_policy_to_write_instead(tmp_path: Path) -> None:
    with pytest.raises(BuildArgumentError, match=r"Fix: pass policy=ContextPolicy\(clear_at=0.5\)"):
        create_context_agent(scripted_model([], window=8_000), state_dir=tmp_path, policy={"clear_at": 0.5})
    with pytest.raises(TypeError, match="not a ContextPolicy"):
        context_middleware(policy="default", trace=False)  # type: ignore[arg-type]
    assert context_middleware(policy=ContextPolicy(clear_at=0.5), trace=False)


def test_a_summarization_middleware_of_the_users_fails_at_build_time(tmp_path: Path) -> None:
    """deepagents keeps one middleware of a name: a `SummarizationMiddleware` after ctxwarden's dropped it whole."""
    theirs = SummarizationMiddleware(scripted_model([], window=8_000), trigger=("tokens", 6_000))
    with pytest.raises(BuildArgumentError, match=r"SummarizationMiddleware.*Fix: leave it out"):
        create_context_agent(scripted_model([], window=8_000), state_dir=tmp_path, middleware=[theirs])


@tool
def read_page(page: int) -> str:
    """Read one page."""
    return f"page {page}: " + "lorem ipsum " * 300


def test_a_scripted_agent_model_does_not_spend_its_replies_on_summaries(tmp_path: Path) -> None:
    """No summarizer given: the fold asks the agent's scripted model, which refuses and says to pass one."""
    steps = [
        AIMessage(f"page {i}", tool_calls=[{"name": "read_page", "args": {"page": i}, "id": f"p{i}"}])
        for i in range(20)
    ]
    model = scripted_model([*steps, "read them all"], window=4_000)
    with Session(model, [read_page], state_dir=tmp_path) as session:
        final = session.invoke("read the book")["messages"]
        folds = session.trace.events(kind="context_compaction")
    assert final[-1].content == "read them all"  # every scripted reply reached the agent
    tool_results = [m for m in final if m.type == "tool"]
    assert len(tool_results) == 20
    assert folds
    assert all(e.payload.get("fallback") for e in folds if e.payload.get("ok"))
    errors = " ".join(str(e.payload.get("error")) for e in folds)
    assert "Fix: pass summarizer='deterministic'" in errors
