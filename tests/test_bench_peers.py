"""The peers replayed in the bench behave as their own sources and docs say, and costs follow the price models."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxwarden.bench.peers import (
    CLEARED,
    MASKED,
    AnthropicClearing,
    CodexCompaction,
    ObservationMasking,
    SummarizingCondenser,
)
from ctxwarden.bench.prices import PRICE_MODELS
from ctxwarden.bench.quality import pareto, recall_markdown
from ctxwarden.bench.strategies import fixed_summarizer
from ctxwarden.replay import scripted_model


def _session(steps: int, size: int = 400) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("fix the parser in src/parser.py")]
    for i in range(steps):
        tool = "read" if i % 2 else "bash"
        messages.append(AIMessage("", tool_calls=[{"name": tool, "args": {"command": f"step {i}"}, "id": f"c{i}"}]))
        messages.append(ToolMessage(f"output {i} " + "line of text " * size, tool_call_id=f"c{i}", name=tool))
    return messages


def _request(messages: list[BaseMessage]) -> ModelRequest:
    return ModelRequest(model=scripted_model([]), messages=messages, system_message=SystemMessage("you fix code"))


def _contents(view: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in view if isinstance(m, ToolMessage)]


def test_anthropic_clearing_keeps_newest_three_and_honours_trigger_and_exclusions() -> None:
    messages = _session(8)
    peer = AnthropicClearing(16_000, fixed_summarizer(), trigger=100_000, keep=3)
    assert peer.view(_request(messages)) == messages  # under the trigger: untouched
    peer = AnthropicClearing(16_000, fixed_summarizer(), trigger=2_000, keep=3, exclude_tools=["read"])
    shown = _contents(peer.view(_request(messages)))
    assert [s == CLEARED for s in shown] == [True, False, True, False, True, False, False, False]


def test_anthropic_clearing_does_nothing_when_it_would_free_less_than_clear_at_least() -> None:
    messages = _session(5)
    peer = AnthropicClearing(16_000, fixed_summarizer(), trigger=2_000, keep=3, clear_at_least=10**6)
    assert peer.view(_request(messages)) == messages
    inputs = AnthropicClearing(16_000, fixed_summarizer(), trigger=2_000, keep=3, clear_tool_inputs=True)
    first = inputs.view(_request(messages))[1]
    assert isinstance(first, AIMessage)
    assert first.tool_calls[0]["args"] == {}


def test_observation_masking_masks_outside_the_attention_window() -> None:
    messages = _session(6, size=5)
    view = ObservationMasking(100_000, fixed_summarizer(), attention_window=4).view(_request(messages))
    assert _contents(view)[:4] == [MASKED] * 4
    assert MASKED not in _contents(view)[4:]


def test_observation_masking_forgets_the_older_half_when_the_call_would_overflow() -> None:
    messages = _session(10)
    peer = ObservationMasking(3_000, fixed_summarizer(), attention_window=100)
    view = peer.view(_request(messages))
    assert view[0] == messages[0]  # the first user message stays
    assert peer.truncations >= 1
    assert peer.tokens(_request(messages), view) <= 3_000


def test_summarizing_condenser_keeps_head_and_tail_and_summarizes_the_rest() -> None:
    summarizer = fixed_summarizer()
    messages = _session(30, size=5)  # 61 events
    peer = SummarizingCondenser(1_000_000, summarizer, keep_first=1, max_size=20)
    view = peer.view(_request(messages))
    assert view[0] == messages[0]
    assert "Session intent" in str(view[1].content)  # the summary
    assert len(view) == 1 + 1 + (20 // 2 - 1 - 1)  # head, summary, tail of max_size // 2 - keep_first - 1 events
    assert view[-1] == messages[-1]
    assert len(summarizer.asked) == 1
    assert summarizer.asked[0].tools == []  # its own prompt: nothing shared with the agent's calls


def test_codex_compaction_keeps_recent_user_messages_then_the_summary() -> None:
    summarizer = fixed_summarizer()
    messages = _session(6)
    peer = CodexCompaction(16_000, summarizer, token_limit=2_000, user_budget=20_000)
    view = peer.view(_request(messages))
    assert view[0] == messages[0]  # the user's request, kept within the budget
    assert isinstance(view[1], HumanMessage)
    assert "Session intent" in str(view[1].content)  # the fixed summarizer's summary
    assert view[2:] == messages[-2:]  # the step the compacting call answers
    assert summarizer.asked[0].tools == []
    peer.view(_request(messages))
    assert len(summarizer.asked) == 1  # no second compaction while under the limit


def test_price_models_and_pareto_front() -> None:
    base, anthropic, quarter = PRICE_MODELS
    assert (base.cost(100, 10), anthropic.cost(100, 10), quarter.cost(100, 10)) == (20.0, 22.5, 35.0)
    assert pareto({"a": (1.0, 0.9), "b": (0.8, 0.9), "c": (0.7, 0.5), "d": (0.9, 0.4)}) == ["b", "c"]


def test_recall_table_shows_cost_under_each_price_model() -> None:
    def result(strategy: str, costs: dict[str, int]) -> dict[str, Any]:
        return {
            "strategy": strategy,
            "window": 16_000,
            "recall": 0.9,
            "long_range_recall": 0.8,
            "references": 10,
            "task_recall": 0.5,
            "task_references": 4,
            "probe_recall": 1.0,
            "probes": 0,
            "folds": 1,
            "overflows": 0,
            "cache_cost": costs["base"],
            "costs": costs,
        }

    table = recall_markdown(
        [
            result("deepagents", {"base": 100, "anthropic": 100, "cached-0.25": 100}),
            result("ctxwarden", {"base": 80, "anthropic": 90, "cached-0.25": 110}),
        ]
    )
    assert "| 0.800× | 0.900× | 1.100× |" in table
    assert "| 0.500 (4) |" in table
