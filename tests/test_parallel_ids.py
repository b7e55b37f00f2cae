"""Parallel calls sharing one call id in one message (`call_0` twice, as some local model servers emit).

Each output lands in its own file and gets its own reference; every reference resolves to
exactly one output, and `recall` of each returns that output's own text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model

RUNS: list[str] = []


def _log(label: str) -> str:
    return "\n".join(f"{label} build, line {i}: compiled module_{i}" for i in range(900))


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    RUNS.append(target)
    return _log(f"{target}#{len(RUNS)}")


def _run(state_dir: Path, args: list[dict[str, Any]], thread: str) -> tuple[Any, list[Any]]:
    RUNS.clear()
    calls = [{"name": "build", "args": a, "id": "call_0"} for a in args]
    agent = create_context_agent(
        scripted_model([AIMessage("", id="ai-1", tool_calls=calls), AIMessage("ok")], window=32_000),
        [build],
        state_dir=state_dir,
    )
    messages = agent.invoke({"messages": [("user", "build both")]}, {"configurable": {"thread_id": thread}})["messages"]
    agent.checkpointer.conn.close()
    return agent, messages


def _check(state_dir: Path, agent: Any, messages: list[Any]) -> None:
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == 2
    originals = [f"{target}#{n}" for n, target in enumerate(RUNS, start=1)]
    records = [m.response_metadata[METADATA_KEY] for m in results]
    paths = [r["path"] for r in records]
    assert len(set(paths)) == 2, paths  # each output in its own file
    files = {(state_dir / p.lstrip("/")).read_text(encoding="utf-8") for p in paths}
    assert files == {_log(label) for label in originals}  # both outputs kept, neither overwritten

    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    references = [re.findall(r'recall\(call_id="([^"]+)"\)', str(m.content))[0] for m in results]
    assert len(set(references)) == 2, references  # each output its own reference
    for message, reference, path in zip(results, references, paths, strict=True):
        text = recall.invoke({"call_id": reference, "state": state, "limit": 50_000})
        assert text == (state_dir / path.lstrip("/")).read_text(encoding="utf-8")  # its own output, whole
        assert text.splitlines()[0] in str(message.content)  # the one its placeholder previews
    bare = recall.invoke({"call_id": "call_0", "state": state})
    assert "2 tool results" in bare
    for reference in references:
        assert reference in bare


def test_parallel_calls_sharing_an_id_keep_their_own_outputs(state_dir: Path) -> None:
    agent, messages = _run(state_dir, [{"target": "first"}, {"target": "second"}], "parallel")
    _check(state_dir, agent, messages)


def test_identical_parallel_calls_sharing_an_id_keep_their_own_outputs(state_dir: Path) -> None:
    agent, messages = _run(state_dir, [{"target": "same"}, {"target": "same"}], "twins")
    assert RUNS == ["same", "same"]
    _check(state_dir, agent, messages)


def test_the_arguments_of_each_twin_are_recalled_by_its_reference(state_dir: Path) -> None:
    agent, messages = _run(state_dir, [{"target": "left"}, {"target": "right"}], "args")
    recall = make_recall_tool(agent.ctxwarden_parts.backend)
    state = {"messages": messages}
    for message, target in zip([m for m in messages if isinstance(m, ToolMessage)], ["left", "right"], strict=True):
        reference = re.findall(r'recall\(call_id="([^"]+)"\)', str(message.content))[0]
        assert str(message.content).startswith(f"{target}#")  # results come in the order of the calls
        assert recall.invoke({"call_id": reference, "state": state, "part": "args"}) == f'{{\n "target": "{target}"\n}}'
