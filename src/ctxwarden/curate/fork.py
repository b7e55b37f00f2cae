"""Fork: a new thread seeded with chosen turns and fold summaries of an existing one.

A thread is listed as units in conversation order: whole turns (a user message with
every reply and tool result that followed it) and fold summaries (each placed where
its fold ended; a fold covers everything before that point). Choosing whole turns
keeps the seed valid — no tool call without its result, no result without its call.
A fold together with a turn (or an earlier fold) it already covers is refused: the
seed would say the same thing twice. The source thread is only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.errors import CtxwardenError
from ctxwarden.fold.state import SUMMARY_SOURCE, Folds, is_summary


class ForkError(CtxwardenError, ValueError):
    """The chosen units cannot make a valid thread."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One choosable piece of a thread."""

    index: int
    kind: Literal["turn", "fold"]
    first_words: str
    tokens: int
    start: int
    """Position of its first message in the thread (for a fold: of the first message it covers, always 0)."""
    end: int
    """Position just past its last message (for a fold: past the last message it covers)."""
    fold: int | None = None

    def describe(self) -> str:
        label = f"fold {self.fold}" if self.kind == "fold" else "turn"
        return f"[{self.index}] {label:<7} {self.tokens:>7,} tokens  {self.first_words}"


def list_units(messages: Sequence[BaseMessage], values: Any, meter: TokenMeter | None = None) -> list[Unit]:
    """The thread's turns and folds, in conversation order, numbered from 0."""
    meter = meter or TokenMeter()
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and not is_summary(m)]
    if not starts or starts[0] != 0:
        starts = [0, *starts] if messages else []
    spans = [(s, e) for s, e in zip(starts, [*starts[1:], len(messages)], strict=True)]
    positions = {m.id: i for i, m in enumerate(messages)}
    folds = Folds.from_state(values if isinstance(values, dict) else {})
    items: list[tuple[int, int, Unit]] = []
    for start, end in spans:
        words = _first_words(messages[start])
        tokens = sum(meter.message_tokens(m) for m in messages[start:end])
        items.append((end, 1, Unit(0, "turn", words, tokens, start, end)))
    for record in folds.records:
        if record.upto in positions:
            end = positions[record.upto] + 1
            words = _first_words(HumanMessage(record.summary))
            items.append((end, 0, Unit(0, "fold", words, meter.counter(record.summary), 0, end, record.number)))
    items.sort(key=lambda item: (item[0], item[1]))
    return [
        Unit(i, u.kind, u.first_words, u.tokens, u.start, u.end, u.fold) for i, (_end, _rank, u) in enumerate(items)
    ]


def seed_messages(
    messages: Sequence[BaseMessage], values: Any, chosen: Sequence[int], source: str
) -> list[BaseMessage]:
    """The messages of a new thread made of the `chosen` units, validated, in conversation order."""
    units = list_units(messages, values)
    if not chosen:
        raise ForkError("choose at least one unit to fork; list them with Session.units() or list_units().")
    unknown = [i for i in chosen if not 0 <= i < len(units)]
    if unknown:
        raise ForkError(f"unit(s) {unknown} do not exist: this thread has units 0..{len(units) - 1}.")
    picked = sorted({units[i] for i in chosen}, key=lambda u: u.index)
    folds = [u for u in picked if u.kind == "fold"]
    for fold in folds:
        for other in picked:
            if other is fold:
                continue
            covered = other.end <= fold.end if other.kind == "fold" else other.start < fold.end
            if covered:
                what = f"fold {other.fold}" if other.kind == "fold" else f"turn {other.index}"
                raise ForkError(
                    f"unit {fold.index} (fold {fold.fold}) already covers unit {other.index} ({what}): choose the fold "
                    f"or the turns it folded, not both."
                )
    records = {r.number: r for r in Folds.from_state(values if isinstance(values, dict) else {}).records}
    seed: list[BaseMessage] = []
    for unit in picked:
        if unit.kind == "fold":
            record = records[int(unit.fold or 0)]
            where = f" The folded turns are in {record.path}." if record.path else ""
            seed.append(
                HumanMessage(
                    f"[ctxwarden: summary of fold {record.number} of thread {source!r}.]\n\n{record.summary}{where}",
                    additional_kwargs={"lc_source": SUMMARY_SOURCE},
                )
            )
        else:
            part = list(messages[unit.start : unit.end])
            _check_complete(part, unit)
            seed.extend(part)
    return seed


def _check_complete(part: Sequence[BaseMessage], unit: Unit) -> None:
    called = {str(c["id"]) for m in part if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in part if isinstance(m, ToolMessage)}
    if called - answered:
        raise ForkError(
            f"unit {unit.index} (turn) ends with tool calls that have no result yet ({sorted(called - answered)}); "
            "fork after the turn has finished, or leave this turn out."
        )
    if answered - called:
        raise ForkError(
            f"unit {unit.index} (turn) holds tool results without their calls ({sorted(answered - called)})."
        )


def _first_words(message: BaseMessage, count: int = 12) -> str:
    text = (
        message.content
        if isinstance(message.content, str)
        else " ".join(str(b.get("text", "")) for b in message.content if isinstance(b, dict))
    )
    words = text.split()
    return " ".join(words[:count]) + (" …" if len(words) > count else "")


__all__ = ["ForkError", "Unit", "list_units", "seed_messages"]
