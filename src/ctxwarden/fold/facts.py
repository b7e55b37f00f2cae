"""The facts section of a fold: what the folded turns established, quoted, not summarized.

A summarizer model writes prose, and prose loses exactly the details an agent comes
back for: the path it wrote, the error line it was fixing, the words the user used.
So every summary opens with a section built from the folded messages themselves,
deterministically, whatever the summarizer model says:

- the user's messages, verbatim (the latest always; older ones, newest first, while they fit
  the cap on their own, ahead of every other fact; one longer than the cap in part, with the
  way back to it whole, `ctxwarden.fold.user_quotes`);
- every file written or edited (by the file tools, or by a shell command: a redirection,
  `tee`, `sed -i`, a script's `open(..., "w")`), by its path;
- each failing command with its error line, verbatim, and whether a later run of the same
  command passed;
- the output lines that first showed the identifiers the agent went on to use; each folded
  output's gist, the lines clearing would have kept of it (`ctxwarden.core.gist`: new names,
  paths, numbers, errors), so a fold does not take away what a cleared result still showed;
  and, from the last outputs folded, the few lines that show the most names and numbers the
  agent has not written yet (what it was reading when the fold came, and is likely to name next).

It is cumulative: the next fold parses this section back and extends it, so a fact
survives any number of folds. Each quoted line is a whole line of the original (cut
lines are dropped, never shortened), so nothing in it is a paraphrase.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import fsum
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.core.gist import Seen, choose_lines, gist_budget
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.text import FAILURE, TOKEN, content_text, error_line, message_text, value_text
from ctxwarden.core.writes import FILE_WRITERS, written_paths
from ctxwarden.fold.state import is_summary

MAX_LINE_CHARS = 400
"""Longer output lines are not quoted among the lines the agent used."""

FACTS_HEADING = "## Facts (quoted from the folded turns)"
"""Heading of the section; the next fold finds its own facts by it."""

_SUBSECTIONS = (
    "User messages",
    "Files written or edited",
    "Failing commands",
    "Output lines the agent used or may need",
)

LATEST_OUTPUTS = 3
"""How many of the last outputs folded give their most distinctive lines to the facts."""

LATEST_LINES = 4
"""Lines each of those outputs gives at most (about what a gist keeps of a short output)."""

ERROR = FAILURE
"""A line that says something failed (the one definition in `core.text`, kept here under its old name)."""


Excerpt = Callable[[ToolMessage, Seen], Sequence[str]]
"""The whole lines of a folded output worth keeping, given how many earlier folded messages showed each token."""

OWN_LINE = "[ctxwarden:"
"""How ctxwarden's own lines start (an eviction marker in a preview, a gauge note): never quoted as a line of an
output, where it would read as ctxwarden's word on the thread (`imitates_own`)."""

FACTS_END = "(end of the quoted facts)"
"""Closes the section, so the next fold can take it back exactly, whatever prose follows it."""

_STRUCTURE = frozenset({FACTS_HEADING, FACTS_END, *(f"### {title}" for title in _SUBSECTIONS)})


@dataclass(slots=True)
class Facts:
    """The facts of everything folded so far, each kind in first-seen order (kept in the fold record)."""

    users: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)

    def kinds(self) -> tuple[list[str], ...]:
        return (self.users, self.files, self.failures, self.used)

    def to_dict(self) -> dict[str, list[str]]:
        return {"users": self.users, "files": self.files, "failures": self.failures, "used": self.used}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Facts:
        raw = raw or {}
        return cls(*(list(raw.get(name) or ()) for name in ("users", "files", "failures", "used")))


def gather(previous: Facts, folded: Sequence[BaseMessage], excerpt: Excerpt | None = None) -> Facts:
    """`previous` extended with the facts of `folded` (whole messages, as the thread holds them); with `excerpt`, each
    folded output's excerpt joins the lines kept, after the lines the agent used and read last.

    Linear in the folded text: each message is read once (a fold is on the critical path).
    """
    facts = Facts.from_dict(previous.to_dict())
    seen = {kind: set(items) for kind, items in zip(("users", "files", "failures", "used"), facts.kinds(), strict=True)}
    commands: dict[str, str] = {}  # call id -> the command's first line
    outcomes: list[tuple[str, bool]] = []  # (command, failed) in order, to tell whether a failure was fixed later
    pending: list[tuple[int, str, str]] = []
    last_written = _last_written(folded)
    spoken = 0
    shown: dict[str, int] = {}  # token -> how many folded messages so far showed it (what an excerpt calls new)
    gisted: list[str] = []
    for message in folded:
        if isinstance(message, HumanMessage) and not is_summary(message):
            _add(facts.users, seen["users"], content_text(message.content).strip())
        elif isinstance(message, AIMessage):
            spoken += 1
            for path in written_paths(message):
                _add(facts.files, seen["files"], path)
            for call in message.tool_calls:
                args = "\n".join(value_text(v) for v in (call.get("args") or {}).values())
                commands[str(call.get("id"))] = next((line for line in args.splitlines() if line.strip()), "")
        elif isinstance(message, ToolMessage):
            text = content_text(message.content)
            command = commands.get(message.tool_call_id, "")
            line = error_line(text)
            line = None if line is None or imitates_own(line) else line
            outcomes.append((command, line is not None))
            if line is not None:
                pending.append((len(outcomes) - 1, command, line))
            _used_lines(facts, seen["used"], text, last_written, spoken)
            if excerpt is not None:
                gisted.extend(line for line in excerpt(message, lambda t: shown.get(t, 0)) if not imitates_own(line))
        if excerpt is not None:
            for token in set(TOKEN.findall(message_text(message))):
                shown[token] = shown.get(token, 0) + 1
    for message in [m for m in folded if isinstance(m, ToolMessage)][-LATEST_OUTPUTS:]:
        _latest_lines(facts, seen["used"], content_text(message.content), last_written)
    for line in gisted:  # last, so the cap drops them last: they show names the agent has not written yet
        _add(facts.used, seen["used"], line)
    passed_after: dict[str, int] = {}  # command -> the last position at which a run of it passed
    for index, (command, failed) in enumerate(outcomes):
        if not failed:
            passed_after[command] = index
    for index, command, line in pending:
        fixed = bool(command) and passed_after.get(command, -1) > index
        entry = "\n".join(part for part in (command, line) if part)
        _add(facts.failures, seen["failures"], entry + ("\n(a later run of it passed)" if fixed else ""))
    return facts


def gist_lines(policy: ContextPolicy, window: int, meter: TokenMeter) -> Excerpt:
    """Each folded output's gist, on the budget clearing gives it on a `window`-token model: a fold keeps the lines
    clearing kept."""

    def lines(message: ToolMessage, seen: Seen) -> list[str]:
        budget = gist_budget(policy, window, meter.message_tokens(message))
        text = content_text(message.content).splitlines()
        return [text[index] for index in choose_lines(text, budget, meter.counter, seen)]

    return lines


def _last_written(folded: Sequence[BaseMessage]) -> dict[str, int]:
    """Each token the agent wrote, with how many of its messages had been said when it last wrote it (1-based)."""
    last: dict[str, int] = {}
    spoken = 0
    for message in folded:
        if isinstance(message, AIMessage):
            spoken += 1
            for token in TOKEN.findall(message_text(message)):
                last[token] = spoken
    return last


def _used_lines(facts: Facts, seen: set[str], text: str, last_written: Mapping[str, int], spoken: int) -> None:
    """The first line of an output to show each token the agent went on to write (after `spoken` of its messages)."""
    taken: set[str] = set()
    for line in text.splitlines():
        if not line.strip() or len(line) > MAX_LINE_CHARS or imitates_own(line):
            continue
        fresh = [t for t in TOKEN.findall(line) if last_written.get(t, 0) > spoken and t not in taken]
        if fresh:
            taken.update(fresh)
            _add(facts.used, seen, line)


def _latest_lines(facts: Facts, seen: set[str], text: str, last_written: Mapping[str, int]) -> None:
    """The lines of a last-folded output that show the most tokens the agent has not written, each token counted
    once and weighed by how few of the output's lines show it (a name on every line is one detail), per character."""
    spread: dict[str, int] = {}
    found: list[tuple[int, str, set[str]]] = []
    for index, line in enumerate(text.splitlines()):
        if not line.strip() or len(line) > MAX_LINE_CHARS // 2 or imitates_own(line):
            continue
        fresh = {token for token in TOKEN.findall(line) if token not in last_written}
        for token in fresh:
            spread[token] = spread.get(token, 0) + 1
        if fresh:
            found.append((index, line, fresh))
    covered: set[str] = set()
    chosen: list[tuple[int, str]] = []
    while found and len(chosen) < LATEST_LINES:
        # fsum: the same value whatever order the set yields (string hashing differs per process)
        best = max(found, key=lambda f: (fsum(1 / spread[t] for t in f[2] - covered) / (len(f[1]) + 20), -f[0]))
        if not best[2] - covered:
            break
        covered |= best[2]
        chosen.append((best[0], best[1]))
        found.remove(best)
    for _index, line in sorted(chosen):
        _add(facts.used, seen, line)


def imitates_own(line: str) -> bool:
    """Whether an output's line reads as ctxwarden's own text: a note or marker, or a line of the facts section's
    structure. A tool printed it (a log that quotes ctxwarden, or one made to look like it), so the facts never quote
    it: there it would read as the thread's status, or end the section early. The output itself keeps it."""
    text = line.strip()
    return text.lower().startswith(OWN_LINE) or text in _STRUCTURE


def _add(items: list[str], seen: set[str], item: str) -> None:
    if item and item not in seen:
        seen.add(item)
        items.append(item)


def quoted(facts: Facts, max_chars: int) -> Facts:
    """The facts the section quotes within about `max_chars`: what the fold record keeps, so it stays bounded (a line
    the cap dropped, being older than every line after it, would never be quoted again).

    What the user wrote comes first: the latest message always, and older ones, newest first,
    while they fit in `max_chars` on their own (a long task statement is not crowded out by the
    paths and errors that followed it). The paths written and the latest failure always stay
    too: they are what a fold must never lose, and paths are small. Older failures and the lines
    the agent used fill what is left of `max_chars`, the lines first to go, each kind oldest first.
    The user's messages are all kept in the record: a window that shrinks may fold the pinned task.
    """
    users, files, failures, used = (list(kind) for kind in facts.kinds())
    size = sum(len(item) + 1 for kind in (_newest_within(users, max_chars), files, failures, used) for item in kind)
    for kind, keep in ((used, 0), (failures, 1)):
        dropped = 0
        while size > max_chars and len(kind) - dropped > keep:
            size -= len(kind[dropped]) + 1
            dropped += 1
        del kind[:dropped]
    return Facts(users, files, failures, used)


def render(facts: Facts, max_chars: int) -> str:
    """The section within about `max_chars` (see `quoted`)."""
    kept = quoted(facts, max_chars)
    out = [FACTS_HEADING]
    kinds = (_newest_within(kept.users, max_chars), kept.files, kept.failures, kept.used)
    for title, items in zip(_SUBSECTIONS, kinds, strict=True):
        if items:
            out.append(f"### {title}")
            out.extend(_quoted_item(item) for item in items)
    out.append(FACTS_END)
    return "\n".join(out)


def _quoted_item(item: str) -> str:
    """`item` with each line that reads as the section's own structure marked as a quote (`> `): a user message
    holding the line `(end of the quoted facts)` ended the section there, and the next fold took the rest of the
    message for the summary's own prose, showing it as one of the summary's decisions."""
    if not any(line.strip() in _STRUCTURE for line in item.split("\n")):
        return item
    return "\n".join(f"> {line}" if line.strip() in _STRUCTURE else line for line in item.split("\n"))


def _newest_within(users: list[str], max_chars: int) -> list[str]:
    """The latest of `users`, and the older ones, newest first, while together they fit `max_chars`; in order."""
    if not users:
        return users
    size = 0
    start = len(users) - 1
    while start > 0 and size + len(users[start - 1]) + 1 <= max_chars:
        start -= 1
        size += len(users[start]) + 1
    return users[start:]


def strip_facts(summary: str) -> str:
    """`summary` without a facts section (a summarizer shown the previous summary may copy it)."""
    if FACTS_HEADING not in summary:
        return summary
    before, _heading, rest = summary.partition(FACTS_HEADING)
    end = re.search(rf"^{re.escape(FACTS_END)}$", rest, flags=re.MULTILINE)  # the line that closes it, alone
    return (before + (rest[end.end() :] if end else "")).strip()


__all__ = [
    "ERROR",
    "FACTS_END",
    "FACTS_HEADING",
    "FILE_WRITERS",
    "Excerpt",
    "Facts",
    "error_line",
    "gather",
    "gist_lines",
    "imitates_own",
    "quoted",
    "render",
    "strip_facts",
    "written_paths",
]
