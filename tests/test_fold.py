"""Folding at 85% after clearing: turn-aligned, offloaded first, cumulative, structured, never fatal."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import (
    ContextPolicy,
    ContextStillTooLargeError,
    ThreadIsolatedBackend,
    context_middleware,
    create_context_agent,
)
from ctxwarden.fold import DETERMINISTIC, FOLD_STATE_KEY, SECTIONS, Folds, deterministic_summary, is_summary
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.report import context_report
from ctxwarden.thread import compact
from ctxwarden.trace import TraceStore
from views import Views

WINDOW = 4_000
# ~400 tokens of assistant text per step; clear_call_text=False keeps it in view, so the window fills and folds
THOUGHT = "Let me think about the parser carefully. " * 40
POLICY = ContextPolicy(clear_call_text=False)


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 150


class Summarizer(ScriptedChatModel):
    """A summarizer model that answers every call with the same summary and counts the calls."""

    _calls: list[str] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self._calls.append(str(messages[-1].content))
        from langchain_core.outputs import ChatGeneration, ChatResult

        text = "\n".join(f"## {name}\n- from the model" for name in SECTIONS)
        reply = AIMessage(text, usage_metadata={"input_tokens": 900, "output_tokens": 80, "total_tokens": 980})
        return ChatResult(generations=[ChatGeneration(message=reply)])


class BrokenSummarizer(ScriptedChatModel):
    _calls: int = PrivateAttr(default=0)

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        self._calls += 1
        raise TimeoutError("the summarizer timed out")


def _steps(n: int, start: int = 0) -> list[AIMessage]:
    return [
        AIMessage(THOUGHT, tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}])
        for i in range(start, start + n)
    ]


def _agent(tmp_path: Path, replies: list, *, summarizer: Any = DETERMINISTIC, policy: ContextPolicy = POLICY):
    views = Views()
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    middleware = context_middleware(
        policy=policy, trace=tmp_path / "trace.sqlite", backend=backend, summarizer=summarizer
    )
    model = scripted_model(replies, window=WINDOW, name="agent-model")
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=InMemorySaver())
    return agent, views


def _compactions(tmp_path: Path) -> list:
    return TraceStore(tmp_path / "trace.sqlite").events(kind="context_compaction")


def test_a_fold_keeps_every_call_under_the_window_and_writes_the_history_first(tmp_path: Path) -> None:
    agent, views = _agent(tmp_path, [*_steps(14), AIMessage("done")])
    config = {"configurable": {"thread_id": "fold"}}
    out = agent.invoke({"messages": [HumanMessage("Fix the parser. Never touch tests/legacy.")]}, config)

    stamps = [m.response_metadata["ctxwarden"] for m in out["messages"] if isinstance(m, AIMessage)]
    assert max(s["input_tokens"] for s in stamps) <= WINDOW
    folds = [e for e in _compactions(tmp_path) if e.payload["ok"]]
    assert folds
    first = folds[0].payload
    assert first["tokens_before"] > 0.85 * WINDOW
    assert first["tokens_after"] < first["tokens_before"]
    assert first["path"] == "/conversation_history/fold.md"
    assert first["summarizer"] == DETERMINISTIC
    assert first["fallback"] is False

    history = (tmp_path / "conversation_history" / "fold.md").read_text(encoding="utf-8")
    assert history.count("\n## fold 1\n") == 1
    assert "page 0: data data" in history  # the folded turns, in full
    assert "Never touch tests/legacy." not in history  # the task was not folded: it stays in view

    # the view: the task as the user wrote it, one summary naming the history file, then whole steps (no orphaned
    # tool result)
    view = views.views[-1]
    assert view[0].content == "Fix the parser. Never touch tests/legacy."
    assert is_summary(view[1])
    assert "/conversation_history/fold.md" in view[1].content
    assert not isinstance(view[2], ToolMessage)
    shown_calls = {c["id"] for m in view if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in shown_calls for m in view if isinstance(m, ToolMessage))
    # the checkpointed thread keeps every raw message; the fold is private state, by message id
    assert len(out["messages"]) == 1 + 2 * 14 + 1
    state = agent.get_state(config).values[FOLD_STATE_KEY]
    upto = state["records"][-1]["upto"]
    assert upto in {m.id for m in out["messages"]}


def test_the_summary_has_the_fixed_sections_and_keeps_user_words_verbatim(tmp_path: Path) -> None:
    agent, views = _agent(tmp_path, [*_steps(14), AIMessage("done")])
    agent.invoke(
        {"messages": [HumanMessage("Fix the parser. Never touch tests/legacy.")]}, {"configurable": {"thread_id": "s"}}
    )
    view = next(v for v in views.views if any(is_summary(m) for m in v))
    summary = view[1].content
    for name in SECTIONS:
        assert f"## {name}" in summary
    assert view[0].content == "Fix the parser. Never touch tests/legacy."  # the user's words, verbatim, above it
    assert "Never touch tests/legacy." not in summary  # and not billed twice
    assert "fetch(" in summary  # tool calls with their outcome


def test_folds_are_cumulative_with_a_summarizer_model(tmp_path: Path) -> None:
    summarizer = Summarizer(messages=iter([]), profile={"max_input_tokens": 100_000}, name="summarizer")
    agent, _views = _agent(tmp_path, [*_steps(30), AIMessage("done")], summarizer=summarizer)
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "cumulative"}})
    folds = [e for e in _compactions(tmp_path) if e.payload["ok"]]
    assert len(folds) >= 2
    # each fold applied a summary the model wrote ahead; one more may have been started for a fold the run never
    # reached (the preparation after the last fold), and nothing else was asked
    prepared = [
        e for e in TraceStore(tmp_path / "trace.sqlite").events(kind="fold_prepare") if e.payload.get("started")
    ]
    pending = [e for e in prepared if e.id > folds[-1].id]
    assert len(pending) <= 1
    for worker in threading.enumerate():  # a preparation started at the end of the run may not have asked yet
        if worker.name == "ctxwarden-fold-prepare":
            worker.join(timeout=10)
    assert len(summarizer._calls) == len(folds) + len(pending)
    # one flat transcript inside a single user message; the second gets the first summary
    assert "<conversation>" in summarizer._calls[0]
    assert "[ASSISTANT]" in summarizer._calls[0]
    assert "(none: this is the first fold)" in summarizer._calls[0]
    assert "- from the model" in summarizer._calls[1].split("<conversation>")[0]
    usage = TraceStore(tmp_path / "trace.sqlite").events(kind="model_usage")
    spent = [e for e in usage if e.payload["role"] == "summarizer"]
    assert len(spent) == len(folds)
    assert spent[0].payload["input_tokens"] == 900
    assert spent[0].model == "summarizer"
    # the history gets one section per fold
    history = (tmp_path / "conversation_history" / "cumulative.md").read_text(encoding="utf-8")
    assert [f"\n## fold {n}\n" in history for n in (1, 2)] == [True, True]


def test_a_failing_summarizer_falls_back_and_the_run_goes_on(tmp_path: Path) -> None:
    broken = BrokenSummarizer(messages=iter([]), profile={"max_input_tokens": 100_000})
    at_fold = POLICY.replace(fold_prepare_ahead=0)  # no preparation still in flight when the calls are counted
    agent, _views = _agent(tmp_path, [*_steps(14), AIMessage("done")], summarizer=broken, policy=at_fold)
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "broken"}})
    assert out["messages"][-1].content == "done"
    fold = next(e for e in _compactions(tmp_path) if e.payload["ok"]).payload
    assert fold["fallback"] is True
    assert fold["summarizer"] == DETERMINISTIC
    assert "TimeoutError: the summarizer timed out" in fold["error"]
    assert broken._calls >= 2  # tried, retried once, then fell back
    assert broken._calls % 2 == 0


async def test_async_runs_fold_the_same_way(tmp_path: Path) -> None:
    sync_agent, sync_views = _agent(tmp_path / "s", [*_steps(14), AIMessage("done")])
    sync_agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    async_agent, async_views = _agent(tmp_path / "a", [*_steps(14), AIMessage("done")])
    await async_agent.ainvoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    assert [[m.content for m in v] for v in async_views.views] == [[m.content for m in v] for v in sync_views.views]


class Verbose(Summarizer):
    """A summary as long as what it replaces."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        self._calls.append("x")
        return ChatResult(generations=[ChatGeneration(message=AIMessage("## Session intent\n- " + "long " * 2_400))])


def test_a_fold_made_on_the_call_that_saves_little_holds_off_until_the_thread_grows(tmp_path: Path) -> None:
    verbose = Verbose(messages=iter([]), profile={"max_input_tokens": 100_000})
    policy = POLICY.replace(fold_prepare_ahead=0)  # the summary is written when the fold fires, then applied
    agent, _views = _agent(tmp_path, [*_steps(12), AIMessage("done")], summarizer=verbose, policy=policy)
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "thrash"}})
    folds = [e.payload for e in _compactions(tmp_path) if e.payload["ok"]]
    assert folds[0]["hold_until"] is not None  # the summary was as long as what it replaced
    assert folds[0]["freed"] < 0.10 * folds[0]["tokens_before"]
    # every later fold happened only once the thread had grown past the hold (or would not fit otherwise)
    for before, after in itertools.pairwise(folds):
        if before["hold_until"] is not None:
            assert after["tokens_before"] >= before["hold_until"] or after["tokens_before"] > WINDOW
    assert len(folds) <= 3


def test_a_prepared_fold_that_would_save_little_is_not_made(tmp_path: Path) -> None:
    verbose = Verbose(messages=iter([]), profile={"max_input_tokens": 100_000})
    policy = POLICY.replace(summarize_at=0.7)  # room to grow under the window when the fold is due
    agent, _views = _agent(tmp_path, [*_steps(12), AIMessage("done")], summarizer=verbose, policy=policy)
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "held"}})
    held = [e.payload for e in TraceStore(tmp_path / "trace.sqlite").events(kind="fold_held")]
    assert held
    assert all(h["freed"] < 0.10 * h["tokens_before"] for h in held)
    # no fold that frees too little is applied while the thread can still grow under the window; the held ones wait
    folds = [e.payload for e in _compactions(tmp_path) if e.payload["ok"]]
    for fold in folds:
        assert fold["freed"] >= 0.10 * fold["tokens_before"] or fold["tokens_before"] + 0.10 * WINDOW > WINDOW
    for hold, fold in itertools.product(held, folds):
        if fold["tokens_before"] > hold["tokens_before"]:
            assert fold["tokens_before"] >= hold["hold_until"] or fold["tokens_before"] > WINDOW
    stamps = [m.response_metadata["ctxwarden"] for m in out["messages"] if isinstance(m, AIMessage)]
    assert max(s["input_tokens"] for s in stamps) <= WINDOW  # holding never let a call pass the window


def test_the_deterministic_summary_extends_the_previous_one() -> None:
    first = deterministic_summary(None, [HumanMessage("Use Python 3.11 only."), *_steps(1)])
    second = deterministic_summary(first, [AIMessage("Switching to the tokenizer now.")])
    assert '"Use Python 3.11 only."' in second
    assert "Switching to the tokenizer now." in second
    assert second.count("## Session intent") == 1


def test_the_deterministic_summary_quotes_output_lines_whole_and_only_real_errors() -> None:
    source = "\n".join(["class Field:", "    default_error_messages = {", "        'invalid': 'bad',", "    }"])
    failing = "\n".join(["Traceback (most recent call last):", '  File "t.py", line 3', "KeyError: 'product'"])
    long_first = "x" * 500
    turns = [
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "cat fields.py"}, "id": "c1"}]),
        ToolMessage(source, tool_call_id="c1"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "python t.py"}, "id": "c2"}]),
        ToolMessage(failing, tool_call_id="c2"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "cat big.log"}, "id": "c3"}]),
        ToolMessage(long_first, tool_call_id="c3"),
    ]
    summary = deterministic_summary(None, turns)
    errors = summary.split("## Errors seen")[1].split("## ")[0]
    # the failing command is named and its error line quoted whole, on its own line; a source line that merely
    # mentions errors is not an error
    assert "- bash(python t.py) failed:\n  KeyError: 'product'\n" in errors
    assert "default_error_messages" not in errors
    artifacts = summary.split("## Artifacts")[1].split("## ")[0]
    assert "- bash -> 75 chars, input and first line:\n  cat fields.py\n  class Field:\n" in artifacts
    assert "- bash -> 500 chars, input:\n  cat big.log\n" in artifacts
    assert long_first not in summary
    assert "…" not in artifacts
    # the next summary extends this one with the quoted lines still under their entries
    extended = deterministic_summary(summary, [AIMessage("Fixing the KeyError now.")])
    assert "- bash(python t.py) failed:\n  KeyError: 'product'\n" in extended
    assert extended.count("KeyError: 'product'") == 1


def test_the_deterministic_summary_quotes_what_the_agent_said_in_whole_lines_once() -> None:
    long = "Looking at this more closely, " + "the lookup table is rebuilt on every call and " * 8
    turns = [
        AIMessage(
            "I will read the tokenizer first.",
            tool_calls=[{"name": "bash", "args": {"command": "cat tok.py"}, "id": "c1"}],
        ),
        ToolMessage("def tokenize(text):", tool_call_id="c1"),
        AIMessage(
            f"{long}\nThe cache key is `_lookup_cache_v2`.",
            tool_calls=[{"name": "bash", "args": {"command": "grep -n cache tok.py"}, "id": "c2"}],
        ),
        ToolMessage("41:    _lookup_cache_v2 = {}", tool_call_id="c2"),
        AIMessage(
            "Next I patch line 41 of tok.py.",
            tool_calls=[{"name": "bash", "args": {"command": "sed -n '41,60p' tok.py"}, "id": "c3"}],
        ),
        ToolMessage("    _lookup_cache_v2 = {}", tool_call_id="c3"),
    ]
    summary = deterministic_summary(None, turns)
    section = {part.split("\n", 1)[0]: part for part in summary.split("## ")[1:]}
    # each of the agent's lines short enough to quote stands whole on its own line; a longer one is left out of them
    assert "said:\n  I will read the tokenizer first.\n" in section["Key decisions"]
    assert "said:\n  The cache key is `_lookup_cache_v2`.\n" in section["Key decisions"]
    assert long not in summary
    # the last reply is the next step, said once; the current state is the last call with what came back
    assert section["Next steps"] == "Next steps\n- said last:\n  Next I patch line 41 of tok.py."
    assert summary.count("Next I patch line 41 of tok.py.") == 1
    assert "- last call: bash(sed -n '41,60p' tok.py) -> 25 chars\n" in summary
    assert "- bash -> 25 chars, input and first line:\n  sed -n '41,60p' tok.py\n  _lookup_cache_v2 = {}\n" in summary
    # folded again, the step taken is among the decisions and the new last reply is the next step
    extended = deterministic_summary(summary, [AIMessage("Running the tests now.")])
    later = {part.split("\n", 1)[0]: part for part in extended.split("## ")[1:]}
    assert "said:\n  Next I patch line 41 of tok.py.\n" in later["Key decisions"]
    assert later["Next steps"] == "Next steps\n- said last:\n  Running the tests now."


class Overflowing(ScriptedChatModel):
    """A provider that refuses requests over `limit` tokens (counted roughly) with a context-overflow error."""

    limit: int = 3_000
    states_limit: bool = True
    """Whether the refusal names the limit (Anthropic's does; OpenAI's "exceeds the context window" does not)."""
    _sizes: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        size = sum(len(str(m.content)) for m in messages) // 4
        self._sizes.append(size)
        if size > self.limit and self.states_limit:
            raise ContextOverflowError(f"prompt is too long: {size} tokens > {self.limit} maximum")
        if size > self.limit:
            raise ContextOverflowError("Your input exceeds the context window of this model.")
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_provider_overflow_clears_and_folds_once_then_retries(tmp_path: Path) -> None:
    model = Overflowing(
        messages=iter([*_steps(8), AIMessage("done")]),
        profile={"max_input_tokens": 100_000},
        limit=2_500,
        states_limit=False,
    )
    backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    middleware = context_middleware(trace=tmp_path / "trace.sqlite", backend=backend, summarizer=DETERMINISTIC)
    agent = create_agent(model, [fetch], middleware=middleware, checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "overflow"}})
    assert out["messages"][-1].content == "done"
    refused = [s for s in model._sizes if s > 2_500]
    assert refused  # the window claimed 100k, the provider accepted far less
    events = TraceStore(tmp_path / "trace.sqlite").events()
    forced = [e for e in events if e.kind in ("context_clear", "context_compaction") and e.payload.get("forced")]
    assert forced  # the retry cleared (and folded, where a fold frees room) with force
    assert all(e.payload["freed"] > 0 for e in forced if e.kind == "context_compaction")
    held = [e for e in events if e.kind == "fold_held"]
    assert all(e.payload["freed"] <= 0 for e in held)  # a fold that would have grown the view was not made
    overflow = TraceStore(tmp_path / "trace.sqlite").events(kind="context_overflow")
    assert {e.payload["stage"] for e in overflow} == {"provider"}


def test_an_overflow_that_survives_the_retry_says_what_was_tried(tmp_path: Path) -> None:
    model = Overflowing(
        messages=iter([AIMessage("never")]), profile={"max_input_tokens": 100_000}, limit=10, states_limit=False
    )
    agent = create_agent(model, [fetch], middleware=context_middleware(summarizer=DETERMINISTIC))
    with pytest.raises(ContextStillTooLargeError) as caught:
        agent.invoke({"messages": [HumanMessage("a question " * 200)]})
    message = str(caught.value)
    assert "refused the call as too long twice" in message
    assert "retried once" in message
    assert "Fix:" in message


def test_switching_to_a_smaller_window_folds_before_the_call(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "switch"}}
    big = create_context_agent(
        scripted_model([*_steps(16), AIMessage("big done")], window=200_000, name="big"),
        [fetch],
        state_dir=tmp_path,
        summarizer=DETERMINISTIC,
        policy=POLICY,
    )
    big.invoke({"messages": [HumanMessage("go")]}, config)
    big.checkpointer.conn.close()
    small = create_context_agent(
        scripted_model(["small done"], window=8_000, name="small"),
        [fetch],
        state_dir=tmp_path,
        summarizer=DETERMINISTIC,
        policy=POLICY,
    )
    out = small.invoke({"messages": [HumanMessage("continue")]}, config)
    small.checkpointer.conn.close()
    last = out["messages"][-1].response_metadata["ctxwarden"]
    assert last["model"] == "small"
    assert last["input_tokens"] <= 8_000
    assert "context_compaction" in last["events"]  # folded before the call: clearing alone was not enough


def test_compact_on_demand_with_focus_instructions(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "compact"}}
    agent = create_context_agent(
        scripted_model([*_steps(4), AIMessage("ok")], window=200_000), [fetch], state_dir=tmp_path
    )
    first = agent.invoke({"messages": [HumanMessage("go")]}, config)
    agent.checkpointer.conn.close()
    before = first["messages"][-1].response_metadata["ctxwarden"]["message_tokens"]

    summarizer = Summarizer(messages=iter([]), profile={"max_input_tokens": 100_000}, name="summarizer")
    record = compact(tmp_path, config, "keep the parser details", summarizer=summarizer)
    assert record is not None
    assert record.number == 1
    assert "keep the parser details" in summarizer._calls[0]
    report = context_report(tmp_path, config)
    assert report.categories["summary"] > 0
    assert report.lifecycle["context_compaction"]["count"] == 1
    assert (tmp_path / "conversation_history" / "compact.md").is_file()

    # the agent carries on from the fold
    agent = create_context_agent(scripted_model(["next"], window=200_000), [fetch], state_dir=tmp_path)
    out = agent.invoke({"messages": [HumanMessage("and now?")]}, config)
    values = agent.get_state(config).values
    agent.checkpointer.conn.close()
    assert out["messages"][-1].content == "next"
    assert out["messages"][-1].response_metadata["ctxwarden"]["message_tokens"] < before
    assert Folds.from_state(values).last == record


def test_the_compact_conversation_tool_folds_at_the_next_call(tmp_path: Path) -> None:
    replies = [
        *_steps(3),
        AIMessage("", tool_calls=[{"name": "compact_conversation", "args": {"focus": "the failing test"}, "id": "cc"}]),
        AIMessage("after compaction"),
    ]
    agent, views = _agent(tmp_path, replies, policy=ContextPolicy(window=200_000))
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "tool"}})
    assert views.views[-1][0].content == "go"
    assert is_summary(views.views[-1][1])
    fold = next(e for e in _compactions(tmp_path) if e.payload["ok"]).payload
    assert fold["instructions"] == "the failing test"
    assert fold["forced"] is True


def test_history_files_are_per_thread_and_namespace_and_a_retry_writes_nothing_twice(tmp_path: Path) -> None:
    from ctxwarden.fold.history import append_section, history_path

    assert history_path("t1", "") == "/conversation_history/t1.md"
    assert (
        history_path("t1", "tools:abc")
        == "/conversation_history/t1/tools_abc-" + history_path("t1", "tools:abc").rsplit("-", 1)[1]
    )
    assert history_path("t1", "tools:abc") != history_path("t1", "")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    section = "\n\n## fold 1\n\nthe folded turns\n"
    assert append_section(backend, "/conversation_history/t1.md", 1, section) == ("/conversation_history/t1.md", None)
    assert append_section(backend, "/conversation_history/t1.md", 1, section) == ("/conversation_history/t1.md", None)
    text = (tmp_path / "conversation_history" / "t1.md").read_text(encoding="utf-8")
    assert text.count("## fold 1") == 1


class RefusingBackend(FilesystemBackend):
    def upload_files(self, files: list) -> list:
        raise PermissionError("read-only file system")


def test_a_history_that_cannot_be_written_keeps_the_turns_in_view(tmp_path: Path) -> None:
    views = Views()
    backend = ThreadIsolatedBackend(RefusingBackend(root_dir=tmp_path, virtual_mode=True))
    budget = dataclasses.replace(POLICY, window=WINDOW)  # a budget: calls past it are sent, never forced
    middleware = context_middleware(
        policy=budget, trace=tmp_path / "trace.sqlite", backend=backend, summarizer=DETERMINISTIC
    )
    model = scripted_model([*_steps(12), AIMessage("done")])
    agent = create_agent(model, [fetch], middleware=[*middleware, views], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "ro"}})
    failed = [e.payload for e in _compactions(tmp_path) if not e.payload["ok"]]
    assert failed
    assert "read-only file system" in failed[0]["error"]
    assert not any(is_summary(m) for v in views.views for m in v)  # nothing left the view without a way back
