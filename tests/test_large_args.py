"""A call whose own arguments are too large for the window: the model wrote a big file in one tool call.

The arguments are the model's own output, so they enter the thread whole, and the newest
calls stay whole in the view. A 200 KB file written at a 32k window made the next call three
times the window: the provider refused it, the forced retry kept the newest call whole
again, and the run ended with `ContextStillTooLargeError`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import create_context_agent
from ctxwarden.replay import ScriptedChatModel

BODY = "".join(f"row {i}: value_{i} = compute({i}, scale=0.5)\n" for i in range(5_000))  # ~200 KB, ~60k tokens


@tool
def write_file(file_path: str, content: str) -> str:
    """Write `content` to `file_path`."""
    return f"wrote {len(content):,} characters to {file_path}"


class Refusing(ScriptedChatModel):
    """A provider that refuses a request over `limit` tokens (text and tool-call arguments, counted roughly)."""

    limit: int = 32_000
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _sizes: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        size = sum(len(str(m.content)) + len(str(getattr(m, "tool_calls", None) or "")) for m in messages) // 4
        self._sizes.append(size)
        self._seen.append(list(messages))
        if size > self.limit:
            raise ContextOverflowError(f"prompt is too long: {size} tokens > {self.limit} maximum")
        return super()._generate(messages, stop, run_manager, **kwargs)


def _model(after: list[AIMessage]) -> Refusing:
    write = AIMessage(
        "Writing the table.",
        tool_calls=[{"name": "write_file", "args": {"file_path": "/data/table.txt", "content": BODY}, "id": "w1"}],
    )
    return Refusing(messages=iter([write, *after]), profile={"max_input_tokens": 32_000})


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_file_larger_than_the_window_written_in_one_call_leaves_the_run_going(tmp_path: Path, run: str) -> None:
    args = {"call_id": "w1", "part": "args"}  # as JSON: a line with the path, then the whole file on one line
    recall = AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": "r1"}])
    model = _model([recall, AIMessage("done")])
    agent = create_context_agent(model, [write_file], state_dir=tmp_path, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "big-write"}}
    given = {"messages": [("user", "Write the table to /data/table.txt.")]}
    out = agent.invoke(given, config) if run == "sync" else asyncio.run(agent.ainvoke(given, config))

    assert out["messages"][-1].content == "done"
    assert max(model._sizes) <= model.limit  # no call the provider refused, none retried
    # the call after the write shows the arguments clipped, with the way back
    after = model._seen[1]
    (shown,) = [m for m in after if isinstance(m, AIMessage) and m.tool_calls]
    content = shown.tool_calls[0]["args"]["content"]
    assert content.startswith("[clipped ")
    assert 'recall(call_id="w1", part="args")' in content
    assert shown.tool_calls[0]["args"]["file_path"] == "/data/table.txt"
    # the thread keeps them whole, and recall returns them
    (written,) = [
        m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["id"] == "w1"
    ]
    assert written.tool_calls[0]["args"]["content"] == BODY
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1"]
    first_page = str(answer.content)  # the path line and the file's start, not the path line alone
    assert first_page.startswith('{\n "file_path": "/data/table.txt",\n "content": "row 0: value_0 = compute(0, ')


def test_the_newest_calls_arguments_stay_whole_while_the_call_fits(tmp_path: Path) -> None:
    """Only a call past the fold threshold clips its newest arguments: a big write in a roomy window stays as sent."""
    model = _model([AIMessage("done")])
    model.limit = 1_000_000
    model.profile = {"max_input_tokens": 1_000_000}
    agent = create_context_agent(model, [write_file], state_dir=tmp_path, checkpointer=InMemorySaver())
    agent.invoke({"messages": [("user", "Write the table.")]}, {"configurable": {"thread_id": "roomy"}})
    (shown,) = [m for m in model._seen[1] if isinstance(m, AIMessage) and m.tool_calls]
    assert shown.tool_calls[0]["args"]["content"] == BODY
