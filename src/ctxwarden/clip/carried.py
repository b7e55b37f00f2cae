"""Gists made ahead, carried in the thread's private state to the process that resumes it.

The next mask advance's gists are made in the background while the model answers
(`clip.pregist`), but only in memory: a process that resumes the thread had none, so its
first advance made them on the call, and a gist weighs each token by how many messages
before the result showed it, which needs the token ledger of the whole thread (40 ms of
text at 1M tokens, then the gists themselves). So the call that hands them over writes
what was made by the time the model answered into `ctxwarden_ahead`: per result, the
gist's budget, the result's count and position, the placeholder's count and the lines it
quotes. The process that resumes the thread renders the same placeholder from those lines
(`core.gist.gist_of_lines`), as it does for the results the boundary holds, and hands none
of them to the background again.

An entry is used only for the result it was made for: the same call id at the same position
of the thread, the same count and the same gist budget (a model with another window gets
another gist). Anything else in the state is ignored, and the gist is made as before: the
same bytes either way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ctxwarden.clip.index import MAX_THREADS, ThreadIndex
from ctxwarden.clip.placeholders import result_placeholder
from ctxwarden.clip.pregist import Job, MadeAhead, Pregists
from ctxwarden.core.gist import Gist, gist_of_lines
from ctxwarden.core.text import text_of

AHEAD_KEY = "ctxwarden_ahead"
"""The private state key of the gists made ahead (`{"counted_by": ..., "gists": {call id: entry}}`)."""

Entry = tuple[int, int, int, int, tuple[int, ...]]
"""Budget, the result's tokens, its position in the thread, the placeholder's tokens, the quoted lines."""


@dataclass(frozen=True, slots=True)
class Carried:
    """The gists a thread's state carries, as read from it (see the module)."""

    counted_by: str | None = None
    entries: Mapping[str, Entry] | None = None

    @classmethod
    def from_state(cls, state: Any) -> Carried:
        raw = state.get(AHEAD_KEY) if isinstance(state, dict) else None
        gists = raw.get("gists") if isinstance(raw, dict) else None
        if not isinstance(gists, dict):
            return NOTHING
        entries: dict[str, Entry] = {}
        for call_id, value in gists.items():
            if isinstance(value, list | tuple) and len(value) >= 4 and all(type(v) is int for v in value):
                entries[str(call_id)] = (value[0], value[1], value[2], value[3], tuple(value[4:]))
        by = raw.get("counted_by") if isinstance(raw, dict) else None
        return cls(by if isinstance(by, str) else None, entries)

    def gist(
        self, message: ToolMessage, budget: int, tokens: int, thread: Sequence[BaseMessage] | None
    ) -> tuple[Gist, int | None] | None:
        """The gist carried for `message` at this `budget` and count, where it stands in `thread`, with its
        placeholder's count; `None` when none fits."""
        entry = self._entry(message, budget, tokens, thread)
        made = gist_of_lines(text_of(message), entry[4]) if entry is not None else None
        return (made, entry[3]) if made is not None and entry is not None else None

    def _entry(
        self, message: ToolMessage, budget: int, tokens: int, thread: Sequence[BaseMessage] | None
    ) -> Entry | None:
        entry = self.entries.get(message.tool_call_id) if self.entries else None
        if entry is None or entry[0] != budget or entry[1] != tokens or thread is None:
            return None
        position = entry[2]
        return entry if 0 <= position < len(thread) and _same(thread[position], message) else None

    def made_ahead(
        self,
        message: ToolMessage,
        budget: int,
        tokens: int,
        thread: Sequence[BaseMessage] | None,
        counted_by: str | None,
    ) -> Gist | MadeAhead | None:
        """The carried gist of `message`, with its placeholder and that placeholder's count when the count is by
        `counted_by` (the counter of the process asking); `None` when none fits."""
        carried = self.gist(message, budget, tokens, thread)
        if carried is None:
            return None
        made, counted = carried
        if counted is None or self.counted_by != counted_by:
            return made
        return MadeAhead(budget, tokens, -1, made, result_placeholder(message, tokens, made), counted)

    def covers(self, job: Job, thread: Sequence[BaseMessage] | None) -> bool:
        """Whether the gist of `job` is carried, so the background need not make it (its lines are checked against
        the result when it is used: lines that do not fit it are made again there)."""
        return self._entry(*job, thread) is not None

    def covering(self, thread: Sequence[BaseMessage] | None) -> Callable[[Job], bool]:
        """`covers` for the results of `thread`."""
        return lambda job: self.covers(job, thread)


NOTHING = Carried()


def carried_in(index: ThreadIndex, state: Any) -> Carried:
    """What the thread's `state` carries, read again only when it is another object than on the last call."""
    raw = state.get(AHEAD_KEY) if isinstance(state, dict) else None
    if raw is None:
        return NOTHING
    return index.read("carried", raw, lambda: Carried.from_state(state))


def _same(message: BaseMessage, result: ToolMessage) -> bool:
    return message is result or (
        isinstance(message, ToolMessage) and message.tool_call_id == result.tool_call_id and message.id == result.id
    )


class Carrier:
    """Per thread, the gists the last call wanted made ahead, until the model answers it (see the module)."""

    __slots__ = ("_wanted",)

    def __init__(self) -> None:
        self._wanted: OrderedDict[str, tuple[list[Job], Sequence[BaseMessage], Carried]] = OrderedDict()

    def want(self, thread_key: str, wanted: list[Job], thread: Sequence[BaseMessage], had: Carried) -> None:
        """The call on `thread_key` wants `wanted` made ahead; the thread carried `had`."""
        self._wanted[thread_key] = (wanted, thread, had)
        while len(self._wanted) > MAX_THREADS:
            self._wanted.popitem(last=False)

    def answered(self, thread_key: str, pregists: Pregists, counted_by: str | None) -> dict[str, Any] | None:
        """The state update that carries what was made of the gists the answered call wanted, if it changed."""
        pending = self._wanted.pop(thread_key, None)
        if pending is None:
            return None
        wanted, thread, had = pending
        return to_carry(wanted, pregists, thread, counted_by, had)


def to_carry(
    wanted: Sequence[Job], pregists: Pregists, thread: Sequence[BaseMessage], counted_by: str | None, had: Carried
) -> dict[str, Any] | None:
    """The state that carries the gists of `wanted` made by now (in the background, or carried in already as
    `had`); `None` when that is what the thread holds."""
    gists: dict[str, list[int]] = {}
    for message, budget, tokens in wanted:
        ahead = pregists.standing(message, budget, tokens, thread)
        if ahead is not None:
            gists[message.tool_call_id] = [budget, tokens, ahead.position, ahead.placeholder_tokens, *ahead.gist.chosen]
            continue
        entry = had.entries.get(message.tool_call_id) if had.entries else None
        if entry is not None and had.counted_by == counted_by and had.covers((message, budget, tokens), thread):
            gists[message.tool_call_id] = [*entry[:4], *entry[4]]
    if had.entries is not None and had.counted_by == counted_by and _as_lists(had.entries) == gists:
        return None
    if not gists and not had.entries:
        return None
    return {AHEAD_KEY: {"counted_by": counted_by, "gists": gists}}


def _as_lists(entries: Mapping[str, Entry]) -> dict[str, list[int]]:
    return {call_id: [*entry[:4], *entry[4]] for call_id, entry in entries.items()}


__all__ = ["AHEAD_KEY", "NOTHING", "Carried", "Carrier", "Entry", "carried_in", "to_carry"]
