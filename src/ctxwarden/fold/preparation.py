"""A summary prepared ahead of its fold, and whether the thread is still what it summarized.

A preparation is only memory: the summary being written (`future`), tied to exactly what
it covers — the fold before it and the id and content digest of every message it would
fold. `prepared_cut` checks that against the thread on every call; anything changed, and
it is never applied (`ctxwarden.fold.prepare` discards it and prepares again).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage

from ctxwarden.fold.draft import Drafts, fingerprint
from ctxwarden.fold.engine import FoldInput
from ctxwarden.fold.in_place import SentCall
from ctxwarden.fold.state import Folds, is_summary, originals
from ctxwarden.fold.summarize import Summary


@dataclass(slots=True)
class Preparation:
    """A summary being written (or written) for the fold of exactly `folded`, after the fold `previous`."""

    number: int
    previous: tuple[int, str] | None
    folded: tuple[tuple[str | None, str], ...]
    """`(id, fingerprint)` of every message it covers, as the thread holds them."""
    summarizer: Any
    future: Future[Summary]
    started: float
    drafts: Drafts
    """The drafts of its fold's work; `drafts.summarized` is how many messages from the first one folded the summary
    covers: those of `folded`, or for an in-place request every message of the call."""
    prompt_chars: int = 0
    """Set by the background thread once it has built the prompt."""
    sent: Future[SentCall] | None = None
    """For an in-place request: the call that started it, as sent, once it is answered (`Preparer.answered`). The
    request is sent then, when the provider's cache holds that call."""

    def drop(self, why: str) -> None:
        """Let a preparation still waiting for its call's answer end without asking anything."""
        if self.sent is not None and not self.sent.done():
            with contextlib.suppress(InvalidStateError):  # answered meanwhile, from the call's thread
                self.sent.set_exception(PreparationDropped(why))

    def answer(self, request: ModelRequest[Any]) -> None:
        """Hand a preparation waiting for its call's answer the call as it was sent (once; a dropped one stays so)."""
        if self.sent is not None and not self.sent.done():
            with contextlib.suppress(InvalidStateError):  # dropped meanwhile, from another thread
                self.sent.set_result(SentCall.of(request))

    @property
    def unanswered(self) -> bool:
        """An in-place request whose call was not answered (yet, or ever): it asked nothing, it is never applied."""
        return self.sent is not None and (not self.sent.done() or self.sent.exception() is not None)


class PreparationDropped(Exception):
    """A preparation was dropped before its call was answered: no summary was asked for."""


def previous_fold(folds: Folds) -> tuple[int, str] | None:
    last = folds.last
    return (last.number, last.upto) if last is not None else None


def prepared_cut(preparation: Preparation, given: FoldInput, start: int) -> int | None:
    """Where `preparation` cuts `given.view` (whose first foldable message is `start`), or `None` when it is stale
    (the thread is not what it summarized)."""
    if preparation.previous != previous_fold(given.folds):
        return None
    view = given.view
    cut = start + len(preparation.folded)
    if cut >= len(view) or not isinstance(view[cut], AIMessage | HumanMessage) or is_summary(view[cut]):
        return None
    if [m.id for m in view[start:cut]] != [i for i, _ in preparation.folded]:
        return None
    for (_id, digest), original in zip(preparation.folded, originals(given.thread, view[start:cut]), strict=True):
        if fingerprint(original) != digest:
            return None
    return cut


__all__ = ["Preparation", "PreparationDropped", "prepared_cut", "previous_fold"]
