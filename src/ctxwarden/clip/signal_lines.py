"""Which lines of an output carry a signal (a test summary, a traceback, a failing test, an error), found fast.

A preview keeps these first (`clip.preview`). Signal lines are rare, so they are found block by block: one RE2 scan
of a block's UTF-8 (an automaton that reads each character once) finds the words every signal line holds, and only
the lines it finds one on are read with the signal patterns, each line once for every kind of signal. A line longer
than `MAX_LINE_CHARS` is never shown, so it is never read either. Where every line is a signal (a flood of errors,
`pytest -v` of a failing suite), the lines are read in one pass, and a preview offers none once its budget cannot
keep the shortest.
"""

from __future__ import annotations

import array
import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import re2  # type: ignore[import-untyped]

from ctxwarden.core.gist import ERROR, FAILING_TEST, SUMMARY, TRACEBACK_START, is_error, summary_line
from ctxwarden.core.text import FAILURE, TextLines, is_failure

MAX_LINE_CHARS = 1_000
"""Longer lines are left out of a preview, never cut (the file keeps them whole)."""

SCAN_BLOCK_LINES = 512
"""Lines ruled out together when none of them holds a signal word."""

ANY_SIGNAL = re.compile(
    "|".join(
        f"(?{'i' if pattern.flags & re.IGNORECASE else ''}:{pattern.pattern})"
        for pattern in (SUMMARY, TRACEBACK_START, ERROR, FAILING_TEST, FAILURE)
    )
)
"""A line that carries any signal: what `signal_lines` finds, kind by kind."""

SIGNAL_WORDS = (
    *(f"\n{digit}" for digit in "0123456789"),
    *(f"{digit} {word}" for digit in "0123456789" for word in ("test", "example")),
    *("= ", "\nran ", "\nok", "\ntest:", "\ntests:", "\ne  ", "\ne\t", "traceback", "panic", "fatal", "exit"),
    *("error", "exception", "failure", "failed", "fail:", "warning", "interrupt", "command not found", "no such file"),
)
"""Lower-case strings of which every line that a signal pattern matches holds one (the `\\n` ones at its start):
a block of lines that holds none of them has no signal line."""

_SPACE = r"[\t\x{0b}\x{0c}\r \x{1c}-\x{1f}\x{85}\p{Z}]"
"""What Python's `\\s` matches in a line (RE2's is ASCII, and takes in `\\n`)."""

_WORDS = "|".join(
    [
        r"\n\p{Nd}+ passed",  # the one signal line a digit starts without a signal word: `3 passed`
        # `=` and `warning` are in every assignment and in most tools' chatter: read with what signal lines hold
        # beside them (`=== 3 passed ===`; `a.c:3: warning`, `UserWarning`), a diff of code is not read line by line
        r"= [^\n]*(?:passed|skipped|warning)",
        rf":{_SPACE}*warning|\Swarning",
        *(re.escape(word) for word in SIGNAL_WORDS if not word[1:].isdigit() and word not in ("= ", "warning")),
    ]
)

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.case_sensitive = False
_ANY_WORD = re2.compile(
    (f"(?:{_WORDS})".replace("\\\n", "\\n").replace("\\\t", "\\t") + r"[^\n]*").encode(), options=_RE2_OPTIONS
)
"""What every signal line holds, in any case (one of `SIGNAL_WORDS`, `=` or `warning` only with what a signal line
holds beside them, a line's first digits only when `passed` follows them), and the rest of its line, so that a line
is found once however many it holds. One linear scan of a block instead of a scan per word. It reads UTF-8 bytes: on
text, RE2's wrapper turns each hit's byte offsets into characters in Python, three times the scan when every line
holds a hit."""


LATEST_SIGNALS = 1_000
"""Signal lines kept in order of their own (`Signals.latest`): a huge output's preview weighs their neighbours."""


@dataclass(slots=True)
class Signals:
    """The signal lines of an output (indexes, in order), by kind."""

    latest: deque[int] = field(default_factory=lambda: deque(maxlen=LATEST_SIGNALS))
    """The last `LATEST_SIGNALS` of them, whatever their kind (a list of all held one int a line of an error flood)."""
    summaries: list[int] = field(default_factory=list)
    failing: list[int] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    starts: array.array[int] = field(default_factory=lambda: array.array("q"))
    """Where each traceback starts; `stops` where it ends (exclusive)."""
    stops: array.array[int] = field(default_factory=lambda: array.array("q"))
    shortest: int = MAX_LINE_CHARS
    """The characters of the shortest line that starts a group: a budget of no more keeps none."""

    def groups(self) -> Iterator[tuple[int, Iterable[int]]]:
        """`(first, indexes)` worth keeping, most valuable first: summaries, tracebacks, failing tests, errors. A
        traceback is its first line and its end: in captured output every indented line may start one."""
        yield from ((i, (i,)) for i in self.summaries)
        for i, stop in zip(reversed(self.starts), reversed(self.stops), strict=True):  # the last matters most
            yield i, range(i, stop) if stop - i <= 30 else itertools.chain(range(i, i + 4), range(stop - 26, stop))
        yield from ((i, (i,)) for i in self.failing)
        yield from ((i, (i,)) for i in reversed(self.errors))  # errors near the end too


def signal_lines(lines: Sequence[str]) -> Signals:
    """The lines of at most `MAX_LINE_CHARS` that a signal pattern matches (`ANY_SIGNAL`), by kind; a block without a
    signal word is skipped whole. A traceback runs on over indented and blank lines, each scanned once (an indented
    "Traceback" on every line of a 40,000-line run took minutes when each start scanned the rest)."""
    found = Signals()
    end = 0
    for start in range(0, len(lines), SCAN_BLOCK_LINES):
        block = [line if len(line) <= MAX_LINE_CHARS else "" for line in lines[start : start + SCAN_BLOCK_LINES]]
        for offset in _lines_with_signal_words(block):
            line, index = block[offset], start + offset
            summary = summary_line(line)
            traceback = TRACEBACK_START.match(line) is not None  # each of its forms starts the line
            error = not traceback and is_error(line)
            failing = FAILING_TEST.search(line) is not None
            if summary or traceback or error or failing:
                found.shortest = min(found.shortest, len(line))
            elif not is_failure(line):
                continue
            found.latest.append(index)
            if summary:
                found.summaries.append(index)
            if traceback:
                end = run_end(lines, max(end, index + 1), _in_traceback)
                found.starts.append(index)
                found.stops.append(min(end + 1, len(lines)))
            elif error:
                found.errors.append(index)
            if failing:
                found.failing.append(index)
    return found


def _lines_with_signal_words(block: list[str]) -> list[int]:
    """Indexes of the lines of `block` that hold a signal word, in order: one RE2 scan of the block's UTF-8, whose
    hits are placed on their lines by the line breaks before them (no hit ends with one); or, for text that has no
    UTF-8 (lone surrogates), a scan per word of each line."""
    try:
        joined = ("\n" + "\n".join(block)).encode()
    except UnicodeEncodeError:
        return [i for i, line in enumerate(block) if any(word in f"\n{line}".lower() for word in SIGNAL_WORDS)]
    found: list[int] = []
    breaks, scanned = 0, 0
    for match in _ANY_WORD.finditer(joined):
        end = match.end()
        breaks += joined.count(b"\n", scanned, end)
        scanned = end
        if not found or found[-1] != breaks - 1:
            found.append(breaks - 1)
    return found


def _in_traceback(line: str) -> bool:
    """Whether `line` goes on a traceback: indented, or blank."""
    return line.startswith((" ", "\t")) or not line.strip()


def run_end(lines: Sequence[str], start: int, continues: Callable[[str], bool]) -> int:
    """The index of the first line of `lines` from `start` that `continues` is false of (`len(lines)` if none)."""
    if isinstance(lines, TextLines):
        return lines.run_end(start, continues)
    end = start
    while end < len(lines) and continues(lines[end]):
        end += 1
    return end


__all__ = ["ANY_SIGNAL", "LATEST_SIGNALS", "MAX_LINE_CHARS", "SIGNAL_WORDS", "Signals", "run_end", "signal_lines"]
