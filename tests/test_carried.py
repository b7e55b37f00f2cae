"""The gists made ahead for the next mask advance travel in the thread's state to the process that resumes it."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from ctxwarden import ContextPolicy, context_middleware
from ctxwarden.clip import CLIP_STATE_KEY, carried, clear, pregist
from ctxwarden.clip.carried import AHEAD_KEY, NOTHING, Carried
from ctxwarden.clip.ledger import TokenLedger
from ctxwarden.clip.pregist import Pregists
from ctxwarden.replay import scripted_model
from views import Views

POLICY = ContextPolicy.cost_first(mask_after_turns=2, window=128_000)
CONFIG = {"configurable": {"thread_id": "carried"}}


@tool
def listing(page: int) -> str:
    """List the handlers of a page: every line names new things."""
    return "\n".join(f"src/mod_{page}_{i}.py:{i * 7}: def handler_{page}_{i}(request_{page}_{i}):" for i in range(40))


def _replies(first: int, steps: int) -> list[AIMessage]:
    calls = [[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}] for i in range(first, first + steps)]
    return [*(AIMessage("", tool_calls=call) for call in calls), AIMessage("done")]


def _agent(connection: sqlite3.Connection, replies: list[AIMessage], views: Views | None = None) -> Any:
    """An agent built anew on the thread checkpointed in `connection` (a process resuming the thread)."""
    return create_agent(
        scripted_model(replies, window=128_000),
        [listing],
        middleware=[*context_middleware(policy=POLICY), *([views] if views is not None else [])],
        checkpointer=SqliteSaver(connection),
    )


def _run(path: Path, ask: str, replies: list[AIMessage], views: Views | None = None) -> Any:
    """One run on the thread checkpointed in `path`, by an agent built anew; the thread's state after it."""
    with closing(sqlite3.connect(path, check_same_thread=False)) as connection:
        agent = _agent(connection, replies, views)
        agent.invoke({"messages": [HumanMessage(ask)]}, CONFIG)
        return agent.get_state(CONFIG).values


def _made_on_the_call(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[int]]:
    """The results whose gist a call made itself, and how many messages a call indexed in the token ledger."""
    gists: list[str] = []
    indexed: list[int] = []
    for module in (clear, pregist):
        original = module.gist

        def recorded(text: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                gists.append(text.splitlines()[0])
            return _original(text, *args, **kwargs)

        monkeypatch.setattr(module, "gist", recorded)
    sync = TokenLedger._sync

    def watched(self: TokenLedger, messages: Any) -> None:
        before = self.size
        sync(self, messages)
        if threading.current_thread() is threading.main_thread():
            indexed.append(self.size - before)

    monkeypatch.setattr(TokenLedger, "_sync", watched)
    return gists, indexed


@pytest.fixture
def ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cost-first thread whose model took long enough, on every call, for the gists to be made ahead."""
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    path = tmp_path / "checkpoints.sqlite"
    _run(path, "go", _replies(0, 9))
    monkeypatch.undo()
    return path


def test_the_next_advance_s_gists_are_carried_in_the_state(ran: Path) -> None:
    state = _run(ran, "look", [AIMessage("nothing to do")])  # a call that hands nothing new: the state stands
    ahead = Carried.from_state(state)
    assert ahead.entries
    assert set(ahead.entries) <= {f"l{i}" for i in range(9)}
    assert all(len(entry[4]) > 0 for entry in ahead.entries.values())  # the lines each gist quotes


def test_a_resumed_thread_s_first_advance_makes_no_gist_and_indexes_nothing(
    ran: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = tmp_path / "control.sqlite"
    shutil.copy(ran, control)
    monkeypatch.setattr(Pregists, "hand_over", lambda *args, **kwargs: None)  # nothing made ahead in this process
    gists, indexed = _made_on_the_call(monkeypatch)
    resumed = Views()
    _run(ran, "go on", _replies(9, 1), resumed)
    assert sum(str(m.content).startswith("[cleared") for m in resumed.views[-1]) > sum(
        str(m.content).startswith("[cleared") for m in resumed.views[0]
    )  # the mask advanced in this run
    assert gists == []
    assert indexed == []

    monkeypatch.setattr(carried, "carried_in", lambda index, state: NOTHING)
    monkeypatch.setattr(clear, "carried_in", lambda index, state: NOTHING)
    made = Views()
    _run(control, "go on", _replies(9, 1), made)  # the same run, each gist made on the call
    assert gists
    assert [[m.content for m in view] for view in resumed.views] == [[m.content for m in view] for view in made.views]


def test_a_carried_gist_is_used_only_for_the_result_it_was_made_for(ran: Path) -> None:
    with closing(sqlite3.connect(ran, check_same_thread=False)) as connection:
        agent = _agent(connection, [])
        values = agent.get_state(CONFIG).values
    thread, ahead = values["messages"], Carried.from_state(values)
    assert ahead.entries
    call_id, entry = next(iter(ahead.entries.items()))
    result = next(m for m in thread if getattr(m, "tool_call_id", None) == call_id)
    budget, tokens = entry[0], entry[1]
    assert ahead.gist(result, budget, tokens, thread) is not None
    assert ahead.gist(result, budget + 1, tokens, thread) is None  # another window: another gist
    assert ahead.gist(result, budget, tokens + 1, thread) is None  # another result under the same id
    assert ahead.gist(result, budget, tokens, thread[1:]) is None  # no longer where it stood
    forged = {AHEAD_KEY: {"counted_by": ahead.counted_by, "gists": {call_id: [budget, tokens, entry[2], 9, 10**6]}}}
    assert Carried.from_state(forged).gist(result, budget, tokens, thread) is None  # lines the result does not have
    assert Carried.from_state({AHEAD_KEY: {"gists": {call_id: "not a list"}}}).entries == {}
    assert Carried.from_state({AHEAD_KEY: ["odd"]}) is NOTHING


async def test_the_async_path_carries_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    agent = create_agent(
        scripted_model(_replies(0, 9), window=128_000),
        [listing],
        middleware=context_middleware(policy=POLICY),
        checkpointer=InMemorySaver(),
    )
    await agent.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
    assert Carried.from_state((await agent.aget_state(CONFIG)).values).entries


def test_a_forged_entry_is_made_again_with_the_same_bytes(
    ran: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client may write any private state through the API: lines that do not fit the result are not shown."""
    control = tmp_path / "control.sqlite"
    shutil.copy(ran, control)
    with closing(sqlite3.connect(ran, check_same_thread=False)) as connection:
        agent = _agent(connection, [])
        ahead = Carried.from_state(agent.get_state(CONFIG).values)
        assert ahead.entries
        forged = {call_id: [*entry[:4], 0, 10**6] for call_id, entry in ahead.entries.items()}
        agent.update_state(CONFIG, {AHEAD_KEY: {"counted_by": ahead.counted_by, "gists": forged}}, as_node="model")
    monkeypatch.setattr(Pregists, "hand_over", lambda *args, **kwargs: None)
    gists, _indexed = _made_on_the_call(monkeypatch)
    resumed, made = Views(), Views()
    _run(ran, "go on", _replies(9, 1), resumed)
    assert gists  # made again on the call, as if nothing were carried
    _run(control, "go on", _replies(9, 1), made)
    assert [[m.content for m in view] for view in resumed.views] == [[m.content for m in view] for view in made.views]


def test_a_batch_s_gists_stay_carried_while_later_arrivals_join_them(tmp_path: Path) -> None:
    """The default preset prepares a batch's gists on its way to `clear_at`, then the results that arrive after: the
    thread's state carries all of them until the batch, so a process that resumes in between finds every one."""
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:
        handed(self, *args)
        assert self.wait(timeout=60)

    with (
        pytest.MonkeyPatch.context() as patch,
        closing(sqlite3.connect(tmp_path / "c.sqlite", check_same_thread=False)) as connection,
    ):
        patch.setattr(Pregists, "hand_over", finished)
        agent = create_agent(
            scripted_model(_replies(0, 14), window=12_000),
            [listing],
            middleware=context_middleware(policy=ContextPolicy(window=12_000)),
            checkpointer=SqliteSaver(connection),
        )
        agent.invoke({"messages": [HumanMessage("go")]}, CONFIG)
        states = [s.values for s in reversed(list(agent.get_state_history(CONFIG)))]
    before = [(set(Carried.from_state(v).entries or {}), v.get(CLIP_STATE_KEY)) for v in states]
    grew = False
    for (earlier, boundary), (later, same) in itertools.pairwise(before):
        if boundary == same:  # no batch in between: nothing carried is let go but what a batch already took
            assert earlier - set(boundary["results"] if boundary else ()) <= later
            grew = grew or (bool(earlier) and later > earlier)
    assert grew  # a result that arrived after the batch was prepared joined what is carried
    first_batch = next(b for _carried, b in before if b)
    carried_before = next(c for c, b in reversed(before) if not b)
    assert set(first_batch["results"]) <= carried_before  # the batch found every gist it took carried
