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
  visibility, DCS and APC strings such as sixel and kitty images) are removed with one regular expression, a block of
  lines at a time;
- lines with none of those left come through as slices of the text, many lines at once;
- a line (up to `\\n`) that moves the cursor only within itself is rendered on its own: the
  frames before the last erase of the line are invisible, as is a plain frame that a later
  plain frame covers; the frames left are overlaid directly when they hold only
  one-cell characters, drawn by pyte's rules without it when they also hold two-cell
  characters, backspaces, moves along the line and line erases (`fast_row`: a spinner of
  any length), and drawn on a one-row pyte screen otherwise;
- lines that move the cursor up or down, or place it, are drawn on a screen of the height the
  program assumed, together with the lines around them that such moves can reach (one screen
  height either side, or for a line that only moves up, far from other moves, as many lines as
  it moves: `clip.screen_regions`); lines that scroll off its top are what the terminal's
  scrollback keeps.
  When they hold only one- and two-cell text, `\\r`, `\\n`, cursor up and down, line and screen
  erases, positions, scrolling regions and a saved cursor (what multi-bar progress displays and
  apt's status line below its log write), `clip.fast_screen` draws them by pyte's rules a text
  run at a time, exactly and whatever their size; otherwise pyte does.

What a full-screen program (`less`, `vim`, `htop`, git's pager) draws on the alternate screen is gone once it leaves it
(`CSI ?1049l`): the terminal shows the main screen again, as it was. pyte has one screen, on which the program's own
`CSI 2J` erased every line the main screen held, so those spans are taken out before drawing (one still open at the
end stays: the program's screen is what shows).

`SCREEN_BUDGET_CHARS` bounds what pyte draws of one output, one-row lines included, and
`PYTE_CELL_BUDGET` the cells its inserts and deletes of characters may move; lines beyond them
are rendered line by line with their escape codes stripped, and the result counts them
(`approximate_lines`). A sequence pyte fails on leaves its line to the same treatment: the
output always arrives. Width is unbounded: a line is never wrapped, as a log shows it (every
character counted at two cells, the most one takes, and a tab at eight).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyte import modes

from ctxwarden.clip.fast_draw import (
    MAX_REPEAT_CELLS,
    NOT_ONE_CELL,
    NOT_ONE_CELL_BUT_RETURN,
    fast_row,
    last_column,
    overlay_frames,
    repeat_count,
    text_width,
    widest_column,
)
from ctxwarden.clip.fast_screen import draw as fast_screen
from ctxwarden.clip.pyte_screen import Screen, Stream, row_text
from ctxwarden.clip.screen_regions import SCREEN_ROWS, VERTICAL, stretches

SCREEN_BUDGET_CHARS = 200_000
"""Characters of one output the full screen emulator may draw (about half a second); the rest go line by line."""

JOINED_LINES = 1_024
"""Lines drawn one at a time that are joined into one string before the next."""

SUB_BLOCK_CHARS = 1 << 20
"""Characters of an output from which codes that change nothing shown are taken out at once."""

PYTE_CELL_BUDGET = 10_000_000
"""Cells pyte may walk for one output (under half a second). Erasing part of a line or of the screen, or
inserting or deleting characters, walks every cell drawn on the line or the screen, so a line that does it for each
frame without erasing what it drew costs pyte in the square of its size: 16,000 `X CSI P` frames (96 KB) took it
7 s. Past the budget, a drawing stops as one pyte fails on does."""

_STRING = r"\x1b[PX^_](?:[^\x1b\x18\x1a]|\x1b\x1b)*(?:\x1b\\)?"
"""DCS (a sixel image, tmux's passthrough), SOS, PM or APC (a kitty image): shown by no terminal, it runs to ST or to
the escape, CAN or SUB that cuts it short, as the DEC parser has it. As text, a sixel chart was 72,980 tokens."""

_STRING_STARTS = ("\x1b]", "\x1bP", "\x1bX", "\x1b^", "\x1b_")  # control strings, which may hold line breaks

_INVISIBLE = re.compile(
    r"\x1b\[[0-9;:]*m"  # SGR: colours and attributes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    rf"|{_STRING}"  # DCS, SOS, PM, APC: images drawn in the terminal, replies, passthrough
    r"|\x1b\[\?(?:1|12|25|1004|2004)[hl]"  # cursor keys mode, blinking, visibility, focus and paste reporting
    r"|\x1b[=>]"  # keypad modes
)
"""Sequences that change nothing a terminal shows once the program ended."""

_DRAWN = re.compile(r"[\r\x1b\b]")
"""What makes a line need drawing: without any, it shows as it is."""

_OVERSTRUCK = re.compile(f"[^\n{NOT_ONE_CELL.pattern[1:-1]}]\b(?=[^\n{NOT_ONE_CELL.pattern[1:-1]}])")
"""A one-cell character that the next one overwrites after a backspace: what `man` and `nroff` write for bold
(`N\\bN`) and underline (`_\\bN`). Drawn, it shows as the character after the backspace alone, wherever it lands
(no line here reaches a last column, where a terminal's backspace would act otherwise), so it is taken out of a line
without escapes before drawing, and the line need not be drawn at all."""

_ALTERNATE_SCREEN = re.compile(r"\x1b\[\?(?:1049|1047|47)h.*?\x1b\[\?(?:1049|1047|47)l", re.DOTALL)
"""What a program wrote on the alternate screen, from entering it to leaving it: no terminal shows it afterwards."""

_ERASE_LINE_START = re.compile(r"\x1b\[[02]?K")
"""An erase of the line right after a carriage return: every frame before it is invisible."""

_WHOLE_LINE_ERASE = "\x1b[2K"
"""An erase of the whole line: followed by `\\r`, it leaves the line as blank as a new one."""

_ERASED_THEN_RETURN = _WHOLE_LINE_ERASE + "\r"

_ANY_ESCAPE = re.compile(
    rf"{_STRING}"
    r"|\x1b(?:\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x20-\x2f]*[\x30-\x7e]?)"
    r"|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]"
)
"""Any escape sequence, and the control characters other than tab, `\\n` and `\\r`: what a line drawn without the
emulator leaves out."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a terminal shows of an output, and how it was had."""

    text: str
    screen_lines: int
    """Input lines drawn on the full screen emulator (they move the cursor between rows, or are near one that does)."""
    approximate_lines: int
    """Lines rendered with their escape codes stripped instead of by the emulator: past `SCREEN_BUDGET_CHARS`, or
    holding a sequence pyte fails on (each line that moved the cursor between rows, or needed a one-row screen)."""


def needs_rendering(text: str) -> bool:
    """Whether `text` holds anything a terminal would not show as it is: an escape, a backspace, a lone `\\r`."""
    if "\x1b" in text or "\b" in text:
        return True
    returns = text.count("\r")
    return returns != 0 and returns != text.count("\r\n")


def terminal_output(text: str) -> bool:
    """Whether `text` is output written for a terminal that needs rendering: it `needs_rendering` and holds no NUL
    byte (a program's terminal output has none; binary data read as text has them everywhere, and its stray escape
    bytes mean nothing)."""
    return needs_rendering(text) and "\x00" not in text


def render(text: str) -> Rendered:
    """The lines a terminal shows once the program that wrote `text` ended (see the module docstring)."""
    if not needs_rendering(text):
        return Rendered(text, 0, 0)
    text = _ALTERNATE_SCREEN.sub("", _visible(text)).replace("\r\n", "\n")
    run = _Run(SCREEN_BUDGET_CHARS, PYTE_CELL_BUDGET)
    out: list[str] = []
    done = 0  # where the lines not drawn yet begin
    for stretch in stretches(text):
        if stretch.start > 0:
            out.extend(_each_line(text, done, stretch.first - 1, run))
        out.extend(run.screen(text[stretch.first : stretch.stop], stretch.rows, stretch.moves))
        done = stretch.stop + 1
    if done <= len(text):
        out.extend(_each_line(text, done, len(text), run))
    return Rendered("\n".join(out), run.screened, run.approximate)


def _visible(text: str) -> str:
    """`text` without the sequences that change nothing shown (`_INVISIBLE`), taken out a block of lines at a time:
    `re.sub` holds every piece between two matches until it joins them, and a coloured 20 MB log has 1.7 million."""
    if len(text) <= SUB_BLOCK_CHARS:
        return _INVISIBLE.sub("", text)
    blocks: list[str] = []
    start = 0
    while start < len(text):
        end = text.find("\n", start + SUB_BLOCK_CHARS) + 1 or len(text)
        title = max(text.rfind(o, start, end) for o in _STRING_STARTS)  # a title or an image may hold line breaks
        while title >= 0 and (found := _INVISIBLE.match(text, title)) is not None and found.end() >= end < len(text):
            end = text.find("\n", found.end()) + 1 or len(text)
            title = max(text.rfind(o, found.end(), end) for o in _STRING_STARTS)
        blocks.append(_INVISIBLE.sub("", text[start:end]))
        start = end
    return "".join(blocks)


def _each_line(text: str, begin: int, end: int, run: _Run) -> Iterator[str]:
    """The lines of `text[begin:end]`, each as a terminal shows it: a run of lines that need no drawing (no `\\r`,
    escape or backspace) as one slice of the text, the others drawn one at a time and joined `JOINED_LINES` at a
    time (a list of every line of a man page, each its own string, held four times the page)."""
    drawn: list[str] = []
    while (found := _DRAWN.search(text, begin, end)) is not None:  # the next line that needs drawing
        newline = text.rfind("\n", begin, found.start())
        starts = begin if newline < 0 else newline + 1
        if starts > begin:
            drawn.append(text[begin : starts - 1])
        ends = text.find("\n", found.start(), end)
        ends = end if ends < 0 else ends
        drawn.append(run.line(text[starts:ends]))
        if len(drawn) >= JOINED_LINES:
            yield "\n".join(drawn)
            drawn = []
        begin = ends + 1
        if begin > end:
            break
    else:
        drawn.append(text[begin:end])
    if drawn:
        yield "\n".join(drawn)


@dataclass(slots=True)
class _Run:
    """One rendering: what the emulator (pyte) may still draw, and how many lines were drawn which way."""

    budget: int = SCREEN_BUDGET_CHARS
    cells: int = PYTE_CELL_BUDGET
    repeats: int = MAX_REPEAT_CELLS
    """Characters pyte may still draw for repeats (`CSI n b`) in this output: each is drawn one at a time."""
    screened: int = 0
    approximate: int = 0
    saved: list[Any] = dataclasses.field(default_factory=list)
    """The cursor a screen saved (`ESC 7`, `CSI s`), for a restore in a later one: a terminal keeps it on one screen."""

    def pyte_may_draw(self, data: str) -> bool:
        """Whether pyte may draw `data` within what is left of the budgets of characters and repeats (the characters
        then taken from theirs)."""
        if len(data) > self.budget or self.cells <= 0 or repeat_count(data) > self.repeats:
            return False
        self.budget -= len(data)
        return True

    def line(self, line: str) -> str:
        """One line (no `\\n`) that moves the cursor only within itself, as a terminal shows it."""
        if "\r" not in line and "\x1b" not in line and "\b" not in line:
            return line
        if "\b" in line and "\x1b" not in line:  # an escape's last byte may precede a backspace: not a character
            line = _OVERSTRUCK.sub("", line)
            if "\r" not in line and "\b" not in line:
                return line
        line = _column_one(line).rstrip("\r")  # a last `\r` moves the cursor and draws nothing
        erased = line.rfind(_ERASED_THEN_RETURN)  # what came before shows nowhere
        if erased >= 0:
            line = line[erased + len(_ERASED_THEN_RETURN) :]
        if NOT_ONE_CELL_BUT_RETURN.search(line) is None:
            return overlay_frames(line)  # `\r` and text one cell a character: no frame needs drawing
        kept: list[str] = []
        covered = 0
        end = len(line)
        while True:  # the frames from the last, one `\r` back at a time: a spinner's frames are never all listed
            start = line.rfind("\r", 0, end) + 1
            frame = line[start:end]
            width = text_width(frame)
            if width is not None:
                if width > covered:  # shows past what the later frames drew
                    kept.append(frame)
                    covered = width
            else:
                kept.append(frame)
                if start > 0 and _ERASE_LINE_START.match(frame) is None:  # what it leaves of the earlier frames
                    kept.extend(reversed(line[: start - 1].split("\r")))  # is the emulator's
                break
            if start == 0:
                break
            end = start - 1
        kept.reverse()
        if all("\x1b" not in f and "\b" not in f and not NOT_ONE_CELL.search(f) for f in kept):
            return overlay_frames("\r".join(kept))
        data = "\r".join(kept)
        shown = fast_row(data)
        if shown is None and self.pyte_may_draw(data):
            shown = _one_row(data, self)
        if shown is None:
            self.approximate += 1
            stripped = _ANY_ESCAPE.sub(_backspace_kept, data)
            shown = fast_row(stripped)
            return overlay_frames(stripped.replace("\b", "")) if shown is None else shown
        return shown

    def screen(self, block: str, rows: int, vertical: int) -> list[str]:
        """The lines of `block` drawn on a screen `rows` high: what scrolled off its top, then what it shows at the
        end; exactly by `fast_screen` when they hold only what it draws, else by pyte within the budget, else line by
        line."""
        lines = block.split("\n")
        width = max(80, widest_column(block, lines))  # a line never wraps, nor a move right stops short
        data = "\n".join(line if VERTICAL.search(line) else _screen_line(line) for line in lines)
        drawn = fast_screen(data, rows, width + 1, self.saved)
        shown: list[str] | None = None
        if drawn is not None:
            shown, self.saved = drawn
        elif self.pyte_may_draw(data):
            shown = _screen(data, rows, width + 1, self)
        if shown is None:
            self.approximate += vertical
            return [self.line(VERTICAL.sub("", line)) for line in lines]
        self.screened += len(lines)
        return shown


def _screen_line(line: str) -> str:
    """A line of a screen region without the frames no terminal shows, whatever its row held before: those before a
    whole-line erase, and a plain frame that a later one covers with only plain frames between. The rest is drawn as
    it came: on a screen a line may land on a row an earlier line wrote (after a move up), and its erases, trailing
    blanks and moves act on what is there (flattened as if on an empty row, docker's `✔ Network app  Created` redraw
    came out `Createdg`)."""
    if "\r" not in line and "\x1b" not in line:
        return line
    frames = _column_one(line).split("\r")
    for index in range(len(frames) - 1, 0, -1):  # the latest frame before which nothing shows
        if frames[index - 1].endswith(_WHOLE_LINE_ERASE):
            frames = [_WHOLE_LINE_ERASE, *frames[index:]]
            break
        if _ERASE_LINE_START.match(frames[index]):
            frames = frames[index:]
            break
    kept: list[str] = []
    reach = -1  # the longest of the plain frames after this one, up to the next that is not plain
    for frame in reversed(frames):
        if "\x1b" in frame or "\b" in frame or NOT_ONE_CELL.search(frame):
            kept.append(frame)
            reach = -1
        elif len(frame) > reach:
            kept.append(frame)
            reach = len(frame)
    return "\r".join(reversed(kept))


def _column_one(line: str) -> str:
    """`line` with each move to the first column (`CSI G`, `CSI 0 G`, `CSI 1 G`) written as `\\r`, which is what it
    does: a spinner's frames (`CSI 2K CSI 1G ⠋ ...`) are then told apart as `\\r` frames are, and only the last one is
    drawn. Three replaces, which hold no piece of the line between moves, where `re.sub` held a million pieces for a
    spinner's million frames."""
    return line.replace("\x1b[1G", "\r").replace("\x1b[G", "\r").replace("\x1b[0G", "\r")


def _backspace_kept(match: re.Match[str]) -> str:
    return match[0] if match[0] == "\b" else ""


def _one_row(data: str, run: _Run | None = None) -> str | None:
    """`data` drawn on a one-row pyte screen wide enough that nothing wraps; `None` if pyte cannot read it, or would
    walk more cells than `run` has left."""
    screen = Screen(last_column(data) + 1, 1)
    if not _feed(screen, data, run):
        return None
    return "\n".join([*screen.gone, row_text(screen.buffer[0])])


def _screen(data: str, rows: int, columns: int, run: _Run | None = None) -> list[str] | None:
    """`data` drawn on a pyte screen `rows` high; `None` if pyte cannot read it, or would walk more cells than `run`
    has left."""
    screen = Screen(columns, rows)
    screen.set_mode(modes.LNM)  # a `\n` starts the next line at its first column, as a terminal's tty makes it
    screen.savepoints[:] = run.saved if run is not None else []
    if not _feed(screen, data, run):
        return None
    if run is not None:
        run.saved = list(screen.savepoints)
    shown = [row_text(screen.buffer[y]) if y in screen.buffer else "" for y in range(rows)]
    last = max([screen.cursor.y, *(y for y, row in enumerate(shown) if row)])
    return [*screen.gone, *shown[: last + 1]]


def _feed(screen: Screen, data: str, run: _Run | None = None) -> bool:
    """Draw `data` on `screen`; `False` when pyte fails on it (it raises on a few malformed sequences, such as a
    parameter written in non-ASCII digits), or when it walks more cells than `run` has left: the caller then strips
    the escape codes instead."""
    if run is not None:
        screen.walk_left, screen.repeats_left = run.cells, run.repeats
    try:
        Stream(screen).feed(data)
    except Exception:  # pyte's failures are not typed; whatever it was, the output still arrives
        return False
    finally:
        if run is not None:
            run.cells, run.repeats = screen.walk_left, max(0, screen.repeats_left)
    return True


def full_screen_lines(text: str, rows: int = SCREEN_ROWS, columns: int = 1_000) -> list[str]:
    """The non-blank lines a terminal `rows` high shows of `text` at the end, its scrollback included: the whole of
    `text` drawn on one pyte screen, with no shortcut (slow; the reference `render` is checked against)."""
    screen = Screen(columns, rows)
    screen.set_mode(modes.LNM)
    Stream(screen).feed(text)
    shown = [row_text(screen.buffer[y]) for y in range(rows)]
    return [line for line in [*screen.gone, *shown] if line.strip()]


__all__ = ["Rendered", "full_screen_lines", "needs_rendering", "render", "terminal_output"]
