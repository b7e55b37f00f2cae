"""A window the system prompt and the tool schemas mostly fill: every call stays inside it, and nothing is lost.

Beside a deep agent's tools (2,700 tokens of schemas) and a 2,700-token system prompt, an 8k window leaves 2,600
tokens. The summary was sized from the window (1,900 tokens, its facts quoting log lines) and a lone `recall` page was
8,000 characters (2,300 tokens), so 26 of the 31 calls of the session below went out past the window, and no fold could
help: every fold was the one that overflowed. Now a fold's summary fits the room it leaves (`fold.fit`), and the
newest step's results share half of the room the fixed prompt leaves (`clip.room`).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, create_context_agent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import stamps
from ctxwarden.fold.facts import Facts, render
from ctxwarden.fold.fit import facts_within
from ctxwarden.fold.plan import Gathered
from ctxwarden.fold.state import Folds
from ctxwarden.replay import scripted_model

WINDOW = 8_000
SYSTEM = "You are careful. " * 675  # about 2,700 tokens


def _log(command: str) -> str:
    return "\n".join(
        f"{k}: 2026-11-27 00:{k % 60:02d}:13 worker_{k % 7} processed batch_{k} in {k * 37 % 997} ms ({command})"
        for k in range(60)
    )


@tool
def sh(command: str) -> str:
    """Run a shell command."""
    return _log(command)


def _replies(steps: int) -> list[AIMessage]:
    """Two commands, then a recall of the first of them, and again."""
    out = []
    for i in range(steps):
        if i % 3 == 2:
            call = {"name": "recall", "args": {"call_id": f"c{i - 2}"}, "id": f"r{i}"}
        else:
            call = {"name": "sh", "args": {"command": f"grep -n batch_{i} /var/log/w{i % 7}.log"}, "id": f"c{i}"}
        out.append(AIMessage(f"Checking {i}.", tool_calls=[call]))
    return [*out, AIMessage("done")]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_every_call_stays_inside_a_window_the_fixed_prompt_mostly_fills(tmp_path: Path, run: str) -> None:
    model = scripted_model(_replies(30), window=WINDOW)
    agent = create_context_agent(model, [sh], state_dir=tmp_path, summarizer=DETERMINISTIC, system_prompt=SYSTEM)
    config: Any = {"configurable": {"thread_id": f"tight-{run}"}, "recursion_limit": 200}
    state = {"messages": [HumanMessage("Find why batch processing slows down after midnight.")]}
    out = agent.invoke(state, config) if run == "sync" else asyncio.run(agent.ainvoke(state, config))
    folds = Folds.from_state(agent.get_state(config).values).records
    agent.checkpointer.conn.close()

    assert out["messages"][-1].content == "done"
    recorded = stamps(out["messages"])
    assert len(recorded) == 31
    assert recorded[0]["system_tokens"] + recorded[0]["tool_schema_tokens"] > WINDOW * 0.6
    over = [s["fraction"] for s in recorded if s["fraction"] > 1]
    assert over == []  # before: 26 of 31 calls past the window
    assert len(folds) > 1
    for message in out["messages"]:  # each command's log is whole in the thread, or in the file its marker names
        if isinstance(message, ToolMessage) and message.name == "sh":
            record = message.response_metadata.get("ctxwarden", {})
            kept = (tmp_path / record["path"].lstrip("/")).read_text() if record.get("evicted") else message.content
            step = int(message.tool_call_id[1:])
            assert kept == _log(f"grep -n batch_{step} /var/log/w{step % 7}.log")


def test_a_lone_recall_pages_through_the_room_the_fixed_prompt_leaves(tmp_path: Path) -> None:
    first = AIMessage("", tool_calls=[{"name": "sh", "args": {"command": "cat big.log"}, "id": "c0"}])
    pages = [
        AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "c0", "page": n}, "id": f"p{n}"}])
        for n in (1, 2)  # 4,500 characters: two pages beside this fixed prompt (before: one)
    ]
    model = scripted_model([first, *pages, AIMessage("done")], window=WINDOW)
    agent = create_context_agent(model, [sh], state_dir=tmp_path, summarizer=DETERMINISTIC, system_prompt=SYSTEM)
    out = agent.invoke({"messages": [("user", "read the log")]}, {"configurable": {"thread_id": "pages"}})
    agent.checkpointer.conn.close()

    answers = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "recall"]
    stamp = stamps(out["messages"])[0]
    room = (WINDOW - stamp["system_tokens"] - stamp["tool_schema_tokens"]) // 2
    meter = TokenMeter()
    assert all(meter.counter(str(m.content)) <= room for m in answers)  # before: the whole log on one page
    note = re.compile(r"\n\[ctxwarden: characters [\d,]+-[\d,]+ of [\d,]+(; page=\d+ for the rest)?\]$")
    notes = [note.search(str(m.content)) for m in answers]
    assert all(notes)
    joined = "".join(str(m.content)[: found.start()] for m, found in zip(answers, notes, strict=True) if found)
    assert joined.rstrip("\n") == _log("cat big.log")  # page after page, the whole log and nothing else
    assert all(s["fraction"] <= 1 for s in stamps(out["messages"]))


def test_facts_cut_to_fit_keep_the_latest_user_message_and_every_file_written() -> None:
    counter = TokenMeter().counter
    facts = Facts(
        users=["- first ask", "- the latest ask: fix the worker"],
        files=["- /src/worker.py"],
        failures=["- ERROR: timeout at batch_7"],
        used=[f"- {k}: worker_{k % 7} processed batch_{k} in {k * 37 % 997} ms" for k in range(80)],
    )
    text = render(facts, max_chars=4_000)
    gathered = Gathered(facts, text)
    cut = facts_within(gathered, 300, counter)
    assert counter(cut.quoted) <= counter(text) - 300
    assert "the latest ask: fix the worker" in cut.quoted
    assert "/src/worker.py" in cut.quoted
    assert "ERROR: timeout at batch_7" in cut.quoted
    assert cut.facts.used == facts.used[len(facts.used) - len(cut.facts.used) :]  # the newest lines stay
    floor = facts_within(gathered, 10**6, counter)  # more than the whole: its floor
    assert "the latest ask: fix the worker" in floor.quoted
    assert "/src/worker.py" in floor.quoted
