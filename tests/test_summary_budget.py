"""The deterministic summary is as long as the one asked of a model: the words the window allows, in tokens.

It kept twelve lines a section whatever the window. On an 8k window a fold's summary (quoting
log lines, three tokens a word) outweighed what the fold freed, and every call after it was
past the window; the summary a model is asked for there is 480 words.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, ContextPolicy, create_context_agent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.fold import Folds
from ctxwarden.fold.facts import strip_facts
from ctxwarden.fold.summarize import TOKENS_PER_WORD, bounded_summary, deterministic_summary
from ctxwarden.replay import scripted_model


def _session(steps: int) -> list[BaseMessage]:
    """A task, then `steps` commands, each with a dense log line back and a sentence said about it."""
    out: list[BaseMessage] = [HumanMessage("Find why batch processing slows down after midnight.")]
    for i in range(steps):
        command = f"grep -n 'batch_{i}' /var/log/worker_{i % 7}.log"
        call = {"name": "sh", "args": {"command": command}, "id": f"c{i}"}
        out.append(AIMessage(f"Checking worker {i % 7}.", tool_calls=[call]))
        line = f"{i}: 2026-11-27 00:{i % 60:02d}:13 worker_{i % 7} processed batch_{i} in {i * 37 % 997} ms"
        out.append(ToolMessage(line, tool_call_id=f"c{i}"))
    return out


def test_a_small_budget_keeps_fewer_lines_a_section_and_a_large_one_keeps_twelve() -> None:
    counter = TokenMeter().counter
    session = _session(40)
    whole = deterministic_summary(None, session)
    small = bounded_summary(None, session, 250, counter)
    assert counter(small) <= 250 * TOKENS_PER_WORD < counter(whole)  # before: the whole one, whatever the budget
    assert "- … " in small  # what is left out is named (it is in the history file)
    assert all(f"## {name}" in small for name in ("Session intent", "Artifacts", "Current state"))
    assert bounded_summary(None, session, 5_000, counter) == whole


def test_a_fold_on_a_small_window_writes_a_summary_within_the_words_it_allows(tmp_path: Path) -> None:
    session = _session(60)
    outputs = iter(str(m.content) for m in session if isinstance(m, ToolMessage))

    @tool
    def sh(command: str) -> str:
        """Run a shell command."""
        return "\n".join([next(outputs)] * 12)

    model = scripted_model([*(m for m in session if isinstance(m, AIMessage)), AIMessage("done")], window=8_000)
    agent = create_context_agent(model, [sh], state_dir=tmp_path, summarizer=DETERMINISTIC)
    config = {"configurable": {"thread_id": "small"}}
    out = agent.invoke({"messages": [session[0]]}, config)

    assert out["messages"][-1].content == "done"
    record = Folds.from_state(agent.get_state(config).values).last
    assert record is not None
    words = max(150, min(1_000, int(8_000 * ContextPolicy().fold_keep_share * 0.6)))  # what a model is asked for
    assert TokenMeter().counter(strip_facts(record.summary)) <= words * TOKENS_PER_WORD
    agent.checkpointer.conn.close()
