"""Tool output as a terminal shows it once the program ended: progress frames collapsed, colour codes gone.

Programs an agent runs (`pip`, `tqdm` loops, `pytest --color=yes`, `docker pull`) write for a
terminal: a progress bar is thousands of frames each rewritten with `\\r`, every word of a
coloured log is wrapped in escape codes, a multi-bar display moves the cursor up and down. Read
as text, each frame is a line the model pays for and no terminal ever showed. This module
renders such text with a terminal emulator (pyte) into the lines a user's terminal shows.

pyte's screens have a fixed size and draw about 0.3-1 MB a second, while an output can be
tens of megabytes of log. So the emulator sees only what needs it, and every shortcut is
one a terminal cannot tell apart:

- text with no carriage return (other than in `\\r\\n`), backspace or escape is not rendered
  at all (three substring scans);
- colour and other codes that never move the cursor (SGR, OSC titles and links, cursor
  visibility) are removed with one regular expression;
- a line (up to `\\n`) that moves the cursor only within itself is rendered on its own: the
  frames before the last erase of the line are invisible, as is a plain frame that a later
  plain frame covers; the frames left are overlaid directly when they hold only
  one-cell characters, and drawn on a one-row pyte screen otherwise;
- lines that move the cursor up or down, or place it, are drawn on a pyte screen of the
  height the program assumed, together with the lines around them that such moves can reach
  (one screen height either side); lines that scroll off its top are what the terminal's
  scrollback keeps. `SCREEN_BUDGET_CHARS` bounds what one output sends there; lines beyond it
  are rendered line by line, and the result counts them (`approximate_lines`).

Width is unbounded: a line is never wrapped, as a log shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyte
from pyte import modes

SCREEN_ROWS = 24
"""Height of the screen lines that move the cursor vertically are drawn on, unless they say they assumed more."""

MAX_SCREEN_ROWS = 500
"""Cap on the screen height a program's own cursor moves can ask for."""

SCREEN_BUDGET_CHARS = 200_000
"""Characters of one output the full screen emulator may draw (about half a second); the rest go line by line."""

MAX_COLUMN_JUMP = 10_000
"""Cap on how far right one cursor move may reach on the one-row screen."""

_INVISIBLE = re.compile(
    r"\x1b\[[0-9;:]*m"  # SGR: colours and attributes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b\[\?(?:1|12|25|1004|2004)[hl]"  # cursor keys mode, blinking, visibility, focus and paste reporting
    r"|\x1b[=>]"  # keypad modes
)
"""Sequences that change nothing a terminal shows once the program ended."""

_VERTICAL = re.compile(r"\x1b(?:\[[0-9;]*[ABEFHJLMSTdfrsu]|\[\?(?:47|1047|1049)[hl]|[78DEMc])|[\x0b\x0c]")
"""Sequences that move the cursor to another row, place it, scroll, or clear the screen."""

_ERASE_LINE_START = re.compile(r"\x1b\[[02]?K")
"""An erase of the line right after a carriage return: every frame before it is invisible."""

_TRAILING_ERASES = ("\x1b[K", "\x1b[0K")
"""An erase to the end of the line where the line ends: nothing right of the cursor was drawn yet."""

_NOT_ONE_CELL = re.compile(
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

_NUMBERS = re.compile(r"\x1b\[(\d+)[CG`]")


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a terminal shows of an output, and how it was had."""

    text: str
    screen_lines: int
    """Input lines drawn on the full screen emulator (they move the cursor between rows, or are near one that does)."""
    approximate_lines: int
    """Lines that moved the cursor between rows but, past `SCREEN_BUDGET_CHARS`, were rendered line by line."""


def needs_rendering(text: str) -> bool:
    """Whether `text` holds anything a terminal would not show as it is: an escape, a backspace, a lone `\\r`."""
    if "\x1b" in text or "\b" in text:
        return True
    returns = text.count("\r")
    return returns != 0 and returns != text.count("\r\n")


def render(text: str) -> Rendered:
    """The lines a terminal shows once the program that wrote `text` ended (see the module docstring)."""
    if not needs_rendering(text):
        return Rendered(text, 0, 0)
    lines = _INVISIBLE.sub("", text).replace("\r\n", "\n").split("\n")
    vertical = [i for i, line in enumerate(lines) if "\x1b" in line and _VERTICAL.search(line)]
    vertical += [i for i, line in enumerate(lines) if ("\x0b" in line or "\x0c" in line) and i not in vertical]
    out: list[str] = []
    done = 0
    budget = SCREEN_BUDGET_CHARS
    screened = approximate = 0
    for start, end, rows in _regions(lines, sorted(vertical)):
        out.extend(_line(line) for line in lines[done:start])
        size = sum(len(line) + 1 for line in lines[start:end])
        if size <= budget:
            budget -= size
            out.extend(_screen(lines[start:end], rows))
            screened += end - start
        else:
            out.extend(_line(_VERTICAL.sub("", line)) for line in lines[start:end])
            approximate += sum(1 for i in vertical if start <= i < end)
        done = end
    out.extend(_line(line) for line in lines[done:])
    return Rendered("\n".join(out), screened, approximate)


def _regions(lines: list[str], vertical: list[int]) -> list[tuple[int, int, int]]:
    """`(start, end, rows)` of each stretch of lines to draw on a full screen: the lines that move the cursor between
    rows and, either side, the lines such a move can reach (one screen height); stretches that touch are merged."""
    regions: list[tuple[int, int, int]] = []
    for index in vertical:
        rows = _rows(lines[index])
        start, end = max(0, index - rows), min(len(lines), index + rows + 1)
        if regions and start <= regions[-1][1]:
            first, _last, most = regions[-1]
            regions[-1] = (first, max(end, _last), max(rows, most))
        else:
            regions.append((start, end, rows))
    return regions


def _rows(line: str) -> int:
    """The screen height a line's own cursor moves say the program assumed (at least `SCREEN_ROWS`)."""
    asked = [int(n) for n in re.findall(r"\x1b\[(\d+)[ABEFd]", line)]
    asked += [int(n) for n in re.findall(r"\x1b\[(\d+)(?:;\d*)?[Hfr]", line)]
    asked += [int(n) for n in re.findall(r"\x1b\[\d*;(\d+)r", line)]
    return min(MAX_SCREEN_ROWS, max([SCREEN_ROWS, *(n + 1 for n in asked)]))


def _line(line: str) -> str:
    """One line (no `\\n`) that moves the cursor only within itself, as a terminal shows it."""
    if "\r" not in line and "\x1b" not in line and "\b" not in line:
        return line
    line = line.rstrip("\r")
    while line.endswith(_TRAILING_ERASES):
        line = line[: line.rindex("\x1b")].rstrip("\r")
    frames = line.split("\r")
    kept: list[str] = []
    covered = 0
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        if "\x1b" not in frame and "\b" not in frame and not _NOT_ONE_CELL.search(frame):
            if len(frame) > covered:  # shows past what the later frames drew
                kept.append(frame)
                covered = len(frame)
            continue
        kept.append(frame)
        if _ERASE_LINE_START.match(frame) is None:
            kept.extend(reversed(frames[:index]))  # what this frame leaves of the earlier ones is the emulator's to say
        break
    kept.reverse()
    if all("\x1b" not in f and "\b" not in f and not _NOT_ONE_CELL.search(f) for f in kept):
        shown = ""
        for frame in reversed(kept):  # the last frame, then what each earlier one shows past it
            if len(frame) > len(shown):
                shown += frame[len(shown) :]
        return shown.rstrip()
    return _one_row("\r".join(kept))


def _one_row(data: str) -> str:
    """`data` drawn on a one-row pyte screen wide enough that nothing wraps."""
    jumps = [int(n) for n in _NUMBERS.findall(data)]
    columns = len(data) + 1 + min(MAX_COLUMN_JUMP, max(jumps, default=0))
    screen = _Screen(columns, 1)
    pyte.Stream(screen).feed(data)
    return "\n".join([*screen.gone, _row_text(screen.buffer[0])])


def _screen(lines: list[str], rows: int) -> list[str]:
    """`lines` drawn on a pyte screen `rows` high: what scrolled off its top, then what it shows at the end."""
    width = max(80, *(len(line) for line in lines))
    screen = _Screen(width + 1, rows)
    screen.set_mode(modes.LNM)  # a `\n` starts the next line at its first column, as a terminal's tty makes it
    stream = pyte.Stream(screen)
    stream.feed("\n".join(line if _VERTICAL.search(line) else _line(line) for line in lines))
    shown = [_row_text(screen.buffer[y]) if y in screen.buffer else "" for y in range(rows)]
    last = max([screen.cursor.y, *(y for y, row in enumerate(shown) if row)])
    return [*screen.gone, *shown[: last + 1]]


def full_screen_lines(text: str, rows: int = SCREEN_ROWS, columns: int = 1_000) -> list[str]:
    """The non-blank lines a terminal `rows` high shows of `text` at the end, its scrollback included: the whole of
    `text` drawn on one pyte screen, with no shortcut (slow; the reference `render` is checked against)."""
    screen = _Screen(columns, rows)
    screen.set_mode(modes.LNM)
    pyte.Stream(screen).feed(text)
    shown = [_row_text(screen.buffer[y]) for y in range(rows)]
    return [line for line in [*screen.gone, *shown] if line.strip()]


def _row_text(row: Any) -> str:
    if not row:
        return ""
    return "".join(row[x].data for x in range(max(row) + 1)).rstrip()


class _Screen(pyte.Screen):
    """A pyte screen that keeps the lines scrolled off its top (a terminal's scrollback)."""

    def __init__(self, columns: int, lines: int) -> None:
        self.gone: list[str] = []
        super().__init__(columns, lines)

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y == bottom and top == 0:
            self.gone.append(_row_text(self.buffer[0]) if 0 in self.buffer else "")
        super().index()


__all__ = ["Rendered", "full_screen_lines", "needs_rendering", "render"]
