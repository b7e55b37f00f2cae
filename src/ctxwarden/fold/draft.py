"""Drafts of a prepared fold's bookkeeping, made in the background on the calls before it fires.

With the summary prepared ahead (`ctxwarden.fold.prepare`), what a fold still did on the
call that folds was its bookkeeping, and the largest part of it is the facts section: a
pass over every folded message, tens of milliseconds on a long thread. None of that
depends on anything but the folded messages, the fold before and the prepared summary,
so it is drafted in the background while the agent works: on each call with a
preparation kept from which the fold is near (`Preparer.drafting`), for every cut the next
call's fold could make.
Which one is not known yet — the thread grows by one step before the fold, and the cut
moves forward by however much that step weighs — so every turn boundary from the cut a
fold would make now to the end of the thread is a candidate (`MAX_DRAFTS` new ones a
pass at most, each drafted once and reused by the calls after it, whose step moves the cut on).

A draft holds the facts of exactly the messages it covers (gathered and rendered, as
the fold renders them), the deterministic summary of the turns after the prepared ones,
and, when the summary was written already, the fold's summary message with its tokens
counted. It is tied to the id and content digest of every message it covers; the fold
applies the draft of exactly the cut it makes, after checking that (the preparation it
belongs to is checked against the fold before), and does the work itself otherwise.
A draft is only memory: nothing is written until the fold fires.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxwarden.core.identity import fingerprint
from ctxwarden.fold.cut import choose_cut
from ctxwarden.fold.engine import Folder, FoldInput, Gathered
from ctxwarden.fold.state import is_summary, originals, summary_message
from ctxwarden.fold.summarize import Summary, deterministic_summary

if TYPE_CHECKING:
    from concurrent.futures import Future

MAX_DRAFTS = 12
"""New drafts made per drafting pass: the cut of a large next step first, then the nearest (a small one) onward; the
cuts past it are drafted by the next calls' passes, which reuse the drafts made before."""

DRAFT_DELAY = 0.05
"""Seconds a drafting thread waits before it starts: the call that starts it has its own work to finish first (both
need the interpreter), and the drafts are needed only on the next call, after the model has answered."""

Covered = tuple[tuple[str | None, str], ...]
"""`(id, fingerprint)` of every message a fold covers, as the thread holds them."""


def covered(messages: Sequence[BaseMessage]) -> Covered:
    return tuple((m.id, fingerprint(m)) for m in messages)


@dataclass(frozen=True, slots=True)
class Draft:
    """The bookkeeping of the fold of exactly `covered` (see the module)."""

    covered: Covered
    window: int
    gathered: Gathered
    extension: str | None
    """The deterministic summary of the covered turns after the prepared ones (`None`: there are none)."""


class Drafts:
    """The drafts of one preparation, by the id of the last message each covers; written by one thread at a time."""

    __slots__ = ("_by_upto", "_worker", "prepared", "summarized")

    def __init__(self, prepared: int, summarized: int | None = None) -> None:
        self.prepared = prepared
        """How many messages the prepared fold takes: the least a draft covers."""
        self.summarized = prepared if summarized is None else summarized
        """How many messages the prepared summary covers (more, when it was asked in place with the whole call): a
        draft's extension is of the ones after them."""
        self._by_upto: dict[str | None, Draft] = {}
        self._worker: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._by_upto)

    def get(self, folded_raw: Sequence[BaseMessage], window: int) -> Draft | None:
        """The draft of exactly `folded_raw` (the thread's messages a fold takes) on `window`, if one was made."""
        if not folded_raw:
            return None
        draft = self._by_upto.get(folded_raw[-1].id)
        if draft is None or draft.window != window or draft.covered != covered(folded_raw):
            return None
        return draft

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the drafting under way, if any; whether none is left."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return worker is None or not worker.is_alive()

    def start(self, folder: Folder, given: FoldInput, summary: Future[Summary]) -> threading.Thread | None:
        """Draft, in a background thread, the folds the next call could make from `given` (none while the previous
        drafting is still at work: the next call drafts)."""
        if self._worker is not None and self._worker.is_alive():
            return None
        snapshot = replace(given, view=list(given.view), thread=list(given.thread))
        # a fresh context: the drafting belongs to no step of the run
        worker = threading.Thread(
            target=contextvars.Context().run,
            args=(self._draft, folder, snapshot, summary),
            name="ctxwarden-fold-draft",
            daemon=True,
        )
        self._worker = worker
        worker.start()
        return worker

    def _draft(self, folder: Folder, given: FoldInput, summary: Future[Summary]) -> None:
        time.sleep(DRAFT_DELAY)
        view = given.view
        start = folder.start(view, given.window)
        now = choose_cut(view, folder.meter, int(given.window * folder.policy.fold_keep_share), start)
        first = max(start + self.prepared, now or 0)
        # first the cut of a next step that alone is the kept tail (one large result), then from the cut a fold would
        # make now onward: the cut moves on by what the next step weighs, most often a little
        candidates = [len(view), *(i for i in range(first, len(view)) if _boundary(view[i]))]
        raw = originals(given.thread, view[start:])
        before = self._by_upto
        kept: dict[str | None, Draft] = {}
        made = 0
        for cut in candidates:
            folded_raw = raw[: cut - start]
            if len(folded_raw) < self.prepared or not folded_raw:
                continue
            upto = folded_raw[-1].id
            draft = self.get(folded_raw, given.window)
            if draft is None:
                if made == MAX_DRAFTS:  # the rest on the next call's pass, which reuses these
                    continue
                draft, made = self._make(folder, given, folded_raw), made + 1
                kept[upto] = draft
                self._by_upto = {**before, **kept}  # one assignment each: a fold reading meanwhile finds it
            else:
                kept[upto] = draft
            self._warm(folder, given, cut, draft, summary)
        self._by_upto = kept  # one assignment: a fold reading meanwhile sees the old drafts or the new ones

    def _make(self, folder: Folder, given: FoldInput, folded_raw: list[BaseMessage]) -> Draft:
        gathered = folder.gathered(folded_raw, given)
        return Draft(covered(folded_raw), given.window, gathered, extension(folded_raw[self.summarized :]))

    @staticmethod
    def _warm(folder: Folder, given: FoldInput, cut: int, draft: Draft, future: Future[Summary]) -> None:
        """With the summary written already: build the fold's summary message and count its tokens, so the fold finds
        both made (both are cached by what they are; a fold that builds another finds nothing and makes its own)."""
        if not future.done() or future.exception() is not None:
            return
        plan = folder.plan_at(given, cut, prompt_wanted=False)
        summary = extended_by(future.result(), draft.extension)
        message = summary_message(folder.summary_of(plan, given, summary, draft.gathered))
        folder.meter.message_tokens(message)


EXTENSION_HEADING = "## Turns folded after the summary above was written"
"""Heads what a prepared summary is extended with: the turns the thread gained while it was written."""

EXTENSION_MAX_LINES = 4
"""Lines each section of an extension gives at most (the first two and the last two; the history file has the rest):
a summary is prepared a few calls before its fold, and one kept longer would otherwise add a page of mechanical notes
to every later call."""

EXTENSION_LEFT_OUT = ("Errors seen",)
"""Sections an extension leaves out: the facts section of the same fold quotes each failing command and its error."""


def extension(later: Sequence[BaseMessage]) -> str | None:
    """What a summary of earlier turns is extended with to cover `later` too: the deterministic summary's sections
    that say something and that the facts do not quote, one level down, under `EXTENSION_HEADING` (`None` when there
    is nothing later)."""
    if not later:
        return None
    sections: list[list[str]] = []
    for line in deterministic_summary(None, later, max_lines=EXTENSION_MAX_LINES).splitlines():
        if line.startswith("## "):
            sections.append([f"#{line}"])
        elif sections:
            sections[-1].append(line)
    said = [
        "\n".join(section)
        for section in sections
        if section[1:] != ["- (none recorded)"] and section[0].removeprefix("### ") not in EXTENSION_LEFT_OUT
    ]
    return "\n\n".join([EXTENSION_HEADING, *said])


def extended_by(summary: Summary, tail: str | None) -> Summary:
    """`summary` followed by `tail` (an `extension`: the turns folded after the ones it covers)."""
    if tail is None:
        return summary
    return Summary(f"{summary.text}\n\n{tail}", summary.summarizer, summary.fallback, summary.error, summary.usage)


def _boundary(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage | HumanMessage) and not is_summary(message)


__all__ = [
    "DRAFT_DELAY",
    "EXTENSION_HEADING",
    "EXTENSION_LEFT_OUT",
    "EXTENSION_MAX_LINES",
    "MAX_DRAFTS",
    "Covered",
    "Draft",
    "Drafts",
    "covered",
    "extended_by",
    "extension",
    "fingerprint",
]
