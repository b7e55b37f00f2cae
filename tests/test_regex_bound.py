"""`recall(query=..., regex=True)` runs in linear time: RE2 matches, and a pattern it cannot run gets a clear answer.

A backtracking engine takes time exponential in the line for `(a+)+$` (3.7 s at 25 characters, doubling with
each one). RE2 has no backtracking, so the same search over a line of thousands of characters is linear.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxwarden.clip import make_recall_tool
from ctxwarden.clip.search import matcher

LONG = "a" * 20_000 + "!"


def _state(text: str) -> dict:
    calls = [{"name": "cat", "args": {"path": "x"}, "id": "c0"}]
    return {"messages": [HumanMessage("go"), AIMessage("", tool_calls=calls), ToolMessage(text, tool_call_id="c0")]}


def test_a_regex_search_is_run_by_re2() -> None:
    match = matcher("(a+)+$", True)
    assert not isinstance(match, str)
    assert type(getattr(match, "__self__", None)).__module__.split(".")[0] == "re2"  # the linear-time engine
    assert match(LONG) is None
    assert match("aaaa") is not None


def test_a_catastrophic_pattern_on_a_long_line_answers() -> None:
    recall = make_recall_tool(None)
    answer = recall.invoke({"query": "(a+)+$", "regex": True, "state": _state(LONG)})
    assert "no line of this conversation matches regex" in answer
    found = recall.invoke({"query": "(a+)+!$", "regex": True, "state": _state(LONG)})
    assert "1 line matches" in found


def test_case_and_classes_still_work() -> None:
    recall = make_recall_tool(None)
    state = _state("Traceback\nKeyError: 'user_42'\nok")
    assert "KeyError: 'user_42'" in recall.invoke({"query": r"(?i)keyerror: '\w+_\d+'", "regex": True, "state": state})


def test_a_pattern_re2_cannot_run_gets_a_message_naming_the_alternative() -> None:
    recall = make_recall_tool(None)
    for pattern in (r"(\w+) \1", r"error(?=:)", r"(?<!no )error"):
        answer = recall.invoke({"query": pattern, "regex": True, "state": _state("error: error error")})
        assert "linear time" in answer, answer
        assert "regex=False" in answer
        assert pattern in answer or repr(pattern) in answer


def test_an_invalid_pattern_still_says_so() -> None:
    answer = make_recall_tool(None).invoke({"query": "a(b", "regex": True, "state": _state("ab")})
    assert "not a valid regular expression" in answer
