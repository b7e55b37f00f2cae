"""The gists a cost-first mask advance needs are made ahead, in the background, with the same lines."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.clip import clear, pregist
from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.mask import upcoming
from ctxwarden.clip.pregist import Pregists
from ctxwarden.replay import scripted_model
from views import Views


@tool
def listing(page: int) -> str:
    """List the handlers of a page: every line names new things."""
    return "\n".join(f"src/mod_{page}_{i}.py:{i * 7}: def handler_{page}_{i}(request_{page}_{i}):" for i in range(40))


def _run(thread_id: str, policy: ContextPolicy | None = None, steps: int = 13) -> list[list[str]]:
    calls = [[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}] for i in range(steps)]
    replies = [AIMessage("", tool_calls=call) for call in calls]
    views = Views()
    policy = policy or ContextPolicy.cost_first(mask_after_turns=2, window=128_000)
    model = scripted_model([*replies, AIMessage("done")], window=policy.window or 128_000)
    agent = create_agent(
        model, [listing], middleware=[*context_middleware(policy=policy), views], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread_id}})
    return [[str(m.content) for m in view] for view in views.views]


def _recording_gists(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every gist made, as (thread name, the result's first line)."""
    made: list[tuple[str, str]] = []
    for module in (clear, pregist):
        original = module.gist

        def recorded(text: str, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            made.append((threading.current_thread().name, text.splitlines()[0]))
            return _original(text, *args, **kwargs)

        monkeypatch.setattr(module, "gist", recorded)
    return made


def _on_the_call_and_ahead(
    monkeypatch: pytest.MonkeyPatch, policy: ContextPolicy | None = None, steps: int = 13
) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The views of one session with every gist made on the call, then (asserted equal, byte for byte) made ahead;
    and the gists made the second time."""
    made = _recording_gists(monkeypatch)
    monkeypatch.setattr(Pregists, "hand_over", lambda *args, **kwargs: None)  # nothing ahead: every gist on the call
    on_the_call = _run("on-the-call", policy, steps)
    assert made
    assert {name for name, _line in made} == {"MainThread"}
    made.clear()
    monkeypatch.undo()
    made = _recording_gists(monkeypatch)
    handed = Pregists.hand_over

    def finished(self: Pregists, *args: Any) -> None:  # the model took long enough for the background to finish
        handed(self, *args)
        assert self.wait(timeout=60)

    monkeypatch.setattr(Pregists, "hand_over", finished)
    ahead = _run("ahead", policy, steps)
    assert ahead == on_the_call  # byte for byte, every call
    return ahead, made


def test_a_mask_advance_finds_its_gists_made_ahead_with_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead, made = _on_the_call_and_ahead(monkeypatch)
    masked = [line for line in ahead[-2] if line.startswith("[cleared")]
    assert len(masked) >= 8  # the mask advanced at least twice
    assert {name for name, _line in made} == {"ctxwarden-pregist"}  # none made on a call
    assert len(made) == len(set(made))  # each made once
    assert {text.splitlines()[1] for text in masked} <= {line for _name, line in made}


def test_a_clearing_batch_finds_its_gists_made_ahead_with_the_same_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default preset: the results the next batch takes are handed over once the view is halfway to `clear_at`
    (each listing is about 900 tokens: a batch every few calls on a 12,000-token window)."""
    ahead, made = _on_the_call_and_ahead(monkeypatch, ContextPolicy(window=12_000), steps=16)
    cleared = {text.splitlines()[1] for view in ahead for text in view if text.startswith("[cleared")}
    assert len(cleared) >= 6  # more than one batch
    assert {name for name, _line in made} == {"ctxwarden-pregist"}  # none made on a call
    assert len(made) == len(set(made))  # each made once
    assert cleared <= {line for _name, line in made}


def test_a_held_mask_hands_over_one_advance_at_most() -> None:
    """Where the mask no longer pays to advance, the same few turns stay ahead of it: the work per call does not
    grow with the thread."""
    policy = ContextPolicy.cost_first(mask_after_turns=2)
    messages: list[Any] = [HumanMessage("go", id="h")]
    for i in range(40):
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "listing", "args": {"page": i}, "id": f"l{i}"}]))
        messages.append(ToolMessage(f"page {i}", tool_call_id=f"l{i}", id=f"t{i}"))
    index = ThreadIndex(policy, TokenMeter()).sync(messages)
    assert upcoming(index, 4) == ["l4", "l5", "l6", "l7"]
    assert upcoming(index, 36) == ["l36", "l37", "l38", "l39"]
    assert upcoming(ThreadIndex(ContextPolicy(), TokenMeter()).sync(messages), 0) == []
