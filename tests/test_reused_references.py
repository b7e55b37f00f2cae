"""Every reference a view shows for a reused or look-alike call id leads to that call, or to a list naming it.

Before:
- A reused id of nine characters or more (`tool_call_0` in every reply) is named `tool_call_0#<key>` in the view, and
  a placeholder shows the end of that, `…<key>`: `recall` answered "no tool result with this call id".
- `part="args"` and `part="text"` of a bare reused id gave the last call's arguments or text, silently: the first
  call's clipped arguments pointed to `recall(call_id="call_0", part="args")` and got the eighth call's.
- A call whose id is another's end as a placeholder shows it (`…35lq9XYZ`) was given for the other: both cleared
  results showed the same placeholder, and the long call's returned the short one's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import create_context_agent
from ctxwarden.clip import make_recall_tool
from ctxwarden.replay import scripted_model
from views import Views

REFERENCE = re.compile(r'recall\(call_id="([^"]+)"(?:, part="(args|text)")?\)')


@tool
def write(path: str, body: str) -> str:
    """Write `body` to the file at `path`."""
    return "\n".join(f"WROTE<{path}> line {i}: data {i}" for i in range(120))


def _run(tmp_path: Path, ids: list[str]) -> tuple[Any, list[Any], list[Any]]:
    """One turn per id, each writing its own file with a large body: (the recall tool, the thread, the last view)."""
    script: list[AIMessage] = []
    for turn, call_id in enumerate(ids):
        body = "\n".join(f"BODY<f{turn}> line {i}" for i in range(150))
        call = {"name": "write", "args": {"path": f"f{turn}", "body": body}, "id": call_id}
        script += [AIMessage(f"writing f{turn} now", tool_calls=[call]), AIMessage(f"wrote f{turn}")]
    views = Views()
    agent = create_context_agent(
        scripted_model(script, window=16_000),
        [write],
        state_dir=tmp_path,
        summarizer="deterministic",
        middleware=[views],
    )
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(len(ids)):
        agent.invoke({"messages": [("user", f"turn {turn}")]}, config)
    return make_recall_tool(agent.ctxwarden_parts.backend), agent.get_state(config).values["messages"], views.views[-1]


def _answers(recall: Any, thread: list[Any], reference: str, part: str) -> list[str]:
    """What `reference` recalls: its answer, or, for a list to choose from, what each name in it recalls."""
    answer = recall.invoke({"call_id": reference, "part": part, "state": {"messages": thread}, "limit": 50_000})
    if not answer.startswith("[ctxwarden:"):
        return [answer]
    named = [(ref, p or part) for ref, p in REFERENCE.findall(answer)]
    assert named, answer
    return [recall.invoke({"call_id": r, "part": p, "state": {"messages": thread}, "limit": 50_000}) for r, p in named]


def _checked(recall: Any, thread: list[Any], view: list[Any]) -> int:
    """Every reference in `view` leads to its own call (or to a list in which its own call is named); the count."""
    checked = 0
    for message in view:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                own = f"BODY<{call['args']['path']}>"
                for reference, part in REFERENCE.findall(json.dumps(call["args"], ensure_ascii=False)):
                    answers = _answers(recall, thread, reference, part or "result")
                    assert any(own in a for a in answers), (reference, answers[:1])
                    if len(answers) == 1:
                        assert own in answers[0]
                    checked += 1
        if isinstance(message, ToolMessage) and message.name == "write":
            calls = {c["id"]: c for m in view if isinstance(m, AIMessage) for c in m.tool_calls}
            own = f"WROTE<{calls[message.tool_call_id]['args']['path']}>"
            for reference, part in REFERENCE.findall(str(message.content)):
                answers = _answers(recall, thread, reference, part or "result")
                assert any(a.startswith(own) for a in answers), (reference, answers[:1])
                if len(answers) == 1:
                    assert answers[0].startswith(own)
                checked += 1
    return checked


def test_a_long_id_reused_in_every_reply_is_recalled_by_the_end_a_placeholder_shows(tmp_path: Path) -> None:
    recall, thread, view = _run(tmp_path, ["tool_call_0"] * 8)
    ends = [r for m in view for r, _p in REFERENCE.findall(str(m.content) + str(getattr(m, "tool_calls", "")))]
    assert any(r.startswith("…") for r in ends)  # the view names reused calls by the end of `<id>#<key>`
    assert _checked(recall, thread, view) > 8


def test_the_arguments_and_text_of_a_bare_reused_id_are_never_another_calls(tmp_path: Path) -> None:
    recall, thread, view = _run(tmp_path, ["call_0"] * 8)
    assert _checked(recall, thread, view) > 8
    state = {"messages": thread}
    listed = recall.invoke({"call_id": "call_0", "part": "args", "state": state})
    assert "8 tool calls in this thread share call id 'call_0'" in listed  # before: the last call's arguments
    text = recall.invoke({"call_id": "call_0", "part": "text", "state": state})
    assert text.startswith("[ctxwarden: 8 tool calls")
    for turn, (reference, part) in enumerate(REFERENCE.findall(text)):
        assert recall.invoke({"call_id": reference, "part": part, "state": state}) == f"writing f{turn} now"


def test_an_id_spelled_as_the_end_of_another_names_neither_silently(tmp_path: Path) -> None:
    long = "toolu_01A09q90qw90lq917835lq9XYZ"
    recall, thread, view = _run(tmp_path, [long, "…35lq9XYZ", *(f"fin{i}" for i in range(6))])
    answer = recall.invoke({"call_id": "…35lq9XYZ", "state": {"messages": thread}})
    assert answer.startswith("[ctxwarden: '…35lq9XYZ' is the id of a call and the end of the id of another")
    own = dict(zip(("f0", "f1"), (long, "…35lq9XYZ"), strict=True))
    for reference, _part in REFERENCE.findall(answer):
        got = recall.invoke({"call_id": reference, "state": {"messages": thread}, "limit": 50_000})
        path = re.match(r"WROTE<(f\d)>", got)
        assert path is not None
        assert reference.startswith(own[path.group(1)])  # each name recalls its own call's output
    assert _checked(recall, thread, view) > 0
