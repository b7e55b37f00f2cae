"""Which stretches of an output are drawn on a screen, and where they lie in its text, without a list of its lines.

A line that moves the cursor between rows is drawn on a screen with the lines it can reach; every other line is
rendered on its own (`clip.terminal`). A list of every line of a 20 MB log is six times its size, so the stretches
are found from the moves alone: each move is found by one scan of the text, and where a stretch begins and ends is
counted from its moves' lines, a few hundred lines at most. The lines between stretches are then read as slices of
the text.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ctxwarden.clip.fast_draw import parameter

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
    rows, ups = array("q"), array("q")  # and the screen height its moves ask for, the rows they move it up
    moves = VERTICAL if "\x0b" in text or "\x0c" in text else _ESCAPE_MOVE  # searched for `\x1b` alone if it can
    line, scanned = 0, 0
    while (found := moves.search(text, scanned)) is not None:  # a line's first move
        position = found.start()
        line += text.count("\n", scanned, position)
        begins.append(text.rfind("\n", 0, position) + 1)
        newline = text.find("\n", position)
        scanned = len(text) if newline < 0 else newline
        ends.append(scanned)
        vertical.append(line)
        height, up = _line_reach(tuple(moves.findall(text, position, scanned)))
        rows.append(height)
        ups.append(up)
    if not vertical:
        return []
    total = line + text.count("\n", scanned) + 1
    out: list[Stretch] = []
    for start, end, height in _regions(vertical, rows, ups, total):
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
        out.append(Stretch(start, end, height, first, stop, inside))
    return out


@lru_cache(maxsize=4096)
def _line_reach(moves: tuple[str, ...]) -> tuple[int, int]:
    """What a line's moves say of its screen: the height the program took it to be (at least `SCREEN_ROWS`), and the
    rows they move the cursor up when they are all `CSI n A` or `CSI n F` and less than a screen (-1 otherwise)."""
    reaches = [_reach(move) for move in moves]
    ups = [up for _, up in reaches]
    return max(SCREEN_ROWS, *(asked for asked, _ in reaches)), -1 if min(ups) < 0 else min(sum(ups), SCREEN_ROWS)


@lru_cache(maxsize=1024)
def _reach(move: str) -> tuple[int, int]:
    """What one move (a match of `VERTICAL`) says of its screen: the height the program took it to be (from the rows
    it moves by or to, or a scrolling region's last row; up to `MAX_SCREEN_ROWS`, 0 when it says nothing), and the rows
    it moves up when it is `CSI n A` or `CSI n F` (-1 for any other move). Programs write the same few moves on every
    line, so each is read once."""
    asked = [parameter(n) + 1 for pattern in _ROWS_ASKED for n in pattern.findall(move)]
    up = _UP.fullmatch(move)
    return min(MAX_SCREEN_ROWS, max([0, *asked])), -1 if up is None else min(parameter(up[1]) or 1, SCREEN_ROWS)


def _regions(
    vertical: Sequence[int], rows: Sequence[int], ups: Sequence[int], total: int
) -> list[tuple[int, int, int]]:
    """`(start, end, rows)` of each stretch: the lines that move the cursor between rows (numbered `vertical`, of a
    text of `total` lines, each asking for a screen `rows` high and moving up `ups` rows, -1 when it moves otherwise)
    and, either side, the lines such a move can reach; stretches that overlap or touch merge.

    A move reaches one screen height either side, except a line that only moves up (`CSI n A`, `CSI n F`, less than a
    screen in all: a status line or a bar redrawn in place) with no other move's stretch reaching it: the cursor then
    stands on a new row below the lines before it, so it reaches as many lines up as it moves, and the lines after it
    land on those rows until it is back. A log that redraws its status line every 50 lines is drawn 3 lines a redraw,
    not 49. A later move whose screen reaches such a stretch turns it back into a whole screen's, which the later
    one's screen then starts from.
    """
    spans: list[tuple[int, int, int]] = []
    narrow: list[int] = []  # for each span, which move it is when it reaches only as far as that line moves up
    reached = 0  # where the newest move's stretch ends
    for k, index in enumerate(vertical):
        up = ups[k]
        if 0 < up < SCREEN_ROWS and index - up >= reached:
            reached = min(total, index + up + 1)
            spans.append((index - up, reached, up + 1))
            narrow.append(k)
            continue
        span = _screen_span(rows[k], index, total)
        for earlier in range(len(spans) - 1, -1, -1):  # earlier narrow stretches this screen reaches: whole screens
            if narrow[earlier] < 0 or span[0] > spans[earlier][1]:
                break
            move = narrow[earlier]
            spans[earlier], narrow[earlier] = _screen_span(rows[move], vertical[move], total), -1
            span = (min(span[0], spans[earlier][0]), span[1], span[2])
        reached = span[1]
        if spans and narrow[-1] < 0 and span[0] <= spans[-1][1]:  # it overlaps the screen before: one stretch
            start, end, height = spans[-1]
            spans[-1] = (min(start, span[0]), max(end, span[1]), max(height, span[2]))
        else:
            spans.append(span)
            narrow.append(-1)
    regions: list[tuple[int, int, int]] = []
    for start, end, height in sorted(spans):
        if regions and start <= regions[-1][1]:
            first, last, most = regions[-1]
            regions[-1] = (first, max(end, last), max(height, most))
        else:
            regions.append((start, end, height))
    return regions


def _screen_span(rows: int, index: int, total: int) -> tuple[int, int, int]:
    """The stretch a move on line `index` reaches on a screen `rows` high: that height either side."""
    return max(0, index - rows), min(total, index + rows + 1), rows


_ROWS_ASKED = (
    re.compile(r"\x1b\[(\d+)[ABEFd]"),
    re.compile(r"\x1b\[(\d+)(?:;\d*)?[Hfr]"),
    re.compile(r"\x1b\[\d*;(\d+)r"),
)
"""Rows a move goes by or to, and the last row of a scrolling region: each says how high the program took the screen
to be."""


__all__ = ["MAX_SCREEN_ROWS", "SCREEN_ROWS", "VERTICAL", "Stretch", "stretches"]
