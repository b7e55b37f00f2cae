"""Reference recall and probe recall, computed by hand on a tiny session."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxwarden.bench.harness import SeenCall, applied_folds
from ctxwarden.bench.recall import index_session, probes, recall_counts
from ctxwarden.replay.recording import parse_recording

RAW = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the parser.\nKeep tests green."},
    {
        "role": "assistant",
        "content": "Search first.",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "grep -rn parse_header src"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "src/http/headers.py:214:def parse_header(raw):\nnoise"},
    {
        "role": "assistant",
        "content": "Look around.",
        "tool_calls": [{"id": "b", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}],
    },
    {"role": "tool", "tool_call_id": "b", "content": "README.md\nsetup.py"},
    {
        "role": "assistant",
        "content": "Still looking.",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c", "content": "/repo"},
    {
        "role": "assistant",
        "content": "Edit it.",
        "tool_calls": [
            {
                "id": "d",
                "type": "function",
                "function": {
                    "name": "bash",
                    "arguments": '{"command": "sed -n 214,216p src/http/headers.py > /tmp/out.txt"}',
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "d", "content": "ValueError: bad header"},
]
SESSION = parse_recording(RAW, source="tiny")


def test_references_are_rare_tokens_first_shown_by_a_tool_output() -> None:
    index = index_session(SESSION)
    # step 4 writes `214` and `src/http/headers.py`, both first shown by the grep output of step 1
    assert {r.token for r in index.references[4]} == {"214", "src/http/headers.py"}
    assert {r.source_step for r in index.references[4]} == {1}
    # `parse_header` was the agent's own word before any output showed it: not a reference
    assert all(r.token != "parse_header" for refs in index.references.values() for r in refs)


def test_recall_counts_only_verbatim_lines_of_the_view() -> None:
    user = HumanMessage("Fix the parser.\nKeep tests green.")
    quoted = ToolMessage(
        "[cleared bash result: recall]\nsrc/http/headers.py:214:def parse_header(raw):", tool_call_id="a"
    )
    prose = ToolMessage("[cleared bash result: it mentioned src/http/headers.py line 214]", tool_call_id="a")
    system = SystemMessage("You are a coding agent.")
    kept = recall_counts(SESSION, [(3, [system, user, quoted])])
    assert (kept.references, kept.recalled, kept.long_range, kept.long_range_recalled) == (2, 2, 2, 2)
    lost = recall_counts(SESSION, [(3, [system, user, prose])])
    assert (lost.references, lost.recalled) == (2, 0)  # a placeholder's own words do not count


def test_probes_after_a_fold_name_files_user_lines_and_the_latest_error() -> None:
    found = {(p.kind, p.text) for p in probes(SESSION, 4)}
    assert ("written file", "/tmp/out.txt") in found
    assert ("latest user message", "Fix the parser.\nKeep tests green.") in found
    assert ("user line", "Keep tests green.") in found
    assert ("latest error line", "ValueError: bad header") in found
    view = [HumanMessage("Fix the parser.\nKeep tests green.\n/tmp/out.txt"), AIMessage("ValueError: bad header")]
    scored = recall_counts(SESSION, [(3, []), (4, view)], folds_before=[1])
    assert scored.probes == len(found)
    assert scored.probes_found == scored.probes


def test_a_probe_never_asks_for_a_user_message_said_after_the_call() -> None:
    """A fold inside the first turn is probed for the first turn's words only, not the next turn's."""
    two_turns = parse_recording(
        [
            *RAW,
            {"role": "user", "content": "Now update the changelog."},
            {"role": "assistant", "content": "Done."},
        ],
        source="two turns",
    )
    inside = {p.text for p in probes(two_turns, 3) if p.kind == "latest user message"}
    assert inside == {"Fix the parser.\nKeep tests green."}
    after = {p.text for p in probes(two_turns, 4) if p.kind == "latest user message"}
    assert after == {"Now update the changelog."}  # the call after turn one's four steps is turn two's first


def test_a_fold_is_probed_on_the_first_view_that_shows_it_not_where_its_summary_was_asked() -> None:
    """A summary prepared ahead is asked for calls before the fold applies it."""
    summary = HumanMessage("## Summary", additional_kwargs={"lc_source": "summarization"})
    second = HumanMessage("## Summary", additional_kwargs={"lc_source": "summarization"})
    views = [
        [HumanMessage("go"), AIMessage("a")],
        [HumanMessage("go"), AIMessage("a"), AIMessage("b")],  # the summary is asked here, in the background
        [summary, AIMessage("b")],  # and shown here: the fold's first view
        [summary, AIMessage("b"), AIMessage("c")],
        [second, AIMessage("c")],  # the same words, a new cut: another fold
    ]
    assert applied_folds([SeenCall(step, view, [], 0.0) for step, view in enumerate(views)]) == [2, 4]


TASK_RAW = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix crash in normalize_header_value.\nSee src/http/values.py here\nKeep tests green."},
    *[
        message
        for step, command in enumerate(["ls", "pwd", "grep -n normalize_header_value src/http/values.py"])
        for message in (
            {
                "role": "assistant",
                "content": f"Step {step}.",
                "tool_calls": [
                    {
                        "id": f"t{step}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"t{step}", "content": "ok"},
        )
    ],
]


def test_task_recall_scores_the_tokens_the_task_showed_first_apart_from_the_references() -> None:
    session = parse_recording(TASK_RAW, source="task")
    index = index_session(session)
    assert index.task_references[3] == ("normalize_header_value", "src/http/values.py")
    assert index.references[3] == ()  # a task's tokens are never a tool output's references
    system = SystemMessage("You are a coding agent.")
    whole = HumanMessage("Fix crash in normalize_header_value.\nSee src/http/values.py here\nKeep tests green.")
    in_part = HumanMessage("[the task is shown in part]\nFix crash in normalize_header_value.\n…")
    summarized = HumanMessage("The agent was asked to fix a crash in normalize_header_value of values.py.")
    counts = [recall_counts(session, [(2, [system, task])]) for task in (whole, in_part, summarized)]
    assert [(c.task_references, c.task_recalled) for c in counts] == [(2, 2), (2, 1), (2, 0)]
    assert all(c.references == 0 for c in counts)
