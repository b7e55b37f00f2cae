"""Gists keep whole verbatim lines an agent comes back for, byte-stable; clearing takes superseded results first."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import threading
from typing import Any, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.clip import clear as clear_module
from ctxwarden.clip.clear import NO_MASK, Boundary, ClearLayer
from ctxwarden.clip.ledger import TokenLedger
from ctxwarden.clip.order import superseded
from ctxwarden.clip.placeholders import args_placeholder, result_placeholder
from ctxwarden.clip.preview import preview
from ctxwarden.core.gist import (
    ERROR,
    FAILING_TEST,
    GAP,
    SUMMARY,
    TRACEBACK_START,
    gist,
    is_error,
    may_signal,
    summary_line,
)
from ctxwarden.core.text import FAILURE, TOKEN, TOKEN_DEFINITION, error_line, is_failure, message_text
from ctxwarden.demo.run import default_trajectory
from ctxwarden.replay import scripted_model
from ctxwarden.replay.recording import load_recording
from ctxwarden.stack.middleware import ContextWindowMiddleware
from views import Views

METER = TokenMeter()


def _build_log(lines: int = 5_000) -> str:
    body = [f"collecting item {i} of the suite, nothing to report here" for i in range(lines)]
    body[2_711] = "src/pkg/resolver.py:412: in resolve_dependency_graph"
    body[2_712] = "AssertionError: expected 17 nodes, found 16"
    return "\n".join(body)


def test_a_gist_keeps_the_error_line_and_the_path_from_a_5000_line_output() -> None:
    text = _build_log()
    excerpt = gist(text, 300, METER.counter)
    kept = excerpt.text.splitlines()
    assert "AssertionError: expected 17 nodes, found 16" in kept
    assert "src/pkg/resolver.py:412: in resolve_dependency_graph" in kept
    assert excerpt.total_lines == 5_000
    assert sum(METER.counter(line) for line in kept) < 400  # bounded by the budget (markers aside)
    original = set(text.splitlines())
    for line in kept:  # every line is a whole line of the original, or an omission marker
        assert line in original or line == GAP


def test_a_small_gist_keeps_the_line_that_says_why_the_output_failed() -> None:
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/testbed/test_debug_l003.py", line 9, in <module>',
            "    linter = Linter(config_string=cfg)",
            "TypeError: Linter.__init__() got an unexpected keyword argument 'config_string'",
            "exit status 1",
        ]
    )
    reason = "TypeError: Linter.__init__() got an unexpected keyword argument 'config_string'"
    budget = METER.counter(reason) + 2  # room for that line, not for the traceback header beside it
    excerpt = gist(text, budget, METER.counter)
    assert reason in excerpt.text.splitlines()
    assert gist(text, budget, METER.counter) == excerpt  # byte-stable
    assert gist(text, 0, METER.counter).shown_lines == 0  # no budget, no lines


SIGNAL_LINES = [
    "===== 3 passed, 1 warning in 0.12s =====",
    "==== 2 failed, 5 errors in 1.2s ====",
    "=== 4 xpassed, 1 skipped in 0.1s ===",
    "5 failed",
    "Ran 12 tests in 0.300s",
    "FAILED (failures=2, errors=1)",
    "OK",
    "OK (skipped=1)",
    "10 examples completed",
    "Tests:  4",
    "FAILED tests/test_x.py::test_a - assert 1 == 2",
    "tests/test_x.py::test_a FAILED",
    "FAIL: test_a (tests.test_x.Case)",
    "ERROR: test_b (tests.test_x.Case)",
    "Traceback (most recent call last):",
    "panic: runtime error: index out of range",
    "Exception in thread main",
    "E   assert 1 == 2",
    "E\t\tassert 1 == 2",
    "ValueError: bad value",
    "  django.core.exceptions.FieldError: Unknown field",
    "main.c:10:5: error: expected ';'",
    "lib.rs:3:1: warning: unused import",
    "fatal: not a git repository",
    "SystemExit: 1",
    "KeyboardInterrupt",
    "DeprecationWarning: use the other one",
    "bash: foo: command not found",
    "cat: x: No such file or directory",
    "error[E0308]: mismatched types",
    "Build FAILURE after 3 steps",
    "===== 1 paſsed in 0.1s =====",  # the long s matches an ignore-case "s": the words are case-folded too
]


def test_a_gist_of_numbered_lines_spends_its_budget_on_lines_that_hold_something() -> None:
    # `grep -n -A` / `cat -n` output: every line carries a fresh number, the blank and bracket lines nothing else
    body = []
    for start in (750, 1210, 1630):
        body += [
            f"{start}:    def resolve_dependency_graph_{start}(self, model_instance, add):",
            f'{start + 1}-        """',
            f"{start + 2}-        ",
            f"{start + 3}-        attribute_cache_{start} = getattr(model_instance, cache_name)",
            f"{start + 4}-        )",
            f"{start + 5}-",
        ]
    text = "\n".join(body)
    kept = gist(text, 90, METER.counter).text.splitlines()
    assert "750:    def resolve_dependency_graph_750(self, model_instance, add):" in kept
    assert "753-        attribute_cache_750 = getattr(model_instance, cache_name)" in kept
    bare = [line for line in body if not any(c.isalpha() for c in line)]
    assert len(bare) == 12
    assert not set(bare) & set(kept)


def test_the_token_pattern_finds_exactly_what_its_definition_finds() -> None:
    recording = load_recording(default_trajectory())
    texts = [*recording.outputs.values(), *(message_text(step) for turn in recording.turns for step in turn.steps)]
    texts += ["src/app/x.py a/b 123abc 1abcdefg module_name/foo x-y/z ..//.. über_straße/naïve 4567 _private_name"]
    texts += ["12/345", "v1.2.3-rc/9", "-/-", "abc/", "/usr/bin/env", "αβγδεζη/θ", "0x1F2E3D4C", "a_b_c_d_e.f"]
    plain = re.compile(TOKEN_DEFINITION)
    assert sum(len(plain.findall(text)) for text in texts) > 5_000
    for text in texts:
        assert TOKEN.findall(text) == plain.findall(text)
        assert TOKEN.findall(text, 7) == plain.findall(text, 7)


def test_a_line_skipped_by_the_signal_words_matches_no_signal_pattern() -> None:
    """The word check spares most lines five slow searches, and never a line one of them matches."""
    patterns = (SUMMARY, FAILING_TEST, TRACEBACK_START, ERROR, FAILURE)
    for line in SIGNAL_LINES:
        assert any(p.search(line) for p in patterns), line  # each line is a signal line...
        assert may_signal(line), line  # ...and is searched
    plain = [
        "src/app/module_3.py:10: value_1_2 = compute(alpha_2, beta) # checked 2",
        "drwxr-xr-x  8 root root 4096 Sep 10 .git",
        "def resolve(graph):",
    ]
    assert not any(may_signal(line) for line in plain)


_SUMMARY_PIECES = [
    *("1", "12 ", "٣", " passed", " FAILED", " error", "s", " skipped", " warnings", " tests", " teſt", " examples"),
    *(" completed", "=", "== ", " ===", "Ran ", " in ", "OK", "ok (", "FAILED (", "failures=2", "Tests: ", "  ", "x"),
    *("é", "\t", ":", "(", ")"),
]


@settings(max_examples=2_000, deadline=None)
@given(st.lists(st.sampled_from(_SUMMARY_PIECES), max_size=12).map("".join))
@example("2 teſt passed")  # the pattern reads `ſ` as an `s`
@example("== 3 passed, 1 warning in 0.2s ==")
def test_a_summary_line_is_what_the_summary_pattern_matches(line: str) -> None:
    # read in parts, each only where it can match: the same answer as the one pattern, in every case
    assert summary_line(line) == (SUMMARY.search(line) is not None), line


_FAILURE_PIECES = [
    *(
        "E",
        "  ",
        "\t",
        " ",
        "x",
        "a.c",
        ":",
        "12",
        ":3",
        " error",
        "error",
        "error[E0308]",
        " warning",
        "fatal",
        "Error",
    ),
    *("ValueError", "Exception", "SystemExit", "KeyboardInterrupt", "UserWarning", "pkg.mod.", "é", "FAILED", "FAIL:"),
    *(
        "ERROR",
        "ERROR:",
        " failed",
        "FAILURE",
        "Failure",
        "panic",
        ": command not found",
        ": No such file or directory",
    ),
    *("\n", "_", "(", "[x]"),
]


@settings(max_examples=3_000, deadline=None)
@given(st.lists(st.sampled_from(_FAILURE_PIECES), max_size=10).map("".join))
@example("  ValueError: bad")
@example("bash: pytes: command not found\n")
@example("src/a.c:3:5: warning: unused")
def test_failure_and_error_lines_are_what_their_patterns_match(line: str) -> None:
    # read in parts, each only where it can match: the same answer as each pattern
    assert is_failure(line) == (FAILURE.search(line) is not None), line
    assert is_error(line) == (ERROR.search(line) is not None), line


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_FAILURE_PIECES), max_size=6).map("".join), max_size=12).map("\n".join))
def test_the_error_line_of_an_output_is_its_last_failure_line(text: str) -> None:
    last = [line for line in text.splitlines() if FAILURE.search(line)]  # a search a line, as before
    assert error_line(text) == (last[-1].strip() if last and last[-1].strip() else None), text


def test_a_gist_is_byte_stable_and_skips_what_the_thread_already_showed() -> None:
    text = _build_log()
    assert gist(text, 300, METER.counter).text == gist(text, 300, METER.counter).text
    earlier = HumanMessage("see src/pkg/resolver.py:412: in resolve_dependency_graph and resolve_dependency_graph")
    output = ToolMessage(text, tool_call_id="c1")
    ledger = TokenLedger()
    ledger.sync([earlier, output])
    position = ledger.position(output)
    assert position == 1
    seen = ledger.seen_before(position)
    assert seen("resolve_dependency_graph") == 1
    assert seen("AssertionError") == 0


def test_a_token_ledger_counts_up_to_three_showings_and_holds_no_container_per_token() -> None:
    # 10,000 distinct tokens, one result each; `shared_detail` shown by results 3, 5, 8 and 9; the last message
    # repeats every token result 6 was first to show
    thread: list[BaseMessage] = [
        ToolMessage(
            " ".join(f"value_{i}_{j}" for j in range(50)) + (" shared_detail" if i in {3, 5, 8, 9} else ""),
            tool_call_id=f"c{i}",
        )
        for i in range(200)
    ]
    thread.append(HumanMessage(" ".join(f"value_6_{j}" for j in range(50))))
    gc.collect()
    before = len(gc.get_objects())
    ledger = TokenLedger()
    ledger.sync(thread)
    gc.collect()
    assert len(gc.get_objects()) - before < 1_000  # a list per token made it more than 10,000
    assert [ledger.seen_before(at)("shared_detail") for at in (3, 4, 6, 9, 10)] == [0, 1, 2, 3, 3]
    assert ledger.seen_before(100)("value_7_3") == 1
    assert ledger.shown_again(thread[6], 6)
    assert not ledger.shown_again(thread[7], 7)


def test_a_cleared_placeholder_quotes_the_gist_and_keeps_the_recall_pointer() -> None:
    message = ToolMessage(_build_log(), tool_call_id="call_7", name="bash")
    excerpt = gist(message.content, 300, METER.counter)  # type: ignore[arg-type]
    placeholder = result_placeholder(message, METER.message_tokens(message), excerpt)
    assert 'recall(call_id="call_7")' in placeholder.content
    assert "AssertionError: expected 17 nodes, found 16" in str(placeholder.content).splitlines()
    again = result_placeholder(message, METER.message_tokens(message), gist(message.content, 300, METER.counter))  # type: ignore[arg-type]
    assert again.content == placeholder.content


def test_a_preview_quotes_whole_lines_never_cut_ones() -> None:
    long_line = "x" * 1_500
    text = "\n".join(["header", long_line, *(f"row {i} value_{i}" for i in range(2_000)), "Error: boom happened"])
    shown = preview(text, max_chars=2_000)
    lines = shown.text.splitlines()
    assert long_line not in lines
    assert "Error: boom happened" in lines
    originals = set(text.splitlines())
    assert all(line in originals or line.startswith("… [") for line in lines)


def test_superseded_takes_reruns_and_reads_of_rewritten_files() -> None:
    messages = [
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "pytest -q"}, "id": "a"}]),
        ToolMessage("1 failed", tool_call_id="a"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"file_path": "/x.py"}, "id": "b"}]),
        ToolMessage("old body", tool_call_id="b"),
        AIMessage("", tool_calls=[{"name": "write_file", "args": {"file_path": "/x.py", "content": "new"}, "id": "c"}]),
        ToolMessage("ok", tool_call_id="c"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "pytest -q"}, "id": "d"}]),
        ToolMessage("1 passed", tool_call_id="d"),
    ]
    assert superseded(messages) == {"a", "b"}


PAGE = "word " * 480


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: {PAGE}"


@tool
def bash(command: str) -> str:
    """Run a command."""
    return f"$ {command}\n" + "\n".join(f"line {i} of {command} output, value_{i}_{command}" for i in range(60))


def _run(replies: list[AIMessage], tools: list[Any], policy: ContextPolicy) -> Views:
    views = Views()
    model = scripted_model(replies, window=8_000)
    agent = create_agent(
        model, tools, middleware=[*context_middleware(policy=policy), views], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    return views


def test_clearing_prefers_a_superseded_result_over_an_older_one() -> None:
    calls = ["ls -la", "pytest -q", "cat a.py", "cat b.py", "pytest -q", "cat c.py", "cat d.py", "cat e.py"]
    messages: list[Any] = [HumanMessage("go")]
    for i, command in enumerate(calls):
        messages.append(AIMessage("", tool_calls=[{"name": "bash", "args": {"command": command}, "id": f"c{i}"}]))
        messages.append(ToolMessage(bash.invoke({"command": command}), tool_call_id=f"c{i}", name="bash"))
    layer = ClearLayer(ContextPolicy(keep_tool_results=3), METER)
    order = [call_id for kind, call_id, _saving in layer._candidates(messages, Boundary(), NO_MASK) if kind == "result"]
    assert order[0] == "c1"  # the first `pytest -q` was run again later: it goes first
    assert order[1:] == ["c0", "c2", "c3", "c4"]  # then oldest first; the newest three stay


def test_keep_tool_results_keeps_every_result_when_there_are_fewer() -> None:
    replies = [
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": 1}, "id": "p1"}]),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": 2}, "id": "p2"}]),
        AIMessage("done"),
    ]
    policy = ContextPolicy(
        keep_tool_results=2, clear_at=0.05, clear_to=0.02, summarize_at=0.99, clear_min_batch_share=0.001
    )
    views = _run(replies, [fetch], policy)
    for view in views.views:
        for message in view:
            if isinstance(message, ToolMessage):
                assert not str(message.content).startswith("[cleared"), message.content[:80]


def test_clearing_takes_a_result_whose_details_are_shown_again_before_an_older_one() -> None:
    def turn(call_id: str, command: str, output: str, text: str = "") -> list[Any]:
        call = AIMessage(text, tool_calls=[{"name": "bash", "args": {"command": command}, "id": call_id}])
        return [call, ToolMessage(output + "\n" + "filler line\n" * 80, tool_call_id=call_id, name="bash")]

    messages: list[Any] = [
        HumanMessage("go"),
        *turn("old", "ls", "only_here_detail_alpha"),
        *turn("echoed", "cat notes", "repeated_detail_beta"),
        *turn("n1", "pwd", "x"),
        *turn("n2", "whoami", "y", text="repeated_detail_beta is what matters"),
        *turn("n3", "date", "z"),
        *turn("n4", "uptime", "w"),
    ]
    layer = ClearLayer(ContextPolicy(), METER)
    layer._thread = messages  # the thread whose token ledger ranks the candidates
    order = [call_id for kind, call_id, _saving in layer._candidates(messages, Boundary(), NO_MASK) if kind == "result"]
    assert order.index("echoed") < order.index("old")  # its one detail is still in view later: it goes first


def test_a_clipped_argument_keeps_its_first_line_and_the_recall_pointer() -> None:
    script = "cat <<'EOF' > /testbed/reproduce_issue.py\n" + "print('ok')\n" * 60 + "EOF"
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": script}, "id": "w1"}])
    clipped = args_placeholder(call, {"w1"}).tool_calls[0]["args"]["command"]
    assert clipped.splitlines()[1] == "cat <<'EOF' > /testbed/reproduce_issue.py"  # the path it wrote stays in view
    assert 'recall(call_id="w1", part="args")' in clipped
    assert "print('ok')" not in clipped  # a line without a distinctive name is not worth its tokens


def test_a_clipped_script_keeps_the_line_that_writes_a_file_byte_stable() -> None:
    body = [f"    value_{i} = {i} + {i}" for i in range(80)]
    body[37] = "    config = FluffConfig(overrides={'dialect': 'ansi'}, templater_obj=JinjaTemplater())"
    script = "\n".join(
        [
            "cd /testbed && cat > /tmp/fix_refs.py << 'EOF'",
            "import re",
            "def main():",
            *body,
            "    with open('/testbed/src/sqlfluff/core/linter.py', 'w') as f:",
            "        f.write(content)",
            "EOF",
            "python /tmp/fix_refs.py",
        ]
    )
    call = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": script}, "id": "w2"}])
    clipped = args_placeholder(call, {"w2"}).tool_calls[0]["args"]["command"]
    kept = clipped.splitlines()
    assert kept[0].startswith("[clipped ")
    assert 'recall(call_id="w2", part="args")' in kept[0]
    assert "cd /testbed && cat > /tmp/fix_refs.py << 'EOF'" in kept
    assert "    with open('/testbed/src/sqlfluff/core/linter.py', 'w') as f:" in kept  # the file it writes
    assert body[37] not in kept  # the rest of the script is recalled by id, not kept
    original = set(script.splitlines())
    assert all(line in original or line == GAP for line in kept[1:])  # whole verbatim lines and gap marks only
    assert len(clipped) < len(script) / 2
    assert args_placeholder(call, {"w2"}).tool_calls[0]["args"]["command"] == clipped  # byte-stable


def _clear_layer(middleware: list[Any]) -> ClearLayer:
    core = cast(ContextWindowMiddleware, middleware[0])
    return next(layer for layer in core.layers if isinstance(layer, ClearLayer))


def test_a_resumed_process_shows_the_same_gists_without_reading_the_thread_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gist depends on everything the thread showed before the result; a new worker resuming a long thread must not
    weigh all of it again on its first call. The boundary keeps each gist's lines, and the view is rebuilt from them."""
    steps = [
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"run {i}"}, "id": f"b{i}"}]) for i in range(8)
    ]
    checkpointer = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "resumed"}}
    first_views, later_views = Views(), Views()
    policy = ContextPolicy(clear_at=0.5, clear_to=0.3, summarize_at=0.95)
    first = create_agent(
        scripted_model([*steps, AIMessage("paused")], window=8_000),
        [bash],
        middleware=[*context_middleware(policy=policy), first_views],
        checkpointer=checkpointer,
    )
    first.invoke({"messages": [HumanMessage("go")]}, config)
    state = first.get_state(config).values
    stored = Boundary.from_state(state).gists
    cleared = Boundary.from_state(state).results
    assert cleared
    assert set(cleared) <= set(stored)  # every cleared result's lines are kept with the boundary
    shown = {m.tool_call_id: m.content for m in first_views.views[-1] if isinstance(m, ToolMessage)}

    middleware = context_middleware(policy=policy)  # a new process: new layers, nothing measured yet
    later = create_agent(
        scripted_model([AIMessage("done")], window=8_000),
        [bash],
        middleware=[*middleware, later_views],
        checkpointer=checkpointer,
    )
    gisted: list[str] = []  # the texts gisted on the call's thread (a batch the call clears may gist its own)
    made = clear_module.gist

    def recorded(text: str, *args: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            gisted.append(text)
        return made(text, *args)

    monkeypatch.setattr(clear_module, "gist", recorded)
    later.invoke({"messages": [HumanMessage("go on")]}, config)
    resumed = {m.tool_call_id: m.content for m in later_views.views[0] if isinstance(m, ToolMessage)}
    assert all(resumed[call_id] == shown[call_id] for call_id in cleared)  # the same bytes: the cache holds
    assert all(str(resumed[call_id]).startswith("[cleared, ") for call_id in cleared)
    originals = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    assert not {originals[call_id] for call_id in cleared} & set(gisted)  # rendered from the stored lines


LISTING = [
    "total 156",
    "drwxrwxrwx   2 root root  4096 Oct 24  2024 .",
    "drwxrwxrwx 215 root root 12288 Oct 24  2024 ..",
    *(
        f"-rw-r--r--   1 root root  {size:>5} Oct 24  2024 test_{name}.py"
        for name, size in [
            ("static", 12776), ("migrations", 18117), ("utils", 3641), ("csrf", 19106), ("database", 8470),
            ("forms", 729), ("templates", 24259), ("views", 7401), ("urls", 13674), ("storage", 9458),
            ("auth", 6266), ("security", 28724), ("translation", 25391), ("sitemaps", 13061),
            ("sessions", 5529), ("admin", 25266),
        ]
    ),
]  # fmt: skip


def test_a_gist_chooses_the_same_lines_in_every_process() -> None:
    """Lines of equal worth are told apart by sums over their tokens: summed in a set's order, which string hashing
    makes differ from process to process, two workers (or a bench run and its rerun) quoted different lines."""
    script = (
        "import json, sys\n"
        "from ctxwarden.core.gist import gist\n"
        "print(gist('\\n'.join(json.load(sys.stdin)), 130, lambda line: len(line) // 4 + 1).chosen)\n"
    )
    listing = json.dumps(LISTING)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        )
        for seed in range(6)
    ]
    chosen = {worker.communicate(listing, timeout=120)[0] for worker in workers}
    assert all(worker.returncode == 0 for worker in workers)
    assert len(chosen) == 1, chosen
