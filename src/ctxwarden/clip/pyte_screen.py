"""The pyte screen `clip.terminal` draws on when its own drawings cannot: scrollback kept, line edits on drawn cells.

pyte's screens have a fixed size, drop the lines that scroll off their top, and do some
operations across the whole width of the screen for every sequence. Those screens are as
wide as an output is long here, so `Screen` keeps what scrolls off (a terminal's
scrollback) and does those operations on the cells drawn only, and it counts the cells its
line and screen edits walk, so that a rendering can bound them (`PYTE_CELL_BUDGET`).
"""

from __future__ import annotations

import copy
import inspect
import unicodedata
from typing import Any

import pyte
from pyte.screens import wcwidth

from ctxwarden.clip.fast_draw import MAX_REPEAT_CELLS, NOT_ONE_CELL, PYTE_MAX_PARAMETER, next_tab_stop


def row_text(row: Any) -> str:
    if not row:
        return ""
    return "".join(row[x].data for x in range(max(row) + 1)).rstrip()


class TooMuchWalking(Exception):
    """A drawing would walk more cells than its budget allows: it stops as a drawing pyte fails on does."""


class Screen(pyte.Screen):
    """A pyte screen that keeps the lines scrolled off its top (a terminal's scrollback), and ignores the private
    (`CSI ?`) forms of sequences pyte has no private form of (it would raise on them).

    Its screens are as wide as the output is long, so what pyte does across the whole width for each sequence (erase
    a line, insert or delete characters, find the next tab stop) is done here on the cells drawn only: an undrawn
    cell reads as the blank an erased one does, so the text is the same and a frame costs what it drew. And a
    zero-width character that combines nothing (an emoji's variation selector, a joiner) stays with the cell before
    it, as a terminal shows it; pyte dropped the rest of the text after one (`⚠️ 3 vulnerabilities` came out `⚠`)."""

    def __init__(self, columns: int, lines: int) -> None:
        self.gone: list[str] = []
        self.walk_left = 1 << 62  # cells the walks below may still visit: unbounded unless a rendering's budget says
        self.last_drawn = ""  # the character a repeat (`CSI n b`) draws again
        self.repeats_left = MAX_REPEAT_CELLS
        super().__init__(columns, lines)

    def _walk(self, line: Any) -> Any:
        """`line`, once the cells of it about to be walked are taken from the budget (past it: the drawing stops)."""
        self.walk_left -= len(line) + 1
        if self.walk_left < 0:
            raise TooMuchWalking
        return line

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        for y in self.buffer if how in (0, 1, 2, 3) else ():
            self._walk(self.buffer[y])
        super().erase_in_display(how, *args, **kwargs)

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y == bottom and top == 0:
            self.gone.append(row_text(self.buffer[0]) if 0 in self.buffer else "")
        super().index()

    def reset(self) -> None:
        super().reset()
        self.standard_tabs = True

    def draw(self, data: str) -> None:
        if data:
            self.last_drawn = data[-1] if wcwidth(data[-1]) > 0 else self.last_drawn
        if not NOT_ONE_CELL.search(data):
            super().draw(data)
            return
        start = 0
        for index, char in enumerate(data):
            if wcwidth(char) == 0 and not unicodedata.combining(char):
                super().draw(data[start:index])
                if self.cursor.x:
                    line = self.buffer[self.cursor.y]
                    line[self.cursor.x - 1] = line[self.cursor.x - 1]._replace(data=line[self.cursor.x - 1].data + char)
                start = index + 1
        super().draw(data[start:])

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how not in (0, 1, 2):
            raise ValueError(f"erase in line {how}: pyte has no such erase")  # as pyte fails: the line is stripped
        self.dirty.add(self.cursor.y)
        line, x, end = self._walk(self.buffer[self.cursor.y]), self.cursor.x, self.columns
        erased = (lambda c: x <= c < end) if how == 0 else (lambda c: c <= x) if how == 1 else (lambda c: c < end)
        for column in [c for c in line if erased(c)]:
            del line[column]

    def insert_characters(self, count: int | None = None) -> None:
        self.dirty.add(self.cursor.y)
        count, line, x, end = count or 1, self._walk(self.buffer[self.cursor.y]), self.cursor.x, self.columns
        moved = {c + count: line[c] for c in line if x <= c and c + count <= end}  # pyte keeps one cell at `end`
        for column in [c for c in line if x <= c <= end]:
            del line[column]
        line.update(moved)

    def delete_characters(self, count: int | None = None) -> None:
        self.dirty.add(self.cursor.y)
        count, line, x, end = count or 1, self._walk(self.buffer[self.cursor.y]), self.cursor.x, self.columns
        moved = {c - count: line[c] for c in line if x + count <= c <= end}
        for column in [c for c in line if x <= c < end or (c == end and x + count <= end)]:
            del line[column]
        line.update(moved)

    def save_cursor(self) -> None:
        """One saved cursor, as a terminal keeps: pyte stacked them, and popped one on each restore."""
        super().save_cursor()
        del self.savepoints[:-1]

    def restore_cursor(self) -> None:
        """Back to the saved cursor, which stays saved: a display that saves once and restores before each frame
        (`tput sc`, then `tput rc` per update) draws every frame in the same place, not the second at the top left."""
        kept = self.savepoints[-1]._replace(cursor=copy.copy(self.savepoints[-1].cursor)) if self.savepoints else None
        super().restore_cursor()  # moves the saved cursor object itself into the region: the copy stays as saved
        if kept is not None:
            self.savepoints[:] = [kept]

    def save_cursor_csi(self, *params: int, private: bool = False) -> None:
        """`CSI s`, which terminals read as `ESC 7` (pyte ignores it)."""
        if not private and params in ((), (0,)):
            self.save_cursor()

    def restore_cursor_csi(self, *params: int, private: bool = False) -> None:
        """`CSI u`, which terminals read as `ESC 8`; with a parameter it is a keyboard protocol's, not a move."""
        if not private and params in ((), (0,)):
            self.restore_cursor()

    def scroll_up(self, *params: int, private: bool = False) -> None:
        """`CSI n S`: the scrolling region moves up `n` lines, the cursor stays (pyte ignores it)."""
        self._scroll(params, private, up=True)

    def scroll_down(self, *params: int, private: bool = False) -> None:
        """`CSI n T`: the scrolling region moves down `n` lines, the cursor stays (with five parameters it is a
        mouse-tracking sequence, not a scroll)."""
        self._scroll(params, private, up=False)

    def _scroll(self, params: tuple[int, ...], private: bool, up: bool) -> None:
        if private or len(params) > 1:
            return
        top, bottom = self.margins or (0, self.lines - 1)
        y = self.cursor.y
        self.cursor.y = bottom if up else top
        for _ in range(min((params or (1,))[0] or 1, bottom - top + 1)):
            self.index() if up else self.reverse_index()
        self.cursor.y = y

    def repeat_last(self, *params: int, private: bool = False) -> None:
        """`CSI n b` (REP): the character drawn last, `n` more times, as xterm draws it (ncurses writes it for a run of
        one character, a rule of `─` or a bar of `=`, where the terminal's description has `rep`; pyte ignores it).
        Past what is left of `MAX_REPEAT_CELLS` the drawing stops, as one past its walking budget does."""
        if private or not self.last_drawn or len(params) > 1:
            return
        count = min((params or (1,))[0] or 1, PYTE_MAX_PARAMETER)
        self.repeats_left -= count
        if self.repeats_left < 0:
            raise TooMuchWalking
        self.walk_left -= count
        if self.walk_left < 0:
            raise TooMuchWalking
        self.draw(self.last_drawn * count)

    def tab(self) -> None:
        if not self.standard_tabs:
            super().tab()
            return
        self.cursor.x = next_tab_stop(self.cursor.x, self.columns)

    def set_tab_stop(self) -> None:
        self.standard_tabs = False
        super().set_tab_stop()

    def clear_tab_stop(self, how: int = 0) -> None:
        self.standard_tabs = False
        super().clear_tab_stop(how)


_MISSING_CSI = {
    **{"s": "save_cursor_csi", "u": "restore_cursor_csi", "S": "scroll_up", "T": "scroll_down"},
    **{"b": "repeat_last", "`": "cursor_to_column"},
}


class Stream(pyte.Stream):
    """pyte's parser, with the sequences it lacks that programs write to a terminal: `CSI s` and `CSI u` (save and
    restore the cursor), `CSI S` and `CSI T` (scroll), `CSI n b` (repeat the last character) and `CSI n \\`` (to
    column `n`: pyte reads the column move under the final byte `'`, which no terminal sends)."""

    def __init__(self, screen: Screen) -> None:
        self.csi = {**pyte.Stream.csi, **_MISSING_CSI}
        super().__init__(screen)


def _public_only(name: str) -> Any:
    method = getattr(Screen, name)

    def call(self: pyte.Screen, *params: int, private: bool = False) -> None:
        if not private:
            method(self, *params)

    return call


for _name in set(pyte.Stream.csi.values()):
    _parameters = inspect.signature(getattr(pyte.Screen, _name)).parameters.values()
    if not any(p.name == "private" or p.kind is p.VAR_KEYWORD for p in _parameters):
        setattr(Screen, _name, _public_only(_name))


__all__ = ["Screen", "Stream", "TooMuchWalking", "row_text"]
