"""Structure-aware previews of large tool output.

A blind head/tail drops what matters most in a long output: the traceback in the
middle of a test run, the one compiler error among a thousand lines of build log,
the summary line of a test session. A preview keeps the head and the tail, then
spends what budget is left on lines that carry the signal, in order of value:
summary lines, traceback blocks, error lines, failing test names. Output that looks
like grep (`path:line:match`) is summarized per file instead, with exact counts.
Omitted stretches are marked in place; the caller appends how to get everything back. A first
or last line too long to show whole (a binary blob, minified JSON) shows its two ends.

A tool can return tens of megabytes, and weighing each of a million lines in Python takes
minutes, and a list of a million short lines costs ten times their size: lines are split a
chunk at a time (`core.text.TextLines`), and only the chunks read. Signal lines are found by
`clip.signal_lines`, which reads only the lines that hold a signal word. A line longer than
`MAX_LINE_CHARS` is never shown, so it is never searched or weighed either: one 20 MB line costs
the preview its two ends, not a pattern search of 20 MB. Beyond `DETAIL_LINES` lines, the pass
that looks for new names and numbers weighs only the head, the tail and the lines around the
signals, where an agent's next step looks too.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxwarden.clip.signal_lines import MAX_LINE_CHARS, signal_lines
from ctxwarden.core.gist import GREP_LINE, choose_lines, never_seen
from ctxwarden.core.text import TextLines

CHARS_PER_TOKEN = 4
"""The preview's budget is in characters; the line chooser's in tokens."""

DETAIL_LINES = 20_000
"""Beyond this many lines, new details are looked for only in the head, the tail and around signal lines."""


@dataclass(frozen=True, slots=True)
class Preview:
    """A preview and what it left out."""

    text: str
    shown_lines: int
    total_lines: int
    total_chars: int


def preview(text: str, *, max_chars: int = 4_000, head: int = 12, tail: int = 12) -> Preview:
    """A preview of `text` of at most about `max_chars` characters (plus omission markers)."""
    lines = TextLines(text)  # split a chunk at a time: a list of millions of short lines is ten times their size
    if len(text) <= max_chars:
        return Preview(text, len(lines), len(lines), len(text))
    if _looks_like_grep(lines):
        return _grep_preview(lines, len(text), max_chars)
    keep = _select(lines, max_chars, head, tail)
    if not keep:  # every line is too long to show whole (one huge line): the ends, cut, rather than nothing
        return _cut_ends(lines, len(text), max_chars)
    out: list[str] = []
    previous = -1
    long_ends = {i for i in (0, len(lines) - 1) if len(lines[i]) > MAX_LINE_CHARS}  # shown cut, not left out
    for index in sorted(keep | long_ends):
        if index != previous + 1:
            out.append(f"… [{index - previous - 1:,} lines omitted] …")
        line = lines[index]
        out.append(line if index in keep else _cut_line(line, max_chars // 8))
        previous = index
    if previous < len(lines) - 1:
        out.append(f"… [{len(lines) - 1 - previous:,} lines omitted] …")
    return Preview("\n".join(out), len(keep), len(lines), len(text))


def _cut_line(line: str, part: int) -> str:
    """The first and last `part` characters of a line too long to show, saying how much of it is left out."""
    return f"{line[:part]} … [{len(line) - 2 * part:,} chars of this {len(line):,}-char line omitted] … {line[-part:]}"


def _cut_ends(lines: Sequence[str], total_chars: int, max_chars: int) -> Preview:
    """The start of the first line and the end of the last, each cut where it says how much of it is left out."""
    first, last = lines[0], lines[-1]
    if len(lines) == 1:
        half = max_chars // 2
        cut = len(first) - 2 * half
        shown = f"{first[:half]}\n… [{cut:,} chars of this {len(first):,}-char line omitted] …\n{first[-half:]}"
    else:
        half = max_chars // 2
        shown = (
            f"{first[:half]} … [{max(0, len(first) - half):,} more chars of this line omitted]\n"
            f"… [{len(lines) - 2:,} lines omitted] …\n"
            f"[{max(0, len(last) - half):,} chars of this line omitted] … {last[-half:]}"
        )
    return Preview(shown, 0, len(lines), total_chars)


def _select(lines: Sequence[str], max_chars: int, head: int, tail: int) -> set[int]:
    """Head and tail, then signal lines by value, while the budget lasts."""
    keep: set[int] = set()
    budget = max_chars

    def take(index: int) -> bool:
        nonlocal budget
        if index in keep or not 0 <= index < len(lines):
            return True
        size = len(lines[index])
        if size > MAX_LINE_CHARS:
            return True  # whole or not at all
        cost = size + 1
        if cost > budget:
            return False
        keep.add(index)
        budget -= cost
        return True

    signals = signal_lines(lines)
    # the head and the tail first, but never more than a third of the budget each
    for index in range(min(head, len(lines))):
        if budget < max_chars * 2 // 3 or not take(index):
            break
    for index in range(len(lines) - 1, max(len(lines) - 1 - tail, -1), -1):
        if budget < max_chars // 3 or not take(index):
            break
    for first, group in signals.groups():
        if budget <= signals.shortest and first not in keep:
            continue  # a group starts with a signal line, which no longer fits: its take would fail
        for index in group:
            if not take(index):
                break
    # what budget is left goes to the lines with the most details not shown yet
    latest = signals.latest
    del signals  # its lists of every traceback and error line go before the details are weighed
    pool = _detail_pool(len(lines), latest)
    rest = [lines[i] if i not in keep and len(lines[i]) <= MAX_LINE_CHARS else "" for i in pool]
    for chosen in choose_lines(rest, budget // CHARS_PER_TOKEN, _chars_as_tokens, never_seen):
        take(pool[chosen])
    return keep


def _detail_pool(total: int, latest: Iterable[int]) -> Sequence[int]:
    """The lines weighed for new details: all of them, or for a huge output its ends and the neighbours of the
    `latest` signal lines."""
    if total <= DETAIL_LINES:
        return range(total)
    quarter = DETAIL_LINES // 4
    pool = set(range(quarter)) | set(range(total - quarter, total))
    for index in latest:  # with two lines either side
        pool.update(range(max(0, index - 2), min(total, index + 3)))
    return sorted(pool)


def _chars_as_tokens(line: str) -> int:
    return len(line) // CHARS_PER_TOKEN + 1


def _looks_like_grep(lines: Sequence[str]) -> bool:
    """Whether most of the first lines are `path:line:` matches, their paths names of files: a log whose lines start
    with the time (`10:00:01 ERROR ...`, `2026-11-28 10:00:01`, `[10:00:01]`) reads as path `10`, line `00`."""
    sample = [line for line in lines[:200] if line.strip()]
    return len(sample) >= 5 and sum(1 for line in sample if _grep_path(line)) >= 0.8 * len(sample)


_FILE_PATH = re.compile(r"(?![\[(<])(?!\d{4}-\d\d-\d\d[T ]?\d\d?$)[^\s:]*[^\s:\d][^\s:]*")
"""A path `grep -n` writes: no blank, not all digits, not a date and an hour, not a bracket's start."""


def _grep_path(line: str) -> bool:
    found = GREP_LINE.match(line)
    return found is not None and _FILE_PATH.fullmatch(found["path"]) is not None


def _grep_preview(lines: Sequence[str], total_chars: int, max_chars: int, per_file: int = 2) -> Preview:
    """Every file with its exact match count and its first matches."""
    files: OrderedDict[str, tuple[list[str], list[int]]] = OrderedDict()  # first matches, and how many in all
    other = 0
    for line in lines:
        match = GREP_LINE.match(line)
        if match is None:
            other += 1
            continue
        first, count = files.setdefault(match.group("path"), ([], [0]))
        count[0] += 1
        if len(first) < per_file:
            first.append(line)
    counts = {path: count[0] for path, (_first, count) in files.items()}
    total = sum(counts.values())
    out = [f"{total:,} matching lines in {len(files):,} files"]
    budget = max_chars - len(out[0])
    shown = 0
    listed = 0
    for path, (found, _count) in files.items():
        entry = [f"{path}: {counts[path]:,} match{'es' if counts[path] != 1 else ''}"]
        entry += [f"  {line}" for line in found if len(line) <= MAX_LINE_CHARS]
        cost = sum(len(line) + 1 for line in entry)
        if cost > budget:
            break
        out.extend(entry)
        budget -= cost
        shown += len(entry) - 1
        listed += 1
    if listed < len(files):
        rest = list(counts.items())[listed:]
        names = ", ".join(f"{path} ({count})" for path, count in rest)
        summary = f"… and {len(rest):,} more files: {names}"
        out.append(summary if len(summary) <= max(200, budget) else summary[: max(200, budget)] + " …")
    if other:
        out.append(f"… [{other:,} other lines omitted] …")
    return Preview("\n".join(out), shown, len(lines), total_chars)


__all__ = ["Preview", "preview"]
