"""The gauge, shown to the model: a short note when its window fills past `warn_at` and `critical_at`.

ctxwarden manages the window for the agent, but an agent that does not know its window
is filling cannot act on it: search what it will need before a fold, or compact with a
focus of its own. So on the call where the gauge rises (ok to warn, warn to critical),
a note is placed after the newest message: how full the window is, what ctxwarden does
next and at what fill, and what the agent can do.

The note must not cost the provider's prompt cache. It is never inserted before what an
earlier call sent: it goes at the end of the call where the gauge rose, and later calls
show it in that same place with the same bytes (its anchor, the message it follows, is
kept in private state), so each call's messages still begin with the previous call's.
It goes away only where the view changes anyway: with the turns a fold takes, or when
the gauge falls below its level (a clearing batch or a fold brought the fill down). The
thread's messages never hold it. It is measured with the rest of the call (its level and the fill it states are the
call's with the notes in view, itself included, so a note that tips the call past `critical_at` says `critical`, as
the call's stamp does), and recorded
on the stamp of the call that first carried it (`gauge_note`), where the /context report
finds the notes an agent received.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import AgentState, ModelRequest, PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage

from ctxwarden.core.gauge import GaugeLevel
from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.core.list_totals import starts_with
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import RECENT, stamp_of
from ctxwarden.core.view_made import is_view_message, view_message

NOTE_STAMP_KEY = "gauge_note"
"""Key of the note's text in the stamp of the call that carried it."""

NOTE_SOURCE = "ctxwarden_gauge_note"
"""`additional_kwargs["lc_source"]` of the note message."""

NOTES_STATE_KEY = "ctxwarden_notes"


class NoteState(AgentState):
    """The gauge notes in view: each one's level, text and the id of the message it follows."""

    ctxwarden_notes: Annotated[NotRequired[list[dict[str, str]]], PrivateStateAttr]


RANK: dict[str, int] = {"ok": 0, "warn": 1, "critical": 2}


def previous_level(messages: Sequence[BaseMessage]) -> str:
    """The gauge of the previous call: the stamp on the thread's last reply (`ok` when it has none)."""
    for index in range(len(messages) - 1, max(-1, len(messages) - 1 - RECENT), -1):
        if isinstance(messages[index], AIMessage):  # the last reply: its stamp, or none (not measured)
            level = (stamp_of(messages[index]) or {}).get("gauge")
            return level if isinstance(level, str) and level in RANK else "ok"
    return "ok"


def rose(previous: str, level: GaugeLevel) -> bool:
    """Whether the gauge went up a level (ok to warn or critical, warn to critical)."""
    return RANK[level] > RANK.get(previous, 0)


def note_text(budget: CallBudget) -> str:
    """The note for this call: how full, what ctxwarden does next and at what fill, what the agent can do."""
    policy, used, window = budget.policy, budget.used, budget.window.tokens
    if used < budget.clear_at:
        then = (
            f"Next, ctxwarden clears old tool results at {policy.clear_at:.0%} and folds older turns into a summary "
            f"at {policy.summarize_at:.0%}."
        )
    elif used < budget.fold_at:
        then = (
            f"Next, ctxwarden folds older turns into a summary at {policy.summarize_at:.0%} "
            f"(about {budget.fold_at - used:,} tokens from here)."
        )
    else:
        then = (
            "Folding has not brought it down (a fold waits until the thread grows, or nothing older is left to fold); "
            "at 100% ctxwarden clears and folds as far as it can."
        )
    return (
        f"[ctxwarden: your context window is {budget.fraction:.0%} full ({used:,} of {window:,} tokens; gauge "
        f"{budget.gauge}). {then} Nothing is lost: recall(query=...) searches everything out of view (cleared, "
        "evicted, folded), recall(call_id=...) returns one call; compact_conversation(focus=...) folds now, "
        "keeping what you name.]"
    )


_NOTES: dict[str, HumanMessage] = {}


def note_message(text: str, level: str) -> HumanMessage:
    """The note as a message (the same object for the same text: byte-stable, cheap to measure again)."""
    cached = _NOTES.get(text)
    if cached is None:
        if len(_NOTES) > 1_000:
            _NOTES.clear()
        cached = _NOTES[text] = view_message(
            HumanMessage(text, id=f"ctxwarden-gauge-{level}", additional_kwargs={"lc_source": NOTE_SOURCE})
        )
    return cached


def is_note(message: BaseMessage) -> bool:
    """Whether `message` is a note made for a view (by identity, as `core.view_made` says why)."""
    return is_view_message(message, NOTE_SOURCE)


def placed(messages: Sequence[BaseMessage], notes: Sequence[dict[str, str]]) -> list[BaseMessage] | None:
    """`messages` with each note right after its anchor, or `None` when an anchor is not among them."""
    at: dict[int, list[BaseMessage]] = {}
    for note in notes:
        index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == note["after"]), None)
        if index is None:
            return None
        at.setdefault(index, []).append(note_message(note["text"], note["gauge"]))
    out: list[BaseMessage] = []
    for index, message in enumerate(messages):
        out.append(message)
        out.extend(at.get(index, ()))
    return out


class GaugeNote:
    """The last stage of a call: the gauge notes in view, and a new one when the gauge rose (a `ContextLayer`)."""

    name = "gauge_note"

    def __init__(self, policy: ContextPolicy, meter: TokenMeter | None = None) -> None:
        self.policy = policy
        self.meter = meter
        """The stack's meter: with it, the edit carries its messages' count (the notes' added to the request's)."""
        self._placed: tuple[list[BaseMessage], tuple[tuple[str, str, str], ...], list[BaseMessage]] | None = None
        """The last placement: the messages and notes it was made from, and the result (reused as they grow)."""

    def _place(self, messages: Sequence[BaseMessage], notes: list[dict[str, str]]) -> list[BaseMessage] | None:
        """`placed(messages, notes)`, extending the last placement when `messages` extends its messages.

        The notes sit after anchors already placed, so a call that only added messages at the
        end costs an identity check of the list, not a search for each anchor.
        """
        key = tuple((n["after"], n["gauge"], n["text"]) for n in notes)
        last = self._placed
        if last is not None and last[1] == key and starts_with(messages, last[0]):
            shown = [*last[2], *messages[len(last[0]) :]]
        else:
            found = placed(messages, notes)
            if found is None:
                return None
            shown = found
        self._placed = (list(messages), key, shown)
        return list(shown)

    def carried(self, request: ModelRequest[Any]) -> int:
        """Tokens of the notes earlier calls placed, at most what this call carries: the layers before this stage
        count them as fixed, so a call whose notes would tip it past a threshold is cleared or folded first."""
        return self._tokens(_known(request)) if self.policy.gauge_notes else 0

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        if not self.policy.gauge_notes:
            return None
        state = request.state if isinstance(request.state, dict) else {}
        budget = budget.carrying(0)  # the notes carried are counted below, as placed
        level = budget.gauge
        known = _known(request)
        kept = [n for n in known if RANK.get(n.get("gauge", ""), 3) <= RANK[level]]
        messages = request.messages
        shown = self._place(messages, kept) if kept else list(messages)
        if shown is None:  # an anchor left the view (a fold took it): its note goes with it
            kept = [n for n in kept if placed(messages, [n]) is not None]
            shown = self._place(messages, kept) or list(messages)
        meter = self.meter
        kept_tokens = self._tokens(kept)
        noted = _with_tokens(budget, kept_tokens)  # the call as it goes: the notes kept in view take room too
        events: list[Any] = []
        stamp = None
        if rose(previous_level(state.get("messages") or messages), noted.gauge) and messages and messages[-1].id:
            text = note_text(noted)
            if meter is not None:  # the note tells the fill it brings the call to, as the call's stamp will
                with_note = _with_tokens(noted, self._tokens([{"text": text, "gauge": noted.gauge}]))
                if with_note.overflow and not noted.overflow:  # a note never tips a call past the window
                    return self._edit(request, shown, kept, known, budget.measurement.messages + kept_tokens)
                noted = with_note
                text = note_text(noted)
            level = noted.gauge
            kept.append({"after": str(messages[-1].id), "gauge": level, "text": text})
            kept_tokens += self._tokens(kept[-1:])
            shown.append(note_message(text, level))
            events.append(("gauge_note", {"gauge": level, "fraction": round(noted.fraction, 4)}, budget.window.model))
            stamp = {NOTE_STAMP_KEY: text}
        # one note message in `shown` for each kept note: the request's messages and theirs
        tokens = budget.measurement.messages + kept_tokens if meter is not None else None
        return self._edit(request, shown, kept, known, tokens, events, stamp)

    @staticmethod
    def _edit(
        request: ModelRequest[Any],
        shown: Sequence[BaseMessage],
        kept: list[dict[str, str]],
        known: list[dict[str, str]],
        tokens: int | None,
        events: list[Any] | None = None,
        stamp: dict[str, Any] | None = None,
    ) -> LayerEdit | None:
        """The call with the notes `kept` in view (`shown`), and the private state when they differ from `known`."""
        if not kept and not known:
            return None
        update = {NOTES_STATE_KEY: kept} if kept != known else None
        shown_request = request.override(messages=cast("list[AnyMessage]", shown))
        return LayerEdit(shown_request, state=update, events=events or [], stamp=stamp, message_tokens=tokens)

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)

    def _tokens(self, notes: Sequence[dict[str, str]]) -> int:
        """The notes' messages' tokens (0 without the stack's meter: then the notes are not counted)."""
        meter = self.meter
        return sum(meter.message_tokens(note_message(n["text"], n["gauge"])) for n in notes) if meter else 0


def _known(request: ModelRequest[Any]) -> list[dict[str, str]]:
    """The notes earlier calls placed, from the private state."""
    raw = request.state.get(NOTES_STATE_KEY) if isinstance(request.state, dict) else None
    return [dict(n) for n in raw if isinstance(n, dict)] if isinstance(raw, list) else []


def _with_tokens(budget: CallBudget, extra: int) -> CallBudget:
    """`budget` with `extra` more message tokens: the notes in view, so a note that tips the call past `critical_at`
    says `critical`, as the call's stamp does."""
    if not extra:
        return budget
    measurement = dataclasses.replace(budget.measurement, messages=budget.measurement.messages + extra)
    return dataclasses.replace(budget, measurement=measurement)


__all__ = [
    "NOTES_STATE_KEY",
    "NOTE_STAMP_KEY",
    "GaugeNote",
    "NoteState",
    "is_note",
    "note_message",
    "note_text",
    "placed",
    "previous_level",
    "rose",
]
