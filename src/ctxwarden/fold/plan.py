"""What a fold starts from, what it plans, and what it gives back (`ctxwarden.fold.engine` makes it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from ctxwarden.core.layers import PendingEvent
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold.facts import Facts
from ctxwarden.fold.in_place import SentCall
from ctxwarden.fold.state import FoldRecord, Folds, kept_ahead


@dataclass(frozen=True, slots=True)
class FoldInput:
    """What one fold starts from."""

    view: Sequence[BaseMessage]
    """What the model would receive now (earlier folds and clearing applied)."""
    thread: Sequence[BaseMessage]
    """The checkpointed messages, whole: the history file gets these."""
    folds: Folds
    window: int
    fixed_tokens: int
    """System prompt and tool schemas (raw count)."""
    factor: float
    tokens_before: int
    thread_id: str | None
    namespace: str
    fallback_model: Any = None
    """The model to summarize with when no summarizer was configured (the agent's)."""
    instructions: str | None = None
    forced: bool = False
    sent: SentCall | None = None
    """The call as the model receives it, which an in-place summarizer request continues (`ctxwarden.fold.in_place`)."""

    @property
    def prior(self) -> FoldRecord | None:
        """The fold this one extends (its summary, its facts, the task lines it pinned): the one whose summary the view
        shows. When the thread no longer holds the last folded message (a client removed it, or every message with
        `REMOVE_ALL_MESSAGES`), the view shows the thread as it is, and a fold that extended the last one brought the
        removed conversation back, quoted in its facts; it starts afresh instead (numbered after it, in the same
        history file). When a folded message was edited since, the view shows an earlier fold that still stands for
        the thread (`fold.state.shown_record`), and the new one extends that."""
        ahead = kept_ahead(self.view)
        shown = self.view[ahead - 1] if ahead else None
        number = (shown.additional_kwargs.get(METADATA_KEY) or {}).get("fold") if shown is not None else None
        return next((r for r in reversed(self.folds.records) if r.number == number), None)


@dataclass(frozen=True, slots=True)
class FoldPlan:
    number: int
    cut: int
    folded: list[BaseMessage]
    folded_raw: list[BaseMessage]
    path: str
    section: str
    summarizer: Any
    prompt: str | None
    pinned: tuple[BaseMessage, ...] = ()
    """The user message the new view shows ahead of the summary (`Folder.start`), as it shows it."""
    task_lines: tuple[int, ...] | None = None
    """The lines of the pinned task shown, when it is shown in part (`ctxwarden.fold.pin`)."""


@dataclass(frozen=True, slots=True)
class Gathered:
    """The facts of a fold: gathered over every folded message (cumulative), and rendered as the summary's section."""

    facts: Facts
    quoted: str


@dataclass(frozen=True, slots=True)
class FoldOutcome:
    """The new view, the private state to persist, and what to record."""

    view: list[BaseMessage]
    state: dict[str, Any] | None
    events: list[PendingEvent]
    record: FoldRecord | None


__all__ = ["FoldInput", "FoldOutcome", "FoldPlan", "Gathered"]
