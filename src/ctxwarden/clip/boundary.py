"""The clearing boundary: which results and arguments are out of the view, kept in the thread's private state.

The boundary is what makes clearing cache-stable: every call replaces exactly the call ids
it lists, with the same bytes, until the next batch. It also carries what a process that
resumes the thread would otherwise have to recompute from the whole thread: the lines each
gist quotes, and each placeholder's token count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.placeholders import has_text
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import content_signature

CLIP_STATE_KEY = "ctxwarden_clip"

TaskCut = tuple[str, tuple[int, ...]]
"""The id of the thread's task a batch cut, and the lines shown of it (`core.task`)."""


class ClipState(AgentState):
    """The clearing boundary: call ids whose results, and whose arguments, are out of the view (and the lines each
    cleared result's gist quotes); and the gists made ahead for the next mask advance."""

    ctxwarden_clip: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]
    ctxwarden_ahead: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]
    """The gists made ahead for the next mask advance (`clip.carried`)."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """Which results and which calls' arguments are cleared, in the order they were cleared."""

    results: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    gists: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """The lines each cleared result's gist quotes, by call id, and the lines each clipped call's values keep, by
    `placeholder_key` (`clip.placeholders.clip_calls`): a process that resumes the thread renders the same
    placeholders from these without weighing the thread's text again (a gist depends on everything shown before it)
    or reading the arguments' lines."""
    counts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Each placeholder's tokens and content signature (`core.stamp`), by `placeholder_key`, as counted by
    `counted_by`: a process that resumes the thread measures its placeholders without tokenizing them."""
    counted_by: str | None = None
    masked_turns: int = 0
    """How many turns the cost-first mask covers (`clip.mask`); `counts` holds its placeholders' counts too."""
    masked_upto: str | None = None
    """The id of the message of the last turn the mask covers, to find it in a view that starts later."""
    task: str | None = None
    """The id of the thread's first user message when a batch cut it to `task_lines` (`core.task`)."""
    task_lines: tuple[int, ...] = ()
    """The lines of the task shown, chosen by the batch that cut it: every later call shows the same bytes."""
    cut_messages: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """By id, the lines shown of each later user message a forced batch cut (`core.pasted`)."""

    @property
    def hides_nothing(self) -> bool:
        """Whether the view shows every message as it is (no result, argument or message hidden or cut)."""
        return not (self.results or self.args or self.task or self.cut_messages)

    def hides_more_than(self, other: Boundary) -> bool:
        """Whether this boundary, grown from `other`, hides or cuts anything `other` does not."""
        mine = (self.results, self.args, self.task, len(self.cut_messages))
        return mine != (other.results, other.args, other.task, len(other.cut_messages))

    def growth_from(self, other: Boundary) -> dict[str, int]:
        """What a batch that grew `other` into this boundary added, and the totals after it, as its event says."""
        return {
            "results": len(self.results) - len(other.results),
            "args": len(self.args) - len(other.args),
            "cleared_total": len(self.results),
            "clipped_total": len(self.args),
            "messages_cut": len(self.cut_messages) - len(other.cut_messages),
        }

    @property
    def cut(self) -> TaskCut | None:
        """The task's id and the lines shown of it, when a batch cut it."""
        return (self.task, self.task_lines) if self.task is not None else None

    @classmethod
    def from_state(cls, state: Any) -> Boundary:
        raw = state.get(CLIP_STATE_KEY) if isinstance(state, dict) else None
        if not isinstance(raw, dict):
            return cls()
        gists, counts = raw.get("gists"), raw.get("counts")
        gists = gists if isinstance(gists, dict) else {}
        counts = counts if isinstance(counts, dict) else {}
        task = raw.get("task")
        task_id, task_lines = (task.get("id"), task.get("lines")) if isinstance(task, dict) else (None, None)
        cut_messages = raw.get("cut_messages")
        return cls(
            tuple(raw.get("results") or ()),
            tuple(raw.get("args") or ()),
            {str(k): tuple(v) for k, v in gists.items() if isinstance(v, list | tuple)},
            {str(k): tuple(v) for k, v in counts.items() if isinstance(v, list | tuple)},
            raw.get("counted_by") if isinstance(raw.get("counted_by"), str) else None,
            int(raw.get("masked_turns") or 0),
            raw.get("masked_upto") if isinstance(raw.get("masked_upto"), str) else None,
            task_id if isinstance(task_id, str) and isinstance(task_lines, list) else None,
            tuple(i for i in task_lines if isinstance(i, int)) if isinstance(task_lines, list) else (),
            {
                str(k): tuple(i for i in v if isinstance(i, int))
                for k, v in (cut_messages.items() if isinstance(cut_messages, dict) else ())
                if isinstance(v, list | tuple)
            },
        )

    def to_state(self, grown_from: Mapping[str, Any] | None = None, added: Sequence[str] = ()) -> dict[str, Any]:
        """The boundary as the thread's private state stores it.

        `grown_from` is the stored state of the boundary this one extends (same entries, more of them): its
        entries are taken as they are, and only the new ones converted, so a batch costs what it adds. `added`
        names the entries new since `grown_from` when the caller knows them (`remembered`): then not even the
        keys are compared.
        """
        state: dict[str, Any] = {"results": list(self.results), "args": list(self.args)}
        grown_from = grown_from or {}
        if self.gists:
            state["gists"] = _extended(grown_from.get("gists"), self.gists, added)
        if self.counts and self.counted_by:
            same = grown_from.get("counted_by") == self.counted_by
            state |= {
                "counts": _extended(grown_from.get("counts") if same else None, self.counts, added),
                "counted_by": self.counted_by,
            }
        if self.masked_upto is not None:
            state["masked_upto"] = self.masked_upto
        if self.task is not None:
            state["task"] = {"id": self.task, "lines": list(self.task_lines)}
        if self.cut_messages:
            state["cut_messages"] = {k: list(v) for k, v in self.cut_messages.items()}
        return state | {"masked_turns": self.masked_turns} if self.masked_turns else state


def _extended(stored: Any, entries: Mapping[str, tuple[int, ...]], added: Sequence[str] = ()) -> dict[str, list[int]]:
    """`entries` as stored lists, reusing `stored` (a dict of the same entries' lists, or fewer) for what it holds.

    With `added` (the entries new since `stored`), only those are converted, and the keys compared only by count: a
    mask advance on a thread with thousands of hidden results costs what it hid.
    """
    if not isinstance(stored, dict):
        return {k: list(v) for k, v in entries.items()}
    out = dict(stored)
    if added:
        for key in added:
            if key in entries:
                out[key] = list(entries[key])
        if len(out) == len(entries):
            return out
        out = dict(stored)  # not what `stored` grew into (an entry it held was dropped): compare the keys
    for key in out.keys() - entries.keys():
        del out[key]
    for key in entries.keys() - out.keys():
        out[key] = list(entries[key])
    return out


def call_key(message: AIMessage, results: Set[str], args: Set[str], text: bool = True) -> tuple[str, ...] | None:
    """What hides part of a calling message: `("call", *clipped ids)` when every result it called for is hidden
    (its text goes too, if `text`), `("args", *clipped ids)` when only arguments are; `None` when nothing is."""
    calls = message.tool_calls
    ids = tuple(sorted(str(c["id"]) for c in calls if c.get("id") in args)) if args else ()
    if text and results and has_text(message) and all(c.get("id") in results for c in calls):
        return ("call", *ids)
    return ("args", *ids) if ids else None


def placeholder_key(message: BaseMessage, key: tuple[str, ...]) -> str:
    """How `Boundary.counts` names a placeholder: the cleared result's call id, `args:` and the clipped call ids, or
    `call:`, the message's first call id, `/` and the clipped call ids (its text left out)."""
    if key[0] == "result":
        return str(getattr(message, "tool_call_id", ""))
    if key[0] == "args":
        return "args:" + ",".join(key[1:])
    first = str(message.tool_calls[0].get("id")) if isinstance(message, AIMessage) and message.tool_calls else ""
    return f"call:{first}/" + ",".join(key[1:])


def boundary_of(index: ThreadIndex, state: Any) -> Boundary:
    """The thread's boundary, read again only when its private state is another object than on the last call."""
    raw = state.get(CLIP_STATE_KEY) if isinstance(state, dict) else None
    return index.read("boundary", raw, lambda: Boundary.from_state(state))


Made = Callable[[BaseMessage, tuple[str, ...]], tuple[BaseMessage, tuple[int, ...] | None] | None]
"""The placeholder this process made for a message under a key (and the lines it quotes), or `None`."""


def remembered(
    index: ThreadIndex,
    boundary: Boundary,
    hidden: tuple[Set[str], Set[str]],
    made: Made,
    meter: TokenMeter,
    mask: tuple[int, str | None],
) -> tuple[Boundary, list[str]]:
    """`boundary` with the gist lines, and the counts of the placeholders that hide `hidden` (the cleared results
    and clipped calls, the mask's too), as this process made them, and the reach of the `mask` (turns, and the id
    of the last masked turn's message): a resumed process renders and measures the same placeholders from these.

    Only what was hidden since the last time is read (found by call id in the index), so a batch or a mask
    advance costs what it hid, not the thread's length; the names of the entries it added come with it. The first
    time in a process (a resume) that is what the stored boundary holds no count for.
    """
    gists: dict[str, tuple[int, ...]] = dict(boundary.gists)
    same_counter = boundary.counted_by == meter.count_key
    counts: dict[str, tuple[int, ...]] = dict(boundary.counts) if same_counter else {}
    cleared, clipped = hidden
    before = index.memo.get("remembered") if same_counter else None
    if before is None:
        before = (counts.keys(), _counted_calls(counts))
    new_results, new_args = cleared - before[0], clipped - before[1]
    index.memo["remembered"] = hidden
    shown: list[tuple[BaseMessage, tuple[str, ...]]] = [
        (index.messages[index.result_at[call_id]], ("result",))
        for call_id in new_results
        if call_id not in counts and call_id in index.result_at
    ]
    callers = index.caller_at  # a call's message changes when its arguments are clipped or its last result hidden
    for position in sorted({callers[c] for calls in (new_args, new_results) for c in calls if c in callers}):
        message = index.messages[position]
        assert isinstance(message, AIMessage)
        key = call_key(message, cleared, clipped, index.policy.clear_call_text)
        if key is not None and placeholder_key(message, key) not in counts:
            shown.append((message, key))
    added: list[str] = []
    for message, key in shown:
        found = made(message, key)
        if found is None:
            continue  # not shown by this process: a later call that shows it counts it
        placeholder, lines = found
        name = placeholder_key(message, key)
        if lines is not None:
            gists.setdefault(name, lines)
        counts[name] = (meter.message_tokens(placeholder), *content_signature(placeholder))
        added.append(name)
    grown = Boundary(boundary.results, boundary.args, gists, counts, meter.count_key, *mask, boundary.task)
    return dataclasses.replace(grown, task_lines=boundary.task_lines, cut_messages=boundary.cut_messages), added


def _counted_calls(counts: Mapping[str, tuple[int, ...]]) -> set[str]:
    """The calls whose arguments' placeholder `counts` holds. A call's message is keyed by its calls clipped so far,
    a set that only grows: once each of them is named here, its current key is, so `remembered` need not build it."""
    named = (key[5:] if key.startswith("args:") else key.partition("/")[2] for key in counts if key[:5] in _CALLS)
    return {call_id for ids in named if ids for call_id in ids.split(",")}


_CALLS = ("args:", "call:")


__all__ = [
    "CLIP_STATE_KEY",
    "Boundary",
    "ClipState",
    "Made",
    "TaskCut",
    "boundary_of",
    "call_key",
    "placeholder_key",
    "remembered",
]
