"""A screen drawn by pyte's rules without pyte, for what progress displays write around a log.

pyte draws about 0.3-1 MB a second, so `ctxwarden.clip.terminal` gives it at most
`SCREEN_BUDGET_CHARS` of an output and strips the escape codes of the rest. Two kinds of display
fill a screen region with moves far past that: multi-bar progress (tqdm's `position=`: text, `\\r`,
`\\n`, cursor up and down, line erases), and a status line kept below a scrolling log (apt and
dpkg's `Progress: [ 45%]`: the log scrolls inside a region set with `CSI t;b r`, and each update
saves the cursor, moves to the last row with `CSI r;c f`, draws and restores it). Past the budget,
apt's status ran into every log line. `fast_screen` draws both, one text run at a time, in time
linear in the input, and returns `None` for anything else; a property test holds it to pyte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from pyte import charsets
from pyte.screens import Cursor, Savepoint

from ctxwarden.clip.fast_draw import (
    NOT_ONE_CELL,
    PYTE_MAX_PARAMETER,
    SHORT_ROW,
    STUB,
    Row,
    TextRow,
    cells,
    next_tab_stop,
    parameter,
    work_limit,
)

_CONTROL = re.compile(r"(\r|\n|\t|\x1b[78]|\x1b\[[su]|\x1b\[[0-9]*[A-GJKade`]|\x1b\[(?:[0-9]*;?[0-9]*)[Hfr])")
"""What `fast_screen` draws besides text (ASCII digits only: pyte reads any other as a failure)."""

SPLIT_BLOCK_CHARS = 65_536
"""Characters of lines split into text runs and controls at a time."""


def fast_screen(data: str, rows: int, columns: int) -> list[str] | None:
    """What a pyte screen `rows` high and `columns` wide shows of `data`, scrollback first, drawn without pyte."""
    drawn = draw(data, rows, columns, [])
    return None if drawn is None else drawn[0]


def draw(data: str, rows: int, columns: int, saved: Sequence[Any]) -> tuple[list[str], list[Any]] | None:
    """The lines a pyte screen shows of `data` (as `fast_screen`), and the cursor it saved (pyte's savepoints: `saved`,
    the one an earlier screen of the same output saved, unless `data` saves another); `None` for data holding anything
    else than what this draws, or a saved cursor from a mode it does not draw.

    pyte's rules: a text run stops at the last column and wraps when the next character comes (a two-cell character
    drawn in the last column loses its stub; `\\n` also returns to the first column, as pyte's LNM mode makes it); a
    line feed on the region's bottom row scrolls the region, and a row scrolled off the screen's top is kept; moves up
    and down stop at the region's edges, a position at the screen's; setting the region homes the cursor; a restore
    without a save homes it, one with a save returns inside the region."""
    if not _plain(saved):
        return None
    mark = _mark(saved)
    buffer: list[TextRow | Row] = [TextRow() for _ in range(rows)]
    gone: list[str] = []
    top, bottom = 0, rows - 1
    x = y = 0
    left = work_limit(data)

    def feed(y: int) -> int:
        """The row a line feed from row `y` leads to; on the region's bottom row, the region scrolls."""
        if y != bottom:
            return min(y + 1, bottom)  # pyte's: below the region, a feed goes up to its bottom row
        removed = buffer.pop(top)
        buffer.insert(bottom, TextRow())
        if top == 0:
            gone.append(removed.shown())
        return y

    for run, part in _parts(data):
        if left < 0:
            return None
        if run:
            text = cells(run) if NOT_ONE_CELL.search(run) else run
            if text is None:
                return None
            while text:
                if x == columns:  # the last column was drawn: the next character wraps
                    x, y = 0, feed(y)
                if len(text) <= columns - x:
                    take, text = text, ""
                else:
                    take, text = text[: columns - x], text[columns - x :]
                    if text[0] == STUB:  # a two-cell character in the last column: its stub is not drawn
                        text = text[1:]
                row = buffer[y]
                left -= row.draw(x, take)
                if isinstance(row, TextRow) and len(row.text) > SHORT_ROW:
                    buffer[y] = row.listed()
                x += len(take)
        if part == "\n":
            x, y = 0, feed(y)
        elif part == "\r":
            x = 0
        elif part == "\t":
            x = next_tab_stop(x, columns)
        elif part in ("\x1b7", "\x1b[s"):
            mark = (x, y)
        elif part in ("\x1b8", "\x1b[u"):
            if mark is None:
                x = y = 0
            else:  # the saved cursor stays saved (`pyte_screen.Screen.restore_cursor`)
                x, y = min(mark[0], columns - 1), min(max(top, mark[1]), bottom)
        elif part:
            op, numbers = _sequence(part)
            if op in "Hf":
                line, column = (*numbers, 0, 0)[:2]
                x, y = min((column or 1) - 1, columns - 1), min((line or 1) - 1, rows - 1)
            elif op == "r":
                if len(numbers) == 1 and not numbers[0]:  # none, or 0: the whole screen, the cursor stays
                    top, bottom = 0, rows - 1
                    continue
                first, last = (*numbers, 0)[:2]
                new_top = max(0, min(first - 1, rows - 1))
                new_bottom = bottom if len(numbers) < 2 else max(0, min(last - 1, rows - 1))
                if new_bottom - new_top >= 1:
                    top, bottom, x, y = new_top, new_bottom, 0, 0
            else:
                count = numbers[0]
                if op in "AF":  # `F` also returns to the first column
                    x, y = 0 if op == "F" else x, max(y - (count or 1), top)
                elif op in "BEe":  # `E` also returns to the first column
                    x, y = 0 if op == "E" else x, min(y + (count or 1), bottom)
                elif op in "Ca":
                    x = min(x + (count or 1), columns - 1)
                elif op == "D":  # from the last column drawn, pyte counts from the column before the wrap
                    x = max(min(x, columns - 1) - (count or 1), 0)
                elif op in "G`":
                    x = min((count or 1) - 1, columns - 1)
                elif op == "d":
                    y = min((count or 1) - 1, rows - 1)
                elif op == "J":
                    if count not in (0, 1, 2, 3):
                        return None
                    for row_index in range(y + 1, rows) if count == 0 else range(y) if count == 1 else range(rows):
                        buffer[row_index].clear()
                    if count in (0, 1):
                        left -= buffer[y].erase_to_end(x) if count == 0 else buffer[y].erase_to_start(x)
                elif count == 0:
                    left -= buffer[y].erase_to_end(x)
                elif count == 1:
                    left -= buffer[y].erase_to_start(x)
                elif count == 2:
                    left -= buffer[y].clear()
                else:
                    return None  # pyte fails on it
    if left < 0:
        return None
    shown = [row.shown() for row in buffer]
    last = max([y, *(i for i, row in enumerate(shown) if row)])
    return [*gone, *shown[: last + 1]], _savepoints(mark, saved)


def _parts(data: str) -> Iterator[tuple[str, str]]:
    """Each run of text of `data` (maybe empty) and the control after it (`""` after the last), in order: split a
    block of lines at a time (a list of them all was four times the size of a screen region of short lines). No
    control holds a `\\n` but `\\n` itself, so blocks cut after one split as the whole would."""
    start = 0
    while start < len(data):
        end = data.find("\n", start + SPLIT_BLOCK_CHARS) + 1 or len(data)
        pieces = _CONTROL.split(data[start:end])
        yield from zip(pieces[:-1:2], pieces[1::2], strict=True)
        if pieces[-1]:
            yield pieces[-1], ""
        start = end


@lru_cache(maxsize=1024)
def _sequence(control: str) -> tuple[str, tuple[int, ...]]:
    """A control sequence's final character and its parameters as pyte reads them (none given is 0, and at most
    `PYTE_MAX_PARAMETER`); programs write the same few on every line, so each is read once."""
    return control[-1], tuple(min(parameter(n), PYTE_MAX_PARAMETER) for n in control[2:-1].split(";"))


def _mark(saved: Sequence[Any]) -> tuple[int, int] | None:
    """The cursor position an earlier screen saved (`None` for none)."""
    return (saved[-1].cursor.x, saved[-1].cursor.y) if saved else None


def _plain(saved: Sequence[Any]) -> bool:
    """Whether the cursor an earlier screen saved (if any) was saved in the modes drawn here (no origin mode, line
    wrapping on, the default character sets)."""
    if not saved:
        return True
    point = saved[-1]
    charsets_plain = point.g0_charset == charsets.LAT1_MAP and point.g1_charset == charsets.VT100_MAP
    return charsets_plain and not point.charset and not point.origin and point.wrap


def _savepoints(mark: tuple[int, int] | None, saved: Sequence[Any]) -> list[Any]:
    """pyte's savepoints for the cursor saved at `mark` (`saved` itself when it is the one an earlier screen saved)."""
    if mark is None:
        return list(saved)
    if saved and (saved[-1].cursor.x, saved[-1].cursor.y) == mark:
        return list(saved)
    return [Savepoint(Cursor(*mark), charsets.LAT1_MAP, charsets.VT100_MAP, 0, False, True)]


__all__ = ["draw", "fast_screen"]
