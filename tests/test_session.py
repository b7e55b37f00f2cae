"""The session: one checkpointed thread, model switches both ways, /context, /compact, forks, resume."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, ContextPolicy, CtxwardenError, ForkError, Session, create_context_agent
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore
from pages import fetch, steps


def _stamp(values: dict[str, Any]) -> dict[str, Any]:
    return values["messages"][-1].response_metadata["ctxwarden"]


def test_invoke_stream_and_async_on_one_thread(state_dir: Path) -> None:
    with Session(scripted_model(["one", "two", "three", "four"], window=32_000), state_dir=state_dir) as session:
        assert session.invoke("hi")["messages"][-1].content == "one"
        chunks = list(session.stream("again", stream_mode="updates"))
        assert any("model" in chunk for chunk in chunks)
        assert [m.content for m in session.messages] == ["hi", "one", "again", "two"]


async def test_async_session(state_dir: Path) -> None:
    with Session(scripted_model(["one", "two"], window=32_000), state_dir=state_dir) as session:
        values = await session.ainvoke("hi")
        assert values["messages"][-1].content == "one"
        seen = [chunk async for chunk in session.astream("more", stream_mode="updates")]
        assert seen
        report = await session.acontext()
        assert report.calls == 2


def test_switching_to_a_small_window_and_back(state_dir: Path) -> None:
    big = scripted_model([*steps(16), AIMessage("big done"), AIMessage("big again")], window=200_000, name="big")
    small = scripted_model(["small done"], window=8_000, name="small")
    policy = ContextPolicy(clear_call_text=False)  # clearing alone cannot bring THOUGHT under the small window
    with Session(big, [fetch], state_dir=state_dir, summarizer=DETERMINISTIC, policy=policy) as session:
        session.invoke("read every page")
        before = session.context()
        assert before.window == 200_000
        assert before.used > 8_000  # the thread no longer fits the small model as it is

        session.switch_model(small)
        assert session.context().gauge == "critical"  # /context already measures against the new window
        stamp = _stamp(session.invoke("now summarize"))
        assert (stamp["model"], stamp["window"]) == ("small", 8_000)
        assert stamp["input_tokens"] <= 8_000
        assert "context_compaction" in stamp["events"]  # folded before the call instead of overflowing

        session.switch_model(big)
        stamp = _stamp(session.invoke("and continue"))
        assert (stamp["model"], stamp["window"]) == ("big", 200_000)
        switches = TraceStore(state_dir / "trace.sqlite").events(kind="model_switch")
        assert [(e.payload["from_model"], e.payload["to_model"]) for e in switches] == [
            ("big", "small"),
            ("small", "big"),
        ]


def test_a_run_picks_its_model_from_its_context(state_dir: Path) -> None:
    big = scripted_model(["from big"], window=200_000, name="big")
    small = scripted_model(["from small"], window=8_000, name="small")
    agent = create_context_agent(big, state_dir=state_dir, models={"big": big, "small": small})
    config = {"configurable": {"thread_id": "picked"}}
    out = agent.invoke({"messages": [HumanMessage("hi")]}, config, context={"model": "small"})
    assert out["messages"][-1].content == "from small"
    assert (_stamp(out)["model"], _stamp(out)["window"]) == ("small", 8_000)
    out = agent.invoke({"messages": [HumanMessage("hi")]}, config)  # no pick: the agent's own model
    assert _stamp(out)["model"] == "big"
    with pytest.raises(
        CtxwardenError, match=r"context\['model'\]='medium' is not one of the models given \(big, small\)"
    ):
        agent.invoke({"messages": [HumanMessage("hi")]}, config, context={"model": "medium"})
    agent.checkpointer.conn.close()


RESUME = textwrap.dedent(
    """
    import sys
    from ctxwarden import Session
    from ctxwarden.replay import scripted_model

    with Session(scripted_model(["second answer"], window=8000), state_dir=sys.argv[1], thread_id="kept") as s:
        values = s.invoke("second question")
        print("|".join(str(m.content) for m in values["messages"]))
    """
)


def test_reopening_the_state_dir_in_a_new_process_resumes_the_thread(state_dir: Path) -> None:
    with Session(scripted_model(["first answer"], window=8_000), state_dir=state_dir, thread_id="kept") as session:
        session.invoke("first question")
    done = subprocess.run([sys.executable, "-c", RESUME, str(state_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "first question|first answer|second question|second answer"
    with Session(scripted_model([], window=8_000), state_dir=state_dir, thread_id="kept") as again:
        assert len(again.messages) == 4
        assert again.context().calls == 2


def test_compact_from_the_session(state_dir: Path) -> None:
    model = scripted_model([*steps(4), AIMessage("done"), AIMessage("after")], window=200_000)
    with Session(model, [fetch], state_dir=state_dir, summarizer=DETERMINISTIC) as session:
        session.invoke("go")
        record = session.compact("keep the page numbers")
        assert record is not None
        assert session.context().categories["summary"] > 0
        assert session.invoke("next")["messages"][-1].content == "after"


def _snapshot(session: Session) -> str:
    values = session.agent.get_state(session.config).values
    checkpoints = list(session.checkpointer.list(session.config))
    return json.dumps(
        {
            "messages": messages_to_dict(values["messages"]),
            "private": {k: v for k, v in values.items() if k.startswith("ctxwarden")},
            "checkpoints": [c.config["configurable"]["checkpoint_id"] for c in checkpoints],
        },
        sort_keys=True,
        default=str,
    )


def test_fork_chosen_turns_and_folds(state_dir: Path) -> None:
    replies = [*steps(3), AIMessage("first done"), AIMessage("second done"), *steps(2, 10), AIMessage("third done")]
    with Session(scripted_model(replies, window=200_000), [fetch], state_dir=state_dir, summarizer=DETERMINISTIC) as s:
        s.invoke("first task")
        s.invoke("second task")
        s.compact()
        s.invoke("third task")
        units = s.units()
        kinds = [u.kind for u in units]
        # compact keeps only the last step, so fold 1 ends inside the second turn
        assert kinds == ["turn", "fold", "turn", "turn"]
        assert units[0].first_words == "first task"
        assert all(u.tokens > 0 for u in units)
        before = _snapshot(s)

        forked = s.fork([2, 3], thread_id="second-and-third", model=scripted_model(["forked reply"], window=200_000))
        seeded = [m.content for m in forked.messages]
        assert seeded[0] == "second task"
        assert "third task" in seeded
        assert "first task" not in seeded
        assert forked.invoke("go on")["messages"][-1].content == "forked reply"
        forked.close()

        with_fold = s.fork([1, 3], model=scripted_model([], window=200_000))
        assert with_fold.messages[0].content == "first task"  # the fold kept it above its summary: it comes along
        assert with_fold.messages[1].content.startswith("[ctxwarden: summary of fold 1")
        assert with_fold.messages[2].content == "third task"
        with_fold.close()

        with pytest.raises(ForkError, match=r"unit 1 \(fold 1\) already covers unit 0"):
            s.fork([0, 1])
        with pytest.raises(ForkError, match=r"unit 1 \(fold 1\) already covers unit 2"):
            s.fork([1, 2])
        with pytest.raises(ForkError, match=r"unit\(s\) \[9\] do not exist"):
            s.fork([9])
        assert _snapshot(s) == before  # the source thread is exactly as it was


def test_threads_command_lists_size_and_gauge(state_dir: Path) -> None:
    with Session(scripted_model(["a"], window=8_000, name="tiny"), state_dir=state_dir, thread_id="alpha") as s:
        s.invoke("hello")
    done = subprocess.run(
        [sys.executable, "-m", "ctxwarden", "threads", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "alpha" in done.stdout
    assert "tiny" in done.stdout
    assert "8,000" in done.stdout
    assert any(level in done.stdout for level in ("ok", "warn", "critical"))
    missing = subprocess.run(
        [sys.executable, "-m", "ctxwarden", "threads", "--state-dir", str(state_dir / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert "no checkpoints at" in missing.stderr


def test_a_turn_still_waiting_for_a_tool_result_cannot_seed_a_fork() -> None:
    from ctxwarden.curate import list_units, seed_messages

    messages = [
        HumanMessage("do it", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "fetch", "args": {"page": 1}, "id": "pending"}]),
    ]
    assert [u.kind for u in list_units(messages, {})] == ["turn"]
    with pytest.raises(ForkError, match=r"ends with tool calls that have no result yet \(\['pending'\]\)"):
        seed_messages(messages, {}, [0], "source")
    with pytest.raises(ForkError, match="choose at least one unit"):
        seed_messages(messages, {}, [], "source")


@pytest.mark.parametrize(("durability", "saved_before_the_tool"), [(None, True), ("exit", False)])
def test_each_step_is_checkpointed_before_the_next_runs(
    state_dir: Path, durability: str | None, saved_before_the_tool: bool
) -> None:
    """A process killed inside a tool then resumes after the model call that asked for it, not before."""
    seen: list[bool] = []

    @tool
    def probe(page: int) -> str:
        """Look at what the checkpoint holds while the tool runs."""
        saved = session.agent.get_state(session.config).values.get("messages", [])
        seen.append(any(getattr(m, "tool_calls", None) for m in saved))
        return "ok"

    call = AIMessage("", tool_calls=[{"name": "probe", "args": {"page": 1}, "id": "p1"}])
    session = Session(scripted_model([call, AIMessage("done")], window=32_000), [probe], state_dir=state_dir)
    session.invoke("go", **({"durability": durability} if durability else {}))
    session.close()
    assert seen == [saved_before_the_tool]
