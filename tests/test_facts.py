"""Folds keep facts: the user's words, files written, failures and the lines used survive every fold verbatim."""

from __future__ import annotations

from pathlib import Path

from deepagents.backends import FilesystemBackend
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.clip.placeholders import args_lines
from ctxwarden.fold.facts import FACTS_HEADING, Facts, error_line, gather, quoted, render, written_paths
from ctxwarden.replay import scripted_model

TASK = "Fix the resolver.\nKeep the public API unchanged.\nRun the tests with pytest -q before you finish."
ERROR = "AssertionError: expected 17 nodes, found 16"


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    if command.startswith("pytest"):
        return "\n".join(["collected 3 items", "tests/test_graph.py F", ERROR, "1 failed, 2 passed in 0.4s"])
    return f"$ {command}\n" + "filler line of output for the window\n" * 40


def _call(command: str, call_id: str) -> AIMessage:
    return AIMessage(f"Next: {command}", tool_calls=[{"name": "bash", "args": {"command": command}, "id": call_id}])


def test_written_paths_reads_file_tools_and_shell_writes() -> None:
    message = AIMessage(
        "",
        tool_calls=[
            {"name": "write_file", "args": {"file_path": "/src/a.py", "content": "x"}, "id": "1"},
            {"name": "bash", "args": {"command": "cat <<'EOF' > /testbed/fix.py\nprint(1)\nEOF"}, "id": "2"},
            {"name": "bash", "args": {"command": "sed -i 's/old/new/' src/b.py && echo ok 2>&1"}, "id": "3"},
            {"name": "bash", "args": {"command": "echo hi | tee -a notes.txt > /dev/null"}, "id": "4"},
        ],
    )
    assert written_paths(message) == ["/src/a.py", "/testbed/fix.py", "src/b.py", "notes.txt"]


def test_a_quoted_greater_than_is_data_not_a_redirection() -> None:
    """A version pin or a comparison in quotes wrote no file `=1.14` or `0.5`; `sh -c`'s quoted script is shell."""
    command = "\n".join(
        [
            'pip install "wrapt>=1.11,<1.14" && python -c "print(x > 0.5)"',
            "pip install 'setuptools>=66' > pip.log 2>&1",
            'echo "a > b" > notes.md',
            "bash -c 'echo 1 > out/b.txt'",
        ]
    )
    message = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": command}, "id": "1"}])
    assert written_paths(message) == ["pip.log", "notes.md", "out/b.txt"]


def test_a_heredoc_body_is_its_commands_data_not_shell() -> None:
    command = "\n".join(
        [
            "cat > check.py << 'EOF'",
            "if result.index(a) > result.index(b):",  # a comparison in the script being written, not a redirection
            "    print(a, file=sys.stderr) >> counted",
            'with open("out.txt", "w") as f:',  # the script writes this file when it runs
            "EOF",
            "python check.py > log.txt",
            "bash << 'SH'",  # a heredoc that feeds a shell is shell
            "echo hi > shell_out.txt",
            "SH",
            'python -c "print(1 << n)" > shifted.txt',  # a shift, never closed: not a heredoc
            "echo done >> final.log",
        ]
    )
    message = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": command}, "id": "1"}])
    assert written_paths(message) == ["check.py", "out.txt", "log.txt", "shell_out.txt", "shifted.txt", "final.log"]
    kept = [command.splitlines()[i] for i in args_lines(command.splitlines())]
    assert "if result.index(a) > result.index(b):" not in kept
    assert 'with open("out.txt", "w") as f:' in kept
    assert "echo done >> final.log" in kept


def test_error_line_is_the_last_failure_line_verbatim() -> None:
    output = "Traceback (most recent call last):\n  File 'x.py', line 3\nValueError: bad value 12\nexit 1"
    assert error_line(output) == "ValueError: bad value 12"
    assert error_line("all good\n3 passed") is None


def test_facts_mark_a_failure_fixed_when_the_same_command_passes_later() -> None:
    folded = [
        HumanMessage(TASK),
        _call("pytest -q", "a"),
        ToolMessage(f"{ERROR}\n1 failed", tool_call_id="a"),
        _call("pytest -q", "b"),
        ToolMessage("3 passed", tool_call_id="b"),
    ]
    facts = gather(Facts(), folded)
    assert facts.failures == [f"pytest -q\n{ERROR}\n(a later run of it passed)"]
    text = render(facts, max_chars=10_000)
    assert text.startswith(FACTS_HEADING)
    assert TASK in text


def test_facts_are_capped_by_worth_and_keep_the_latest_user_message() -> None:
    facts = Facts(
        users=["old request " * 50, TASK],
        files=["/src/a.py", "/src/b.py"],
        failures=[f"pytest -q\n{ERROR}"],
        used=[f"line {i} with detail_{i}" for i in range(100)],
    )
    text = render(facts, max_chars=400)
    assert TASK in text  # the latest user message never goes
    assert "/src/a.py" in text  # paths are small and always kept
    assert "/src/b.py" in text
    assert ERROR in text  # the latest failure too
    assert "old request" not in text  # an older user message longer than the cap goes
    assert "line 0 with detail_0" not in text  # the lines the agent used go first, oldest first
    roomy = render(facts, max_chars=100_000)
    assert "line 0 with detail_0" in roomy
    assert "old request" in roomy


def test_an_older_user_message_is_not_crowded_out_by_the_other_facts() -> None:
    task = "\n".join(f"Requirement {i}: the resolver must handle case_{i} without a crash." for i in range(6))
    facts = Facts(
        users=[task, "Tool call error: use the bash tool."],
        files=[f"/tmp/scratch_{i}.py" for i in range(20)],
        failures=[f"python repro_{i}.py\n{ERROR}" for i in range(5)],
        used=[f"line {i} with detail_{i}" for i in range(50)],
    )
    cap = len(task) + 20  # the task fits the cap on its own, not with the files and failures beside it
    text = render(facts, max_chars=cap)
    for line in task.splitlines():  # every line of the task, verbatim
        assert line in text.splitlines()
    assert "Tool call error: use the bash tool." in text
    assert "/tmp/scratch_19.py" in text  # what always stays, stays
    assert f"python repro_4.py\n{ERROR}" in text
    assert "python repro_0.py" not in text  # the rest gives way
    assert "detail_0" not in text
    assert render(facts, max_chars=cap) == text  # same facts, same bytes


def test_the_last_outputs_folded_give_the_lines_with_the_most_names_not_yet_written() -> None:
    listing = [f"    register_handler(kind='common', priority={i})" for i in range(30)]
    listing[7] = "    def resolve_symlink_chain(entry_point, max_depth_limit):"  # new names, seen on one line
    listing[21] = "    cache_invalidation_epoch = compute_epoch(manifest_digest)"
    folded = [
        HumanMessage(TASK),
        _call("grep -n register src/registry.py", "early"),
        ToolMessage("\n".join(f"src/registry.py:{i}: early_handler_{i}()" for i in range(40)), tool_call_id="early"),
        _call("git status", "status"),
        ToolMessage("nothing to commit, working tree clean", tool_call_id="status"),
        _call("ls src", "ls"),
        ToolMessage("loader.py\nregistry.py", tool_call_id="ls"),
        _call("cat src/loader.py", "last"),
        ToolMessage("\n".join(listing), tool_call_id="last"),
        AIMessage("I will read the loader's register_handler next."),
    ]
    facts = gather(Facts(), folded)
    # the last output's lines that show names the agent has not written, whole and verbatim
    assert "    def resolve_symlink_chain(entry_point, max_depth_limit):" in facts.used
    assert "    cache_invalidation_epoch = compute_epoch(manifest_digest)" in facts.used
    # a name on every line (register_handler, written by the agent too) is one detail, not thirty
    assert sum("register_handler" in line for line in facts.used) <= 1
    # an output folded long before the last ones gives only the lines the agent went on to use (none here)
    assert not any("early_handler_" in line for line in facts.used)
    text = render(facts, max_chars=10_000)
    assert "### Output lines the agent used or may need" in text
    assert "    def resolve_symlink_chain(entry_point, max_depth_limit):" in text.splitlines()


def test_the_facts_section_survives_two_folds(tmp_path: Path) -> None:
    replies = [
        AIMessage(
            "Writing the fix.",
            tool_calls=[{"name": "write_file", "args": {"file_path": "/src/resolver.py", "content": "x"}, "id": "w"}],
        ),
        _call("pytest -q", "t1"),
        *(_call(f"echo step {i}", f"s{i}") for i in range(60)),
        AIMessage("done"),
    ]

    @tool
    def write_file(file_path: str, content: str) -> str:
        """Write a file."""
        return f"wrote {file_path}"

    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    policy = ContextPolicy(window=3_000, fold_keep_share=0.05)
    middleware = context_middleware(policy=policy, backend=backend, summarizer="deterministic")
    agent = create_agent(
        scripted_model(replies, window=3_000), [bash, write_file], middleware=middleware, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "facts"}}
    out = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    records = agent.get_state(config).values["ctxwarden_fold"]["records"]
    assert len(records) >= 2
    last = records[-1]["summary"]
    assert records[-1]["pinned"] == out["messages"][0].id  # the user's words, verbatim, shown above the summary
    assert TASK not in last
    assert "/src/resolver.py" in last  # the file written before the first fold
    assert ERROR in last.splitlines()  # the failing command's error line, whole
    assert records[-1]["facts"]["files"] == ["/src/resolver.py"]


def test_a_fold_keeps_each_folded_outputs_gist_as_clearing_would(tmp_path: Path) -> None:
    """A cleared result still shows its telling lines; a fold must not take them away: each folded output gives the
    facts the lines clearing would keep of it, whole and verbatim, though the agent never wrote their names."""
    telling = "src/pkg/alias_table.py:412: ALIAS_RESOLUTION_LIMIT = resolve_depth_ceiling(64)"
    error = "ValueError: alias chain 'legacy_shim' exceeds ALIAS_RESOLUTION_LIMIT"

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if command == "grep -rn ALIAS src":
            return "\n".join([*(f"src/pkg/mod_{i}.py:{i}: pass" for i in range(15)), telling])
        if command == "python check.py":
            return "\n".join(["checking aliases", *("ok" for _ in range(30)), error])
        return f"$ {command}\n" + "filler line of output for the window\n" * 40

    def step(command: str, call_id: str) -> AIMessage:
        return AIMessage("Next.", tool_calls=[{"name": "shell", "args": {"command": command}, "id": call_id}])

    replies = [
        step("grep -rn ALIAS src", "g"),
        step("python check.py", "c"),
        *(step(f"echo step {i}", f"s{i}") for i in range(30)),
        AIMessage("done"),
    ]
    policy = ContextPolicy(window=3_000, fold_keep_share=0.05)
    middleware = context_middleware(policy=policy, state_dir=tmp_path, summarizer="deterministic")
    agent = create_agent(
        scripted_model(replies, window=3_000), [shell], middleware=middleware, checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage(TASK)]}, {"configurable": {"thread_id": "gists"}})
    records = agent.get_state({"configurable": {"thread_id": "gists"}}).values["ctxwarden_fold"]["records"]
    assert records  # the fold took the two outputs with many after them: not among the last it read
    lines = records[-1]["summary"].splitlines()
    assert telling in lines  # the grep hit with new names: whole, as the output showed it
    assert error in lines
    assert telling in records[-1]["facts"]["used"]
    # the record keeps what the section quotes, no more: it stays bounded however many outputs were folded
    assert set(records[-1]["facts"]["used"]) <= set(lines)
    assert not any(line.startswith("[ctxwarden:") for line in records[-1]["facts"]["used"])


def test_the_record_keeps_only_what_the_section_quotes() -> None:
    """Every fold extends the facts; what the cap drops is older than all that follows, so it is never quoted again:
    the record keeps the quoted facts only, and stays bounded over any number of folds."""
    facts = Facts(
        users=["Fix the resolver.", "Keep the API."],
        files=["/src/a.py"],
        failures=["pytest -q\nE   boom", "pytest -q\nE   bang"],
        used=[f"resolved_alias_{i} = lookup_table_{i}(depth={i})" for i in range(500)],
    )
    kept = quoted(facts, max_chars=2_000)
    assert render(kept, max_chars=2_000) == render(facts, max_chars=2_000)  # the same section
    assert 0 < len(kept.used) < 100
    assert kept.used == facts.used[-len(kept.used) :]  # the newest lines, in order
    assert (kept.users, kept.files, kept.failures) == (facts.users, facts.files, facts.failures)
