"""The fold record kept in private state, and the view it gives.

A fold is recorded by message id — the id of the last message it folded — never by
list position, so it stays right when a checkpoint is reloaded or messages are added.
Folds are cumulative: the newest record's summary covers everything up to its
`upto` message, and the view of every later call is that one summary followed by the
messages after it — after the thread's first user message when the fold `pinned` it
(`Folder.start`): the task opens every call verbatim, so it stays in the provider's cache
across folds. The summary message is built once per fold and reused, so the prefix
stays byte-identical from call to call.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.view_made import is_view_message, view_message
from ctxwarden.fold.pin import shown_task

FOLD_STATE_KEY = "ctxwarden_fold"
SUMMARY_SOURCE = "summarization"
"""`additional_kwargs["lc_source"]` of a summary message, as deepagents and langchain mark theirs."""


class FoldState(AgentState):
    """Folds done on the thread, the anti-thrash hold, and a pending `/compact` request."""

    ctxwarden_fold: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


@dataclass(frozen=True, slots=True)
class FoldRecord:
    """One fold: what it covers, its summary, and where the folded turns were written."""

    number: int
    upto: str
    """Id of the last message folded (everything up to it is covered, cumulatively)."""
    summary: str
    path: str | None
    tokens_before: int
    tokens_after: int
    summarizer: str
    fallback: bool
    facts: Mapping[str, Any] = field(default_factory=dict)
    """The deterministic facts gathered over every fold so far (`Facts.to_dict()`); the next fold extends them."""
    pinned: str | None = None
    """Id of the user message shown ahead of the summary (the thread's first), if any."""
    task_lines: tuple[int, ...] | None = None
    """The lines of the pinned message shown, when it is shown in part (`ctxwarden.fold.pin`); `None`: whole."""
    covered: int | None = None
    """What the messages up to `upto` said when folded (`covered_digest`); `None` in records written before it was
    kept. The summary stands for them only while they still say it (`shown_record`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "upto": self.upto,
            "summary": self.summary,
            "path": self.path,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summarizer": self.summarizer,
            "fallback": self.fallback,
            "facts": dict(self.facts),
            "pinned": self.pinned,
            "task_lines": list(self.task_lines) if self.task_lines is not None else None,
            "covered": self.covered,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FoldRecord:
        return cls(
            number=int(raw["number"]),
            upto=str(raw["upto"]),
            summary=str(raw["summary"]),
            path=raw.get("path"),
            tokens_before=int(raw.get("tokens_before", 0)),
            tokens_after=int(raw.get("tokens_after", 0)),
            summarizer=str(raw.get("summarizer", "")),
            fallback=bool(raw.get("fallback", False)),
            facts=dict(raw.get("facts") or {}),
            pinned=raw.get("pinned"),
            task_lines=_lines(raw.get("task_lines")),
            covered=raw.get("covered") if isinstance(raw.get("covered"), int) else None,
        )


def _lines(raw: Any) -> tuple[int, ...] | None:
    return tuple(int(index) for index in raw) if isinstance(raw, list | tuple) else None


@dataclass(frozen=True, slots=True)
class Folds:
    """Every fold of a thread, plus the hold and a pending compaction request."""

    records: tuple[FoldRecord, ...] = ()
    hold_until: int | None = None
    """After an unproductive fold: no new automatic fold below this many tokens."""
    requested: Mapping[str, Any] | None = None
    """A `/compact` asked for by the agent's tool: `{"instructions": ...}`."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def last(self) -> FoldRecord | None:
        return self.records[-1] if self.records else None

    @classmethod
    def from_state(cls, state: Any) -> Folds:
        raw = state.get(FOLD_STATE_KEY) if isinstance(state, Mapping) else None
        if not isinstance(raw, Mapping):
            return cls()
        records = tuple(FoldRecord.from_dict(r) for r in raw.get("records") or ())
        return cls(records, raw.get("hold_until"), raw.get("requested"))

    def to_state(self) -> dict[str, Any]:
        return {
            "records": [r.to_dict() for r in self.records],
            "hold_until": self.hold_until,
            "requested": dict(self.requested) if self.requested else None,
        }


_SUMMARY_CACHE: dict[tuple[int, str, str | None, str, str | None], HumanMessage] = {}


def summary_message(record: FoldRecord) -> HumanMessage:
    """The message that stands for everything the fold covers (the same object for the same fold)."""
    key = (record.number, record.upto, record.path, record.summary, record.pinned)
    cached = _SUMMARY_CACHE.get(key)
    if cached is not None:
        return cached
    span = "after the first message, up to" if record.pinned else "before"
    content = (
        f"[ctxwarden: the conversation {span} this point was folded into this summary (fold {record.number}).]\n\n"
        f"{record.summary}{_footer(record)}"
    )
    message = view_message(
        HumanMessage(
            content=content,
            id=f"ctxwarden-fold-{record.number}-{record.upto}",
            additional_kwargs={"lc_source": SUMMARY_SOURCE, METADATA_KEY: {"fold": record.number}},
        )
    )
    if len(_SUMMARY_CACHE) > 1_000:
        _SUMMARY_CACHE.clear()
    _SUMMARY_CACHE[key] = message
    return message


def _footer(record: FoldRecord) -> str:
    if not record.path:
        return ""
    return (
        f"\n\nThe folded turns are in {record.path} (section 'fold {record.number}' and earlier); "
        f"read them with read_file, or get one tool result back with recall(call_id=...)."
    )


def is_summary(message: BaseMessage) -> bool:
    """Whether `message` is a summary made for a view, not a thread's message that looks like one (a fork's seed,
    deepagents' summary, an imitation): those are originals, folded, written out and searched like any other."""
    return is_view_message(message, SUMMARY_SOURCE)


def kept_ahead(view: Sequence[BaseMessage]) -> int:
    """How many leading messages of `view` no fold takes again: its summary, and the user message pinned before it."""
    for index in range(min(2, len(view))):
        if is_summary(view[index]):
            return index + 1
    return 0


def shown_folded(messages: Sequence[BaseMessage], record: FoldRecord, upto: int) -> list[BaseMessage]:
    """The view of `messages` under `record`, whose last folded message is `messages[upto]`: the pinned message, the
    summary, then the messages after it."""
    summary = summary_message(record)
    if record.pinned is None:
        return [summary, *messages[upto + 1 :]]
    pinned = next((m for m in messages[: min(2, upto)] if m.id == record.pinned), None)  # the first user message
    if pinned is None:  # not where it was pinned from (an edited thread): look for it
        pinned = next((m for m in messages[:upto] if m.id == record.pinned), None)
    if pinned is None:
        return [summary, *messages[upto + 1 :]]
    return [shown_task(pinned, record.task_lines), summary, *messages[upto + 1 :]]


def folded_view(messages: Sequence[BaseMessage], folds: Folds) -> list[BaseMessage]:
    """The latest summary that stands for the thread (`shown_record`) followed by the messages after the fold's last
    one; `messages` when nothing is folded."""
    found = shown_record(messages, folds)
    return list(messages) if found is None else shown_folded(messages, *found)


def covered_digest(messages: Sequence[BaseMessage]) -> int:
    """A digest of what `messages` say (their text and their calls' arguments): CRC-32 over the joined text runs at
    memory speed, so a resumed thread's first call checks thousands of folded messages in a few milliseconds."""
    texts = [
        m.content if m.content.__class__ is str else json.dumps(m.content, default=str, sort_keys=True)
        for m in messages
    ]
    calls = [repr(call.get("args")) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]
    digest = zlib.crc32("\x00".join(texts).encode("utf-8", "surrogatepass"))
    return zlib.crc32("\x00".join(calls).encode("utf-8", "surrogatepass"), digest)


def covered_up_to(thread: Sequence[BaseMessage], upto: str) -> int | None:
    """`covered_digest` of `thread` up to its last message with id `upto` (`None` when it holds none)."""
    index = next((i for i in range(len(thread) - 1, -1, -1) if thread[i].id == upto), None)
    return None if index is None else covered_digest(thread[: index + 1])


def shown_record(messages: Sequence[BaseMessage], folds: Folds) -> tuple[FoldRecord, int] | None:
    """The newest fold whose summary stands for `messages` as they are, and where its last folded message stands.

    A summary quotes what it folded. When a client edits a folded message (`update_state` with its id, to take a
    secret out), the summary no longer stands for it: an earlier fold is shown that does, or none, and the next fold
    summarizes the thread as it is now. When the newest fold's last message is gone (a client removed it), nothing is
    folded in view rather than a guess."""
    for record in reversed(folds.records):
        index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == record.upto), None)
        if index is None:
            return None
        if record.covered is None or record.covered == covered_digest(messages[: index + 1]):
            return record, index
    return None


def originals(thread: Sequence[BaseMessage], shown: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The thread's messages with the ids of `shown`, in its order (the last of a repeated id, as a dict of the thread
    by id gives; a shown message the thread does not hold stands for itself).

    The thread is read from its end back to the oldest of them only: the messages of a folded view are the thread's
    latest, so a fold's lookup costs the view's length, not the thread's, however long the thread has grown."""
    wanted = {m.id for m in shown}
    found: dict[str | None, BaseMessage] = {}
    for message in reversed(thread) if wanted else ():
        if message.id in wanted and message.id not in found:
            found[message.id] = message
            if len(found) == len(wanted):
                break
    return [found.get(m.id, m) for m in shown]


__all__ = [
    "FOLD_STATE_KEY",
    "FoldRecord",
    "FoldState",
    "Folds",
    "covered_digest",
    "covered_up_to",
    "folded_view",
    "is_summary",
    "kept_ahead",
    "originals",
    "shown_folded",
    "shown_record",
    "summary_message",
]
