"""Drawing by pyte's rules without pyte, for what progress displays and spinners write.

pyte draws about 0.3-1 MB a second, and a progress display can write tens of megabytes of frames.
Most of it is one- and two-cell text, carriage returns, backspaces, cursor moves and line erases: for
those, these functions follow pyte's rules a text run at a time, in time linear in the input,
and return `None` for anything else, which `ctxwarden.clip.terminal` then gives to pyte. A
property test checks each against pyte on every mix of what it draws.

A row is drawn as a list of cells after a count of blank ones (`Row`): the cursor goes on moving
right when a program erases its line without returning (`X CSI 2K`, a spinner that forgot its
`\\r`), and a row erased is then redrawn from where the cursor stands, not padded from the first
column again; padded every time, 100,000 such frames took 13 s, with tabs 180 s. Cursor moves
can still make a run's blanks cost more than the run (`CSI 9999 C` then a character), so a
drawing stops at `WORK_PER_CHAR` cells moved per character of its input, and returns `None`:
the caller then draws the line another way.
"""

from __future__ import annotations

import re

from pyte.screens import wcwidth  # pyte's own widths (cached), so a cell here is a cell there

PYTE_MAX_PARAMETER = 9_999
"""pyte reads a larger parameter of a sequence as this."""

TAB_WIDTH = 8
"""pyte's tab stops: every 8 columns."""

MAX_COLUMN_JUMP = 10_000
"""Cap on how far right the cursor moves of one line may reach, beyond its own text."""

NOT_ONE_CELL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f"
    "\u0900-\u0dff\u0e31-\u0e3a\u0e47-\u0e4e\u1100-\u115f\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u20d0-\u20ff\u231a\u231b\u2329\u232a\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615"
    "\u2648-\u2653\u267f\u2693\u26a1\u26aa-\u26ff\u2705\u270a\u270b\u2728\u274c\u274e\u2753-\u2757\u2795-\u2797"
    "\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55\u2e80-\u303e\u3041-\ua4cf\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\ufe00-\ufe0f\ufe10-\ufe19\ufe20-\ufe6f\uff00-\uff60\uffe0-\uffe6\ufff9-\ufffb"
    "\U0001f000-\U0001faff\U00020000-\U0003fffd\U000e0000-\U000e0fff\t]"
)
"""Characters that do not take exactly one cell (wide, combining, zero-width, tabs, other controls): a frame holding
none of them covers exactly as many cells as it has characters."""

NOT_ONE_CELL_BUT_RETURN = re.compile(NOT_ONE_CELL.pattern.replace("\x0b-\x1f", "\x0b\x0c\x0e-\x1f", 1))
"""`NOT_ONE_CELL` but for `\\r`: a line holding none is frames of text, each from the first column."""

COLUMN_JUMPS = re.compile(r"\x1b\[(\d+)[CGa`]")
"""Moves right, to a column or by columns (`CSI n C` and its other name `CSI n a`, `CSI n G` and `CSI n \\``), whose
sizes widen the one-row screen."""

REPEATS = re.compile(r"\x1b\[([0-9]*)b")
"""Repeats of the character drawn last (REP, `CSI n b`), which widen a line by `n` characters."""

MAX_REPEAT_CELLS = 100_000
"""Characters the repeats (`CSI n b`) of one output may draw, pyte drawing each at a time (about a microsecond): a
line asking for more than is left is drawn without the emulator."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Controls, tabs and backspaces among them: a frame holding one moves the cursor its own way."""

_ROW_CONTROL = re.compile(r"(\r|\t|\x08+|\x1b\[[0-9]*[CDGK])")
"""What `fast_row` draws besides text (ASCII digits only: pyte reads any other as a failure)."""


PARAMETER_DIGITS = 7
"""Digits of a sequence's parameter that are read: a larger one counts as `10 ** PARAMETER_DIGITS`, past every cap
here (pyte's is `PYTE_MAX_PARAMETER`)."""


def parameter(digits: str) -> int:
    """A sequence's numeric parameter (`""`, none, is 0), read whatever its length: an output may write thousands of
    digits, which `int` refuses past 4,300 (and the tool call failed with it)."""
    digits = digits.lstrip("0")
    return int(digits or 0) if len(digits) < PARAMETER_DIGITS else 10**PARAMETER_DIGITS


def width_bound(text: str) -> int:
    """Cells `text` can reach from the first column, drawn on one row: two a character, a tab's eight, and two for
    each repeat it asks for (up to `MAX_REPEAT_CELLS`)."""
    return 2 * len(text) + (TAB_WIDTH - 2) * text.count("\t") + 2 * min(repeat_count(text), MAX_REPEAT_CELLS)


def repeat_count(text: str) -> int:
    """Characters the repeats (`CSI n b`) in `text` ask pyte to draw (a count of 0 or none is 1, as pyte reads it)."""
    if "\x1b[" not in text or "b" not in text:
        return 0
    return sum(min(parameter(n) or 1, PYTE_MAX_PARAMETER) for n in REPEATS.findall(text))


def last_column(data: str) -> int:
    """The last column of the one-row screen `data` is drawn on: wide enough for `width_bound(data)` and all the moves
    right it asks for (up to `MAX_COLUMN_JUMP` in all: moves by columns add up), so a line is never wrapped."""
    jumps = sum(min(parameter(n), MAX_COLUMN_JUMP) for n in COLUMN_JUMPS.findall(data))
    return width_bound(data) + min(MAX_COLUMN_JUMP, jumps)


def widest_column(block: str, lines: list[str]) -> int:
    """The largest `last_column` of `lines`, the lines of `block`: from their lengths alone when `block` moves right
    by no column and repeats nothing (a screen region of tens of thousands of lines was read a line at a time)."""
    if "\x1b[" in block and (COLUMN_JUMPS.search(block) or REPEATS.search(block)):
        return max(map(last_column, lines))
    if "\t" in block:
        return max(2 * len(line) + (TAB_WIDTH - 2) * line.count("\t") for line in lines)
    return 2 * max(map(len, lines))


WORK_PER_CHAR = 32
"""Cells a drawing may pad or move per character of its input (above `WORK_FLOOR`) before it gives up."""

WORK_FLOOR = 1_000_000
"""Cells any drawing may pad or move: a few jumps far right are what a wide display asks for."""

STUB = "\x00"
"""The cell after a two-cell character (pyte's empty stub). No text drawn here holds it: `cells` leaves a control to
pyte."""


def cells(text: str) -> str | None:
    """The cells pyte draws `text` into, from the cursor on, one character each: a one-cell character, or a two-cell
    one (CJK, most emoji) and the `STUB` pyte puts after it; `None` when `text` holds any other (a combining or
    zero-width character, a control), whose rules these functions leave to pyte. Widths are pyte's own."""
    if not NOT_ONE_CELL.search(text):
        return text
    drawn: list[str] = []
    for char in text:
        width = wcwidth(char)
        if width == 1:
            drawn.append(char)
        elif width == 2:
            drawn += (char, STUB)
        else:
            return None
    return "".join(drawn)


def overlay_frames(line: str) -> str:
    """The frames of `line` (split at `\\r`, each of one-cell characters from the first column): the last, then what
    each earlier one shows past it, read from the last one back (a spinner's million frames are never listed)."""
    shown = ""
    end = len(line)
    while True:
        start = line.rfind("\r", 0, end) + 1
        if end - start > len(shown):
            shown += line[start + len(shown) : end]
        if start == 0:
            return shown.rstrip()
        end = start - 1


def text_width(frame: str) -> int | None:
    """The cells a frame of text draws from the first column (two-cell characters count two, zero-width ones none);
    `None` for one holding an escape, a backspace, a tab or another control, whose reach is the emulator's to find.
    A frame drawn after `\\r` over cells a later frame draws all of is invisible, whatever its characters."""
    others = NOT_ONE_CELL.findall(frame)  # the characters that do not take one cell: few, even in a CJK line
    if not others:
        return len(frame)
    if "\x1b" in frame or _CONTROL.search(frame):
        return None
    widths = [wcwidth(char) for char in others]
    return None if -1 in widths else len(frame) - len(others) + sum(widths)


def _shown(row: str) -> str:
    return row.replace(STUB, "").rstrip()


class Row:
    """One row of cells: `lead` blank ones, then `cells`. Each method returns the cells it padded or moved beyond the
    ones it drew, which the caller bounds (`WORK_PER_CHAR`)."""

    __slots__ = ("cells", "lead")

    def __init__(self) -> None:
        self.lead = 0
        self.cells: list[str] = []

    def draw(self, x: int, drawn: str) -> int:
        """`drawn` (one cell a character) from column `x` on."""
        cells = self.cells
        if not cells:
            self.lead = x
            cells.extend(drawn)
            return 0
        moved = 0
        if x < self.lead:  # left of the blanks: the row is kept from the first column from now on
            moved = self.lead + len(cells)
            cells[0:0] = " " * self.lead
            self.lead = 0
        at = x - self.lead
        if at > len(cells):
            moved += at - len(cells)
            cells.extend(" " * (at - len(cells)))
        cells[at : at + len(drawn)] = drawn
        return moved

    def erase_to_end(self, x: int) -> int:
        """`CSI 0 K`: column `x` and every one after it."""
        if x <= self.lead:
            self.clear()
        else:
            del self.cells[x - self.lead :]
        return 0

    def erase_to_start(self, x: int) -> int:
        """`CSI 1 K`: every column up to `x`, `x` included."""
        upto = x + 1 - self.lead
        if upto <= 0:
            return 0
        if upto >= len(self.cells):
            self.clear()
            return 0
        self.cells[:upto] = " " * upto
        return upto

    def clear(self) -> int:
        """`CSI 2 K`: the whole row."""
        self.lead = 0
        self.cells.clear()
        return 0

    def shown(self) -> str:
        """The row as a terminal shows it (two-cell characters' stubs and trailing blanks left out)."""
        if not self.cells:
            return ""
        return _shown(" " * self.lead + "".join(self.cells) if self.lead else "".join(self.cells))


SHORT_ROW = 256
"""Cells a `TextRow` holds; a longer row is kept as a `Row`, whose draws do not copy it."""


class TextRow:
    """A `Row` kept as a string while it is short: a screen's rows are short and scroll off often, where joining a
    list of cells costs more than copying the row at each draw. Past `SHORT_ROW` cells, each draw would copy a long
    row (a character drawn at the end of a row a million cells long copies all of them): the row becomes a `Row`."""

    __slots__ = ("lead", "text")

    def __init__(self) -> None:
        self.lead = 0
        self.text = ""

    def draw(self, x: int, drawn: str) -> int:
        """`drawn` (one cell a character) from column `x` on."""
        text = self.text
        if not text:
            self.lead, self.text = x, drawn
            return 0
        moved = 0
        if x < self.lead:  # left of the blanks: the row is kept from the first column from now on
            moved = self.lead + len(text)
            text, self.lead = " " * self.lead + text, 0
        at = x - self.lead
        moved += max(at - len(text), 0)
        self.text = text[:at].ljust(at) + drawn + text[at + len(drawn) :]
        return moved

    def listed(self) -> Row:
        """This row as a `Row`."""
        row = Row()
        row.lead, row.cells = self.lead, list(self.text)
        return row

    def erase_to_end(self, x: int) -> int:
        """`CSI 0 K`: column `x` and every one after it."""
        if x <= self.lead:
            self.clear()
        else:
            self.text = self.text[: x - self.lead]
        return 0

    def erase_to_start(self, x: int) -> int:
        """`CSI 1 K`: every column up to `x`, `x` included."""
        upto = x + 1 - self.lead
        if upto <= 0:
            return 0
        if upto >= len(self.text):
            self.clear()
            return 0
        self.text = " " * upto + self.text[upto:]
        return upto

    def clear(self) -> int:
        """`CSI 2 K`: the whole row."""
        self.lead, self.text = 0, ""
        return 0

    def shown(self) -> str:
        """The row as a terminal shows it (two-cell characters' stubs and trailing blanks left out)."""
        return _shown(" " * self.lead + self.text if self.lead else self.text) if self.text else ""


def work_limit(data: str) -> int:
    """Cells a drawing of `data` may pad or move before it gives up."""
    return WORK_FLOOR + WORK_PER_CHAR * len(data)


def fast_row(data: str) -> str | None:
    """What a one-row pyte screen `last_column(data) + 1` wide shows of `data`, drawn without pyte.

    For `data` of one- and two-cell characters, `\\r`, tabs, backspaces, moves along the line (`CSI n C`, `CSI n D`,
    `CSI n G`) and line erases (`CSI 0/1/2 K`): what spinners and counters rewritten in place write (`|\\b/\\b`,
    npm's `CSI 2K CSI 1G ⠋ ...`); `None` for anything else, or for a line that would reach the screen's last column
    (pyte wraps it there). pyte's own rules, a text run at a time: exact, and linear in the size of `data` however many
    frames it holds, where pyte erases a whole screen-wide line for each frame."""
    parts = _ROW_CONTROL.split(data)
    if any("\x1b" in text for text in parts[0::2]):
        return None
    last = last_column(data)
    row = Row()
    x = 0
    left = work_limit(data)
    for index, part in enumerate(parts):
        if left < 0:
            return None
        if index % 2 == 0:
            drawn = cells(part)
            if drawn is None or x + len(drawn) > last:
                return None
            if drawn:
                left -= row.draw(x, drawn)
            x += len(drawn)
        elif part == "\r":
            x = 0
        elif part == "\t":
            x = next_tab_stop(x, last + 1)
        elif part[0] == "\b":
            x = max(0, x - len(part))
        else:
            count, op = min(parameter(part[2:-1]), PYTE_MAX_PARAMETER), part[-1]
            if op == "C":
                x = min(x + (count or 1), last)
            elif op == "D":
                x = max(x - (count or 1), 0)
            elif op == "G":
                x = min((count or 1) - 1, last)  # to a column, counted from 1
            elif count == 0:
                left -= row.erase_to_end(x)
            elif count == 1:
                left -= row.erase_to_start(x)
            elif count == 2:
                left -= row.clear()
            else:
                return None  # pyte fails on it
    return row.shown() if left >= 0 else None


def next_tab_stop(x: int, columns: int) -> int:
    """Where a tab from column `x` leads on a screen `columns` wide: pyte's tab stops are every 8 columns, and past the
    last one it stops at the last column (pyte sorts every stop of the screen for each tab: an output-wide line of
    tabs costs it minutes)."""
    stop = (x // TAB_WIDTH + 1) * TAB_WIDTH
    return stop if stop < columns else columns - 1


__all__ = [
    "MAX_COLUMN_JUMP",
    "MAX_REPEAT_CELLS",
    "NOT_ONE_CELL",
    "PYTE_MAX_PARAMETER",
    "SHORT_ROW",
    "STUB",
    "TAB_WIDTH",
    "WORK_FLOOR",
    "WORK_PER_CHAR",
    "Row",
    "TextRow",
    "cells",
    "fast_row",
    "last_column",
    "next_tab_stop",
    "repeat_count",
    "width_bound",
    "work_limit",
]
