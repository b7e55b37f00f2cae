"""The first call of a resumed thread reads from the thread's state what the process before it worked out.

A worker that picks up a long thread builds its view anew: every cleared result and clipped
call becomes a placeholder again. The lines a clipped call's values keep travel with the
clearing boundary, as a gist's do, so the resumed call does not read the arguments' lines
again; and the tools' schemas an earlier agent of the process counted are not converted
again. The views stay byte for byte what they were.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import ctxwarden.clip.placeholders as placeholders
import ctxwarden.core.meter as meter_module
from ctxwarden.bench.resumed import build, seed_values, session, steps_script
from ctxwarden.clip.boundary import Boundary, placeholder_key
from ctxwarden.clip.placeholders import LINES_END, clip_calls
from ctxwarden.core.meter import TokenMeter
from ctxwarden.stack.middleware import ContextWindowMiddleware
from spies import note_calls

TOKENS = 30_000


def _resume(case: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[Any]], dict[str, Any]]:
    """Seed and settle `case`, resume it with a fresh agent; per model call of the resumed run, the `args_lines` calls
    made on the call's own thread; and the thread's values after it."""
    history = session(TOKENS, TokenMeter())
    saver = InMemorySaver()
    config: dict[str, Any] = {"configurable": {"thread_id": case}, "recursion_limit": 500}
    settle = build(case, TOKENS, steps_script(2, "settle"), saver, folder)
    settle.agent.update_state(config, seed_values(case, history), as_node="model")
    settle.agent.invoke({"messages": [HumanMessage("Run the first checks.", id="settle-ask")]}, config)
    main = threading.get_ident()
    read = note_calls(monkeypatch, placeholders, "args_lines", lambda lines: threading.get_ident() == main)
    calls: list[list[Any]] = []
    original = ContextWindowMiddleware.wrap_model_call

    def watched(self: ContextWindowMiddleware, request: Any, handler: Any) -> Any:
        start = len(read)
        try:
            return original(self, request, handler)
        finally:
            calls.append([on_call for on_call in read[start:] if on_call])

    monkeypatch.setattr(ContextWindowMiddleware, "wrap_model_call", watched)
    resumed = build(case, TOKENS, steps_script(3, "step"), saver, folder)
    resumed.agent.invoke({"messages": [HumanMessage("Now run every check.", id="resume-ask")]}, config)
    return calls, resumed.agent.get_state(config).values


@pytest.mark.parametrize("case", ["clearing", "cost-first"])
def test_a_resumed_first_call_renders_clipped_calls_from_the_lines_the_boundary_carries(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, values = _resume(case, tmp_path, monkeypatch)
    stored = Boundary.from_state(values)
    assert calls[0] == []  # the resumed first call read no clipped argument's lines...
    callers = {str(m.tool_calls[0]["id"]): m for m in values["messages"] if isinstance(m, AIMessage) and m.tool_calls}
    checked = 0
    for name, lines in stored.gists.items():  # ...though the thread has clipped calls, their lines carried
        kind, _, ids = name.partition(":")
        if kind not in {"args", "call"}:
            continue
        ids = ids.partition("/")[2] if kind == "call" else ids
        message = callers[ids.split(",")[0]]
        key = (kind, *ids.split(","))
        assert placeholder_key(message, key) == name
        fresh, chosen = clip_calls(message, set(key[1:]), keep_text=kind == "args")
        carried, _ = clip_calls(message, set(key[1:]), keep_text=kind == "args", lines=lines)
        assert chosen == lines
        assert carried.tool_calls == fresh.tool_calls  # the same bytes as rendering them from the arguments
        assert carried.content == fresh.content
        checked += 1
    assert checked >= 5


def test_lines_that_do_not_fit_the_arguments_are_chosen_again() -> None:
    script = "cat > /tmp/out.py <<'EOF'\n" + "\n".join(f"x_{i} = {i}" for i in range(40)) + "\nEOF\npython /tmp/out.py"
    message = AIMessage("", id="ai", tool_calls=[{"name": "bash", "args": {"command": script}, "id": "c1"}])
    shown, chosen = clip_calls(message, {"c1"})
    assert chosen
    assert chosen[-1] == LINES_END
    for wrong in [(999, LINES_END), (3, 1, LINES_END), (0, LINES_END, 0, LINES_END), (0,)]:
        again, lines = clip_calls(message, {"c1"}, lines=wrong)
        assert lines == chosen
        assert again.tool_calls == shown.tool_calls


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return query


def test_a_new_agent_does_not_convert_the_tool_schemas_an_earlier_one_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    converted = note_calls(monkeypatch, meter_module, "_tool_schema_text", lambda tool: getattr(tool, "name", tool))
    first = TokenMeter().tools_tokens([lookup])
    assert converted == ["lookup"]
    again = TokenMeter().tools_tokens([lookup.model_copy()])  # a new meter and a copy of the tool: a new worker
    assert again == first
    assert converted == ["lookup"]
    TokenMeter(counter=lambda text: len(text)).tools_tokens([lookup])  # a counter without a name shares nothing
    assert converted == ["lookup", "lookup"]
