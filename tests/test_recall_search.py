"""`recall(query=...)`: the agent finds a detail that left its view, in this thread and its parent, never elsewhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, Session
from ctxwarden.clip import make_recall_tool
from ctxwarden.clip.search import PAGE_TOKENS, Source, find, matcher
from ctxwarden.core.meter import TokenMeter
from ctxwarden.replay import scripted_model

WINDOW = 8_000
THOUGHT = "Let me think about the parser carefully. " * 40  # ~400 tokens per step; kept in view by POLICY
POLICY = ContextPolicy(clear_call_text=False)  # the reasoning stays, so the window fills and folds

OUTPUTS = {
    "build": "compiling parser\n" + "step ok\n" * 30 + "Traceback (most recent call last):\n"
    '  File "parser.py", line 12\n'
    "KeyError: 'dialect_alpha'\n",
    # ~2,400 tokens: evicted at arrival; its middle lines are not in the preview the message keeps
    "log": "\n".join(f"log line {i}: all fine here" for i in range(400)),
    "parent-log": "\n".join(f"parent line {i}: nothing" for i in range(300)),
    "sibling-log": "\n".join(f"sibling line {i}: nothing" for i in range(300)),
}


@tool
def sh(command: str) -> str:
    """Run a shell command."""
    if command.startswith("cat > "):  # a write says what it wrote, not the file again
        return f"wrote {command.split()[2]}"
    return OUTPUTS.get(command, f"ran {command}: " + "ok " * 30)


def _call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": name, "args": args, "id": call_id}])


def _answers(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in messages if isinstance(m, ToolMessage) and m.name == "recall"}


def _hit(answer: str, needle: str) -> str:
    (line,) = [line for line in answer.splitlines() if needle in line and line.startswith("- ")]
    return line


def test_search_finds_what_was_cleared_evicted_clipped_and_folded(tmp_path: Path) -> None:
    script = [
        _call("sh", {"command": "build"}, "c-build"),
        _call("sh", {"command": "log"}, "c-log"),
        _call("sh", {"command": "cat > fix.py <<EOF\nx = 1  # CLIPPED_NEEDLE\n" + "y = 2\n" * 120 + "EOF"}, "c-write"),
        *[_call("sh", {"command": f"step {i}"}, f"c{i}", THOUGHT) for i in range(4)],
        _call("recall", {"query": "parser.py"}, "r-cleared"),  # cleared by now, not yet folded
        _call("recall", {"query": "dialect_alpha"}, "r-gist"),  # a line the cleared result's gist kept
        *[_call("sh", {"command": f"step {i}"}, f"c{i}", THOUGHT) for i in range(4, 14)],
        _call("recall", {"query": "parser.py"}, "r-folded"),
        _call("recall", {"query": "dialect_alpha"}, "r-quoted"),  # the fold's facts section quotes this error line
        _call("recall", {"query": "log line 250:"}, "r-evicted"),
        _call("recall", {"query": "ZEBRA-UMBRELLA"}, "r-user"),
        _call("recall", {"query": "CLIPPED_NEEDLE"}, "r-args"),
        _call("recall", {"query": "ran step 13"}, "r-visible"),
        _call("recall", {"query": r"dialect_(alpha|beta)'$", "regex": True}, "r-regex"),
        _call("recall", {"query": "dialect_(", "regex": True}, "r-bad"),
        AIMessage("done"),
    ]
    model = scripted_model(script, window=WINDOW)
    with Session(model, [sh], state_dir=tmp_path, thread_id="t", summarizer="deterministic", policy=POLICY) as session:
        out = session.invoke("Fix the build. Remember the word ZEBRA-UMBRELLA.")
        stamps = [m.response_metadata["ctxwarden"] for m in out["messages"] if isinstance(m, AIMessage)]
    answers = _answers(out["messages"])
    assert "context_clear" in stamps[4]["events"] or "context_clear" in stamps[5]["events"]
    assert any("context_compaction" in s["events"] for s in stamps)

    # a cleared result: call id, tool, turn, line number, and what became of it
    cleared = _hit(answers["r-cleared"], "parser.py")
    assert cleared == '- call c-build (sh, turn 1) result, line 33 [cleared]: File "parser.py", line 12'
    # a line the placeholder still shows (its gist kept the error line) is marked, not repeated
    assert _hit(answers["r-gist"], "c-build") == "- call c-build (sh, turn 1) result, line 34: in your view now"
    assert _hit(answers["r-folded"], "parser.py") == (
        '- call c-build (sh, turn 1) result, line 33 [folded]: File "parser.py", line 12'
    )
    assert _hit(answers["r-quoted"], "c-build") == "- call c-build (sh, turn 1) result, line 34: in your view now"
    # an evicted result is searched whole, from its file (the line is not in the preview)
    preview = next(str(m.content) for m in out["messages"] if getattr(m, "tool_call_id", "") == "c-log")
    assert "[ctxwarden: evicted" in preview
    assert "log line 250:" not in preview
    assert _hit(answers["r-evicted"], "log line 250") == (
        "- call c-log (sh, turn 2) result, line 251 [folded]: log line 250: all fine here"
    )
    # a folded user message, and a call's clipped arguments
    # the user's words are folded, and quoted verbatim by the fold's facts section: in view, not repeated
    assert _hit(answers["r-user"], "user message") == "- user message, turn 1, line 1: in your view now"
    assert "- call c-write (sh, turn 3) args, line 2 [folded]: x = 1  # CLIPPED_NEEDLE" in answers["r-args"]
    # what the model still sees is marked, not repeated
    assert _hit(answers["r-visible"], "c13") == "- call c13 (sh, turn 19) result, line 1: in your view now"
    assert "1 in your view now" in answers["r-visible"]
    # recall's own calls and answers are not searched (they only repeat what it found)
    assert "r-cleared" not in answers["r-folded"]
    assert answers["r-regex"].count("\n- ") == 1
    assert "not a valid regular expression" in answers["r-bad"]


def test_search_pages_stay_under_the_token_budget() -> None:
    lines = "\n".join(f"ERROR number {i}: something failed in module_{i}.py" for i in range(400))
    messages = [
        HumanMessage("go", id="h"),
        _call("sh", {"command": "test"}, "c1"),
        ToolMessage(lines, tool_call_id="c1", name="sh", id="t1"),
    ]
    recall = make_recall_tool(None)
    meter = TokenMeter()
    first = recall.invoke({"query": "ERROR number", "state": {"messages": messages}})
    assert first.startswith("[ctxwarden: 400 lines match text 'ERROR number'; 0 in your view now. Page 1 of ")
    pages = int(re.search(r"Page 1 of (\d+)", first).group(1))  # type: ignore[union-attr]
    assert pages > 1
    assert "recall(query='ERROR number', page=2)" in first
    seen = []
    for number in range(1, pages + 1):
        answer = recall.invoke({"query": "ERROR number", "page": number, "state": {"messages": messages}})
        assert meter.counter(answer) <= PAGE_TOKENS + 120
        seen += re.findall(r"line (\d+): ERROR", answer)
    assert [int(n) for n in seen] == list(range(1, 401))  # every hit once, in order, across the pages
    assert "page 99 is empty" in recall.invoke({"query": "ERROR", "page": 99, "state": {"messages": messages}})
    assert "needs text" in recall.invoke({"query": "  ", "state": {"messages": messages}})
    assert "pass call_id" in recall.invoke({"state": {"messages": messages}})


def _parent_and_sibling(tmp_path: Path) -> tuple[Session, list[Session]]:
    parent_script = [
        "First turn, noted.",
        _call("sh", {"command": "echo PARENT_SECRET_LINE"}, "p1"),
        _call("sh", {"command": "parent-log"}, "p2"),
        "Second turn done.",
    ]
    parent = Session(
        scripted_model(parent_script, window=WINDOW),
        [sh],
        state_dir=tmp_path,
        thread_id="parent",
        summarizer="deterministic",
    )
    parent.invoke("Turn one: set up.")
    parent.invoke("Turn two: run the checks.")
    sibling = Session(
        scripted_model(
            [
                _call("sh", {"command": "echo SIBLING_SECRET_LINE"}, "s1"),
                _call("sh", {"command": "sibling-log"}, "s2"),
                "ok",
            ],
            window=WINDOW,
        ),
        [sh],
        state_dir=tmp_path,
        thread_id="sibling",
        summarizer="deterministic",
    )
    sibling.invoke("Another conversation.")
    cousin = parent.fork(
        [0],
        thread_id="cousin",
        model=scripted_model([_call("sh", {"command": "echo COUSIN_SECRET_LINE"}, "k1"), "ok"], window=WINDOW),
    )
    cousin.invoke("A second fork of the parent.")
    return parent, [sibling, cousin]


SEARCHES = {
    "f1": "PARENT_SECRET_LINE",
    "f2": "parent line 150: nothing",
    "f3": "SIBLING_SECRET_LINE",
    "f4": "sibling line 150",
    "f5": "COUSIN_SECRET_LINE",
    "f6": "Turn one",
}


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_a_fork_searches_its_parent_and_never_a_sibling(tmp_path: Path, run: str) -> None:
    parent, others = _parent_and_sibling(tmp_path)
    script = [*(_call("recall", {"query": q}, call_id) for call_id, q in SEARCHES.items()), "done"]
    fork = parent.fork([0], thread_id="fork", model=scripted_model(script, window=WINDOW))
    try:
        out = fork.invoke("Search.") if run == "sync" else await fork.ainvoke("Search.")
    finally:
        for session in (parent, *others, fork):
            session.close()
    answers = _answers(out["messages"])
    # the parent's turn that the fork did not take: its messages and its evicted file, read-only
    assert (
        "- parent thread 'parent': call p1 (sh, turn 2) args, line 1: command: echo PARENT_SECRET_LINE" in answers["f1"]
    )
    parent_log = "- parent thread 'parent': call p2 (sh, turn 3) result, line 151 [evicted]: parent line 150: nothing"
    assert parent_log in answers["f2"]
    # a sibling thread and the parent's other fork: nothing, not even their evicted files
    for call_id in ("f3", "f4", "f5"):
        assert answers[call_id].startswith("[ctxwarden: no line of this conversation matches"), answers[call_id]
    # the turn the fork was seeded with is its own (in view), not repeated from the parent
    assert "user message, turn 1, line 1: in your view now" in answers["f6"]
    assert "parent thread" not in answers["f6"]


def test_a_thread_that_names_a_parent_in_its_own_state_searches_no_other_thread(tmp_path: Path) -> None:
    """A client writes any key of its own thread's state (`update_state`, a server's thread-state endpoint): a fork
    record it wrote, naming another thread by id, or with a checkpoint id it guessed, names no parent."""
    parent, others = _parent_and_sibling(tmp_path)
    made_from = parent.agent.get_state(parent.config).config["configurable"]["checkpoint_id"]
    claimant = Session(scripted_model(["hi"], window=WINDOW), [sh], state_dir=tmp_path, thread_id="claimant")
    claimant.invoke("hello")
    guessed = made_from[:-1] + ("1" if made_from[-1] != "1" else "2")
    forged = [{"parent": "parent"}, {"parent": "parent", "checkpoint": guessed}]
    answers = []
    for record in forged:
        claimant.agent.update_state(claimant.config, {"ctxwarden_fork": record})
        claimant.switch_model(
            scripted_model([_call("recall", {"query": "PARENT_SECRET_LINE"}, "q"), "ok"], window=WINDOW)
        )
        answers.append(_answers(claimant.invoke("Search.")["messages"])["q"])
    for session in (parent, *others, claimant):
        session.close()
    for answer in answers:
        assert answer.startswith("[ctxwarden: no line of this conversation matches"), answer


def test_a_hit_names_the_line_read_file_shows_and_a_raw_output_reads_as_a_terminal_shows_it() -> None:
    """Lines were split with `splitlines`: at every `\\r` progress frame and form feed too, so a hit's number was not
    the line `read_file` shows, and a hit in an output's raw bytes came with its escape codes, once a frame."""
    notes = "first\x0csame line after a form feed\nsecond line: target\n"
    (hit,) = find([Source(notes, "file", path="/notes/a.txt")], matcher("target", False))[0]
    assert hit.line == 2  # before: 3
    raw = "\x1b[32mPASSED\x1b[0m t1\n\x1b[31mFAILED\x1b[0m t2 target\n" + "".join(f"\rtarget {p}%" for p in range(5))
    hits, _cut = find([Source(raw, "file", path="/large_tool_results/t/c1.raw")], matcher("target", False))
    assert [(h.line, h.text) for h in hits] == [(2, "FAILED t2 target"), (3, "target 4%")]  # before: 6 hits, codes kept
