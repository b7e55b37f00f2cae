"""Fork: a new thread seeded with chosen turns and fold summaries of an existing one.

A thread is listed as units in conversation order: whole turns (a user message with
every reply and tool result that followed it) and fold summaries (each placed where
its fold ended; a fold covers everything before that point). Choosing whole turns
keeps the seed valid — no tool call without its result, no result without its call.
A fold together with a turn (or an earlier fold) it already covers is refused: the
seed would say the same thing twice. The source thread is only read.

What the seed points to comes along: a thread reads only its own offloaded files, so the
evicted results and history files the seed names are copied into the new thread's
folders and the seed is made to name the copies. `recall` in the fork then returns the
full originals; a file that cannot be copied keeps its old path, and recall says why it
cannot read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.clip.names import SHOWN_HASH, record_of, with_shown_hash
from ctxwarden.core.layout import HISTORY_DIR, HISTORY_PART, LARGE_RESULTS_DIR, folder_name
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.errors import ForkError
from ctxwarden.fold.history import renamed_history
from ctxwarden.fold.state import SUMMARY_SOURCE, Folds, is_summary

PRIVATE_PREFIX = "ctxwarden_"
"""ctxwarden's private state keys (folds, the clearing boundary) start with this."""


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
            # the user message the fold kept above its summary is part of what the fold stands for
            seed.extend(m for m in messages[: unit.end] if record.pinned is not None and m.id == record.pinned)
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


def carried_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The source thread's other state keys (todos, in-state files, a middleware's state) for the fork.

    Left out: the messages (the seed replaces them), ctxwarden's private state (it names
    messages the seed may not hold) and other private keys (`_...`: a middleware's own
    bookkeeping, such as the file its summaries go to).
    """
    return {
        key: value for key, value in values.items() if key != "messages" and not key.startswith(("_", PRIVATE_PREFIX))
    }


def offloaded_paths(text: str, source: str) -> set[str]:
    """Backend paths of the source thread's evicted results and history file named in `text`."""
    own = re.escape(folder_name(source))
    parts = HISTORY_PART.pattern
    copied = r"fork-of-[A-Za-z0-9._-]*?(?:-" + parts + r"|\.md)"  # a fork's copy of its own source's history
    pattern = (
        rf"/{LARGE_RESULTS_DIR}/{own}/[A-Za-z0-9._/-]*[A-Za-z0-9_-]|/{HISTORY_DIR}/{own}(?:/{parts}|/{copied}|\.md)"
    )
    return set(re.findall(pattern, text))


def relocated(path: str, source: str, target: str) -> str:
    """Where a fork keeps its copy of the source thread's file `path`."""
    old, new = folder_name(source), folder_name(target)
    if path == f"/{HISTORY_DIR}/{old}.md":
        return f"/{HISTORY_DIR}/{new}/fork-of-{old}.md"
    if path.startswith(f"/{HISTORY_DIR}/{old}/"):  # a part of the history file (`core.layout.history_part`), or a copy
        return f"/{HISTORY_DIR}/{new}/fork-of-{old}-" + path.removeprefix(f"/{HISTORY_DIR}/{old}/")
    return f"/{LARGE_RESULTS_DIR}/{new}/" + path.removeprefix(f"/{LARGE_RESULTS_DIR}/{old}/")


def carry_offloaded(backend: Any, seed: Sequence[BaseMessage], source: str, target: str) -> list[BaseMessage]:
    """Copy the source thread's files that `seed` names into the fork's folders; the seed naming the copies.

    History files are copied with ctxwarden's own lines in them naming the copies (`fold.history.renamed_history`):
    the folded turns stay as they were said. A file that cannot be read or written keeps its old name.
    """
    if backend is None:
        return list(seed)
    pending = {p for m in seed for p in offloaded_paths(_all_text(m), source)}
    moved: dict[str, str] = {}
    seen: set[str] = set()
    bodies: dict[str, bytes] = {}
    while pending - seen:
        batch = sorted(pending - seen)
        seen |= set(batch)
        for path, response in zip(batch, backend.download_files(batch), strict=True):
            if response.error is None and response.content is not None:
                bodies[path] = response.content
                pending |= offloaded_paths(response.content.decode("utf-8", "replace"), source)

    def rename(text: str) -> str:
        for old in sorted(offloaded_paths(text, source), key=len, reverse=True):
            if old in bodies:
                text = text.replace(old, relocated(old, source, target))
        return text

    uploads = [
        (relocated(path, source, target), _history_copy(body, rename) if path.endswith(".md") else body)
        for path, body in bodies.items()
    ]
    answers = backend.upload_files(uploads) if uploads else []
    for (new, _body), path, answer in zip(uploads, list(bodies), answers, strict=True):
        if answer.error is None:
            moved[path] = new
    return [_renamed(m, moved) for m in seed]


def _history_copy(body: bytes, rename: Callable[[str], str]) -> bytes:
    return renamed_history(body.decode("utf-8", "surrogatepass"), rename).encode("utf-8", "surrogatepass")


_RECORDED_PATHS = ("path", "raw_path")
"""The files a tool result's record names: its evicted output, and the raw bytes its arrival kept."""


def _all_text(message: BaseMessage) -> str:
    record = message.response_metadata.get(METADATA_KEY) if isinstance(message, ToolMessage) else None
    paths = [str(record[key]) for key in _RECORDED_PATHS if record.get(key)] if isinstance(record, dict) else []
    media = record.get("media") if isinstance(record, dict) else None  # the files of its images and PDFs out of view
    paths += [str(p) for p in media] if isinstance(media, list) else []
    return "\n".join([str(message.content), *paths])


_OWN_NOTES = ("\n[ctxwarden: ", "The folded turns are in ")
"""Where the text ctxwarden wrote into a message begins: an evicted or rendered result's note, a summary's footer."""


def _renamed(message: BaseMessage, moved: Mapping[str, str]) -> BaseMessage:
    """`message` naming the copies in `moved` instead of the originals, where ctxwarden's own words name them: the
    note of a result it evicted or rendered (its record says so, and the thread's text is still the one it wrote) and
    the footer of the summary a fork seeded (this fork's, or its source's when the source is a fork). What the user,
    the model or a tool said is never rewritten, even where it names a path: every seeded message but those stays
    exact."""
    names = [old for old in sorted(moved, key=len, reverse=True) if old in _all_text(message)]
    own = record_of(message) is not None or message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    if not names or not own:
        return _rerecorded(message, moved)

    def swap(text: str) -> str:
        cut = max(text.rfind(note) for note in _OWN_NOTES)
        if cut < 0:
            return text
        tail = text[cut:]
        for old in names:
            tail = tail.replace(old, moved[old])
        return text[:cut] + tail

    content: Any = (
        swap(message.content)
        if isinstance(message.content, str)
        else [
            {**b, "text": swap(str(b.get("text", "")))} if isinstance(b, dict) and b.get("type") == "text" else b
            for b in message.content
        ]
    )
    renamed = _rerecorded(message.model_copy(update={"content": content}), moved)
    unedited = isinstance(record := record_of(message), dict) and SHOWN_HASH in record
    return with_shown_hash(renamed) if unedited and isinstance(renamed, ToolMessage) else renamed  # the copy's text


def _rerecorded(message: BaseMessage, moved: Mapping[str, str]) -> BaseMessage:
    """`message` whose record names the copies in `moved` of the files it names."""
    record = message.response_metadata.get(METADATA_KEY) if isinstance(message, ToolMessage) else None
    if not (isinstance(record, dict) and any(record.get(key) in moved for key in _RECORDED_PATHS)):
        return message
    metadata = {**record, **{key: moved[record[key]] for key in _RECORDED_PATHS if record.get(key) in moved}}
    if record.get("path") in moved:
        metadata["forked_from"] = record["path"]
    if isinstance(record.get("media"), list):
        metadata["media"] = [moved.get(str(p), p) for p in record["media"]]
    return message.model_copy(update={"response_metadata": {**message.response_metadata, METADATA_KEY: metadata}})


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


__all__ = [
    "Unit",
    "carried_values",
    "carry_offloaded",
    "list_units",
    "offloaded_paths",
    "relocated",
    "seed_messages",
]
