"""Which stretches of an output are drawn on a screen, and where they lie in its text, without a list of its lines.

A line that moves the cursor between rows is drawn on a screen with the lines it can reach; every other line is
rendered on its own (`clip.terminal`). A list of every line of a 20 MB log is six times its size, so the stretches
are found from the moves alone: each move is found by one scan of the text, and where a stretch begins and ends is
counted from its moves' lines, a few hundred lines at most. The lines between stretches are then read as slices of
the text.
"""

from __future__ import annotations

import heapq
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SCREEN_ROWS = 24
"""Height of the screen lines that move the cursor vertically are drawn on, unless they say they assumed more."""

MAX_SCREEN_ROWS = 500
"""Cap on the screen height a program's own cursor moves can ask for."""

_ESCAPE_MOVE = re.compile(r"\x1b(?:\[[0-9;]*[ABEFHJLMSTdefrsu]|\[\?(?:47|1047|1049)[hl]|[78DEMc])")
"""Escape sequences that move the cursor to another row, place it, scroll, or clear the screen (a pattern that
starts with one character is searched for that character first)."""

_FEED = re.compile(r"[\x0b\x0c]")
"""Line and form feeds, which move the cursor down a row."""

VERTICAL = re.compile(f"{_ESCAPE_MOVE.pattern}|{_FEED.pattern}")
"""Anything that moves the cursor between rows."""

_UP = re.compile(r"\x1b\[([0-9]*)[AF]")
"""A move up by rows (`CSI n F` also to the first column)."""


@dataclass(frozen=True, slots=True)
class Stretch:
    """Lines `start` to `end` (exclusive) of a text, drawn together on a screen `rows` high; `first` and `stop` are
    where they begin and end in the text (`stop` before the `\\n` that ends line `end - 1`), `moves` how many of
    them move the cursor between rows."""

    start: int
    end: int
    rows: int
    first: int
    stop: int
    moves: int


def stretches(text: str) -> list[Stretch]:
    """The stretches of `text` (lines split at `\\n`) to draw on a screen, in order; none overlap or touch."""
    vertical, begins, ends = array("q"), array("q"), array("q")  # each line that moves: its number, its bounds
    line, scanned = 0, 0
    for position in _moves(text):
        if position < scanned:  # a later move on a line already found
            continue
        line += text.count("\n", scanned, position)
        begins.append(text.rfind("\n", 0, position) + 1)
        found = text.find("\n", position)
        ends.append(len(text) if found < 0 else found)
        vertical.append(line)
        scanned = ends[-1]
    if not vertical:
        return []
    total = line + text.count("\n", scanned) + 1
    out: list[Stretch] = []
    for start, end, rows in _regions(text, vertical, begins, ends, total):
        anchor = bisect_left(vertical, start)  # the first move in it, at most a screen below its start
        first = begins[anchor]
        for _ in range(vertical[anchor] - start):
            first = text.rfind("\n", 0, first - 1) + 1
        inside = bisect_left(vertical, end) - anchor
        last = bisect_left(vertical, end) - 1  # the last move in it, at most a screen above its end
        stop = ends[last]
        for _ in range(end - 1 - vertical[last]):
            stop = text.find("\n", stop + 1)
            stop = len(text) if stop < 0 else stop
        out.append(Stretch(start, end, rows, first, stop, inside))
    return out


def _moves(text: str) -> Iterator[int]:
    """Where each sequence that moves the cursor between rows begins, in order: a scan for escapes (a search for a
    single character), and for line and form feeds only when the text holds one; one at a time (a log whose every line
    moves held a list of them all)."""
    escapes = (match.start() for match in _ESCAPE_MOVE.finditer(text))
    if "\x0b" in text or "\x0c" in text:
        return heapq.merge(escapes, (match.start() for match in _FEED.finditer(text)))
    return escapes


def _regions(
    text: str, vertical: Sequence[int], begins: Sequence[int], ends: Sequence[int], total: int
) -> list[tuple[int, int, int]]:
    """`(start, end, rows)` of each stretch: the lines that move the cursor between rows (numbered `vertical`, each
    `text[begins[k]:ends[k]]`, of a text of `total` lines) and, either side, the lines such a move can reach;
    stretches that overlap or touch merge.

    A move reaches one screen height either side, except a line that only moves up (`CSI n A`, `CSI n F`: a status
    line or a bar redrawn in place) with no other move's stretch reaching it: the cursor then stands on a new row below
    the lines before it, so it reaches as many lines up as it moves, and the lines after it land on those rows until
    it is back. A log that redraws its status line every 50 lines is drawn 3 lines a redraw, not 49. A later move whose
    screen reaches such a stretch turns it back into a whole screen's, which the later one's screen then starts from.
    """
    spans: list[tuple[int, int, int]] = []
    narrow: list[int] = []  # for each span, which move it is when it reaches only as far as that line moves up
    for k, index in enumerate(vertical):
        line = text[begins[k] : ends[k]]
        up = _moves_up_only(line)
        if up is not None and index - up >= (spans[-1][1] if spans else 0):
            spans.append((index - up, min(total, index + up + 1), up + 1))
            narrow.append(k)
            continue
        span = _screen_span(line, index, total)
        for earlier in range(len(spans) - 1, -1, -1):  # earlier narrow stretches this screen reaches: whole screens
            if narrow[earlier] < 0 or span[0] > spans[earlier][1]:
                break
            move = narrow[earlier]
            spans[earlier], narrow[earlier] = _screen_span(text[begins[move] : ends[move]], vertical[move], total), -1
            span = (min(span[0], spans[earlier][0]), span[1], span[2])
        spans.append(span)
        narrow.append(-1)
    regions: list[tuple[int, int, int]] = []
    for start, end, rows in sorted(spans):
        if regions and start <= regions[-1][1]:
            first, last, most = regions[-1]
            regions[-1] = (first, max(end, last), max(rows, most))
        else:
            regions.append((start, end, rows))
    return regions


def _screen_span(line: str, index: int, total: int) -> tuple[int, int, int]:
    """The stretch a move reaches on a screen as high as its line says the program assumed: that height either side."""
    rows = _rows(line)
    return max(0, index - rows), min(total, index + rows + 1), rows


def _moves_up_only(line: str) -> int | None:
    """Rows a line moves the cursor up when `CSI n A` and `CSI n F` are its only moves between rows and they add up
    to less than a screen (a move that stops at the screen's top reaches differently); `None` otherwise."""
    ups = _UP.findall(line)
    if not ups or "\x0b" in line or "\x0c" in line or VERTICAL.search(_UP.sub("", line)):
        return None
    total = sum(int(count or 1) or 1 for count in ups)
    return total if total < SCREEN_ROWS else None


_ROWS_ASKED = (
    re.compile(r"\x1b\[(\d+)[ABEFd]"),
    re.compile(r"\x1b\[(\d+)(?:;\d*)?[Hfr]"),
    re.compile(r"\x1b\[\d*;(\d+)r"),
)
"""Rows a move goes by or to, and the last row of a scrolling region: each says how high the program took the screen
to be."""


def _rows(line: str) -> int:
    """The screen height a line's own cursor moves say the program assumed (at least `SCREEN_ROWS`)."""
    asked = [int(n) for pattern in _ROWS_ASKED for n in pattern.findall(line)]
    return min(MAX_SCREEN_ROWS, max([SCREEN_ROWS, *(n + 1 for n in asked)]))


__all__ = ["MAX_SCREEN_ROWS", "SCREEN_ROWS", "VERTICAL", "Stretch", "stretches"]
