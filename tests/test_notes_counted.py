"""The gauge notes a call carries count before any layer decides, and a note never tips a call past the window.

The notes are placed after every layer (the last stage), so a layer that measured only the messages it was handed
saw a call smaller than the one sent: a fold held by an earlier call stayed held while the notes took the call past
the window (4,142 tokens of 4,000, in the held-fold scenario of test_fold).
"""

from __future__ import annotations

from typing import Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.core.gauge_note import NOTES_STATE_KEY, GaugeNote, note_message
from ctxwarden.core.layers import CallBudget
from ctxwarden.core.meter import Measurement
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.window import Window
from ctxwarden.replay import scripted_model
from views import Watch

WINDOW = 4_000


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "data " * 300


def test_a_layer_is_handed_the_call_with_the_notes_it_carries() -> None:
    watch = Watch()
    policy = ContextPolicy(window=WINDOW, warn_at=0.3, critical_at=0.5)
    steps = [AIMessage("", tool_calls=[{"name": "fetch", "args": {"page": i}, "id": f"f{i}"}]) for i in range(8)]
    agent = create_agent(
        scripted_model([*steps, AIMessage("done")], window=WINDOW),
        [fetch],
        middleware=context_middleware(policy=policy, layers=[watch]),
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke({"messages": [HumanMessage("Read the pages.")]}, {"configurable": {"thread_id": "notes"}})
    stamps = [m.response_metadata[METADATA_KEY] for m in out["messages"] if isinstance(m, AIMessage)]
    carried = [i for i, budget in enumerate(watch.budgets) if budget.measurement.notes]
    assert len([s for s in stamps if "gauge_note" in s]) == 2  # warn, then critical
    assert carried  # the calls after the first note carry it
    for i, (budget, stamp) in enumerate(zip(watch.budgets, stamps, strict=True)):
        if "gauge_note" not in stamp:  # no new note on this call: a layer never sees less than what is sent
            assert budget.used >= stamp["input_tokens"], i
    # while the gauge holds, the layer saw the call exactly as it was sent, its notes included
    assert any(watch.budgets[i].used == stamps[i]["input_tokens"] for i in carried if "gauge_note" not in stamps[i])


def _request(messages: list[BaseMessage], notes: list[dict[str, str]] | None = None) -> ModelRequest:
    state = {"messages": messages, NOTES_STATE_KEY: notes or []}
    return ModelRequest(model=cast(Any, None), messages=cast(Any, messages), state=cast(Any, state))


def test_a_note_never_tips_a_call_past_the_window() -> None:
    meter = TokenMeter()
    note = GaugeNote(ContextPolicy(window=WINDOW), meter)
    previous = AIMessage("", id="a1", response_metadata={METADATA_KEY: {"gauge": "warn"}})
    messages: list[BaseMessage] = [HumanMessage("go", id="h0"), previous, ToolMessage("x", tool_call_id="t", id="t1")]
    budget = CallBudget(Window(WINDOW, "override", "m"), Measurement(0, 0, WINDOW - 20, 1.0), note.policy)
    assert budget.gauge == "critical"
    assert not budget.overflow
    assert note.shape(_request(messages), budget) is None  # no room for the note: the call goes as it is
    roomy = CallBudget(Window(WINDOW, "override", "m"), Measurement(0, 0, WINDOW - 400, 1.0), note.policy)
    edit = note.shape(_request(messages), roomy)
    assert edit is not None
    assert edit.stamp
    assert "gauge critical" in edit.stamp["gauge_note"]
    assert roomy.used + meter.message_tokens(note_message(edit.stamp["gauge_note"], "critical")) <= WINDOW


def test_the_notes_carried_are_counted_once_when_placed() -> None:
    meter = TokenMeter()
    note = GaugeNote(ContextPolicy(window=WINDOW), meter)
    previous = AIMessage("", id="a1", response_metadata={METADATA_KEY: {"gauge": "warn"}})  # no rise on this call
    messages: list[BaseMessage] = [HumanMessage("go", id="h0"), previous]
    kept = [{"after": "h0", "gauge": "warn", "text": "[ctxwarden: your context window is 75% full.]"}]
    carried = note.carried(_request(messages, kept))
    assert carried == meter.message_tokens(note_message(kept[0]["text"], "warn"))
    measured = Measurement(0, 0, 3_000, 1.0, notes=carried)  # as the layers saw it
    edit = note.shape(_request(messages, kept), CallBudget(Window(WINDOW, "override", "m"), measured, note.policy))
    assert edit is not None
    assert edit.message_tokens == 3_000 + carried
