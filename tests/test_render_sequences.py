"""Sequences pyte draws wrong or not at all: a repeated character, a move to a column, a move right or down by count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwarden.clip import fast_screen, terminal
from ctxwarden.clip.fast_draw import MAX_REPEAT_CELLS
from ctxwarden.clip.terminal import full_screen_lines, render


def test_a_repeated_character_is_drawn_as_often_as_asked() -> None:
    # ncurses writes a run of one character as the character and `CSI n b` where the terminal's description has `rep`
    rule = render("\x1b[1m─\x1b[39b\x1b[0m\nstatus: ok\n").text.split("\n")
    assert rule[:2] == ["─" * 40, "status: ok"]  # before: one `─`
    assert render("[=\x1b[9b>    ] 50%\n").text == "[" + "=" * 10 + ">    ] 50%\n"
    assert render("中\x1b[2b|\n").text == "中中中|\n"  # a two-cell character repeated takes two cells each time
    assert render("x\x1b[0by\n").text == "xxy\n"  # a count of 0 is 1, as for every count


def test_repeats_past_their_budget_leave_the_line_to_be_stripped_not_drawn_without_end() -> None:
    asked = "a" + "\x1b[9999b" * (MAX_REPEAT_CELLS // 9999 + 1) + "."
    rendered = render(asked + "\nnext\n")
    assert rendered.text == "a.\nnext\n"
    assert rendered.approximate_lines == 1  # counted as drawn without the emulator
    # the budget is the output's, not each line's: pyte draws each repeated character on its own, and 200 lines of
    # 100,000 took 22 s
    half = "b" + "\x1b[9999b" * (MAX_REPEAT_CELLS // 9999 // 2 + 1)
    rendered = render(f"{half}\n{half}\n")
    assert rendered.text.split("\n")[:2] == ["b" * (1 + 9999 * (MAX_REPEAT_CELLS // 9999 // 2 + 1)), "b"]
    assert rendered.approximate_lines == 1


def test_a_move_to_a_column_or_right_by_columns_lands_where_it_asks() -> None:
    # `CSI n \``: pyte maps the column move to `'`, which no terminal sends, and dropped the move
    assert render("name\x1b[21`size\n").text == "name" + " " * 16 + "size\n"
    # `CSI n a`: the one-row screen was not widened for it, so the move stopped at its edge (14 cells, not 30)
    assert render("ab\x1b[30ac\n").text == "ab" + " " * 30 + "c\n"
    assert render("\x1b[120C\x1b[120Cab\n").text == " " * 240 + "ab\n"  # moves add up: `b` had wrapped to a line
    # on a screen (the line also moves down), a move past 80 columns stopped at the screen's edge
    assert render("ab\x1b[200Cc\x1b[Bx\n").text.split("\n")[:2] == ["ab" + " " * 200 + "c", " " * 203 + "x"]


def test_a_move_down_by_rows_starts_a_new_row() -> None:
    # `CSI n e` moves down as `CSI n B` does; it was drawn on one row, `b` right after `a`
    assert render("a\x1b[2eb\n").text.split("\n")[:3] == ["a", "", " b"]


_ATOMS = ["ab", "x ", "\r", "\n", "\x1b[K", "\x1b[A", "\x1b[2e", "\x1b[5`", "\x1b[3a", "\x1b[120C"]
_ATOMS += ["-\x1b[4b", "中\x1b[2b", "".join(f"plain {index}\n" for index in range(30))]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=40))
def test_repeats_and_moves_render_as_the_whole_output_drawn_on_one_screen(atoms: list[str]) -> None:
    data = "".join(atoms)  # a repeat always right after the character it repeats: what ECMA-48 defines
    shown = [line.rstrip() for line in render(data).text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data, columns=20_000)]  # moves add up past 1,000


def test_overstruck_bold_and_underline_come_through_without_drawing(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[str] = []
    monkeypatch.setattr(terminal, "fast_row", lambda data: drawn.append(data))  # nothing to draw: never called
    page = "".join(f"{c}\b{c}" for c in "NAME") + "\n    git-log - " + "".join(f"_\b{c}" for c in "Show") + " logs\n"
    times = terminal.JOINED_LINES  # twice as many lines: drawn lines are joined a batch at a time
    assert render(page * times).text == "NAME\n    git-log - Show logs\n" * times  # what `man` shows
    assert drawn == []  # before: every line went through `fast_row`, a backspace at a time (2.5 MB/s)


_STRUCK = [
    "N\bN",
    "_\bu",
    "x\b_",
    "ab",
    "\b",
    "\b\b",
    "中\bx",
    "y\b中",
    "é\bé",
    "\r",
    "\n",
    "\x1b[K",
    "\x1b[A",
    "\x1b[2C",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_STRUCK), max_size=30))
def test_overstrikes_render_as_the_whole_output_drawn_on_one_screen(atoms: list[str]) -> None:
    data = "".join(atoms)
    shown = [line.rstrip() for line in render(data).text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data)]


def test_an_apt_status_line_below_its_scrolling_log_renders_exactly_at_any_length() -> None:
    # apt's fancy progress: the log scrolls in a region above the last row, where each update draws the status
    out = ["Reading package lists...\n", "\x1b7\x1b[0;23r\x1b8\x1b[1A"]
    for index in range(3_000):  # 330 KB: past what pyte draws of one output
        out.append(f"Setting up libfoo{index} (1.2.{index}-1) ...\n")
        out.append(f"\x1b7\x1b[24;0f\x1b[42m\x1b[30mProgress: [{index // 30:3d}%]\x1b[49m\x1b[39m \x1b8")
    data = "".join([*out, "\x1b7\x1b[0;24r\x1b8\x1b[1A\x1b[J", "Processing triggers for man-db ...\n"])
    assert len(data) > terminal.SCREEN_BUDGET_CHARS
    rendered = render(data)
    assert rendered.approximate_lines == 0  # before: 3,001, each log line with the status run into it
    shown = [line.rstrip() for line in rendered.text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data)]
    assert shown[-1] == "Processing triggers for man-db ..."  # drawn where apt's last move up put it
    assert not any("Progress" in line for line in shown)  # the status row, erased at the end


_REGION = ["ab", "xyz ", "下", "\r", "\n", "\n", "\t", "\x1b[A", "\x1b[2B", "\x1b[K", "\x1b[1K", "\x1b7", "\x1b8"]
_REGION += ["\x1b[s", "\x1b[u", "\x1b[J", "\x1b[1J", "\x1b[2J", "\x1b[H", "\x1b[2;3H", "\x1b[4;1f", "\x1b[9;99H"]
_REGION += ["\x1b[2;3r", "\x1b[1;4r", "\x1b[0;3r", "\x1b[r", "\x1b[0r", "\x1b[3r", "\x1b[;2r", "\x1b[4;2r"]
_REGION += ["\x1b[C", "\x1b[3C", "\x1b[2a", "\x1b[D", "\x1b[4D", "\x1b[G", "\x1b[3G", "\x1b[9`", "\x1b[E", "\x1b[2F"]
_REGION += ["\x1b[d", "\x1b[3d", "\x1b[2e", "\x1b[99999C", "\x1b[0D"]


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(_REGION), max_size=40), st.integers(1, 5), st.integers(1, 8))
def test_the_fast_screen_draws_regions_positions_and_saved_cursors_as_pyte_does(
    atoms: list[str], rows: int, columns: int
) -> None:
    data = "".join(atoms)
    assert fast_screen.fast_screen(data, rows, columns) == terminal._screen(data, rows, columns)


def test_a_screen_redrawn_by_positions_past_the_emulators_budget_shows_its_last_frame() -> None:
    # what a monitor writes without the alternate screen: home, clear, then each row placed by `CSI row;1 H`
    def frame(tick: int) -> str:
        return "\x1b[H\x1b[2J" + "".join(
            f"\x1b[{row + 1};1H worker {row}: {tick * row % 97}% busy" for row in range(24)
        )

    data = "".join(frame(tick) for tick in range(700))  # one line of 700 frames, past what pyte draws of one output
    assert len(data) > terminal.SCREEN_BUDGET_CHARS
    rendered = render(data)
    assert rendered.approximate_lines == 0  # before: stripped, 16,800 rows run together on one line
    assert rendered.text.split("\n") == [f" worker {row}: {699 * row % 97}% busy" for row in range(24)]


SIXEL = '\x1bPq"1;1;40;30#0;2;0;0;0#1;2;100;100;0' + "#1~~@@vv@@~~@@~~$-" * 200 + "\x1b\\"
"""A sixel chart: a DCS string, drawn by the terminal as an image."""

KITTY = "\x1b_Gf=100,a=T,m=1;" + "iVBORw0KGgoAAAANSUhEUgAA" * 100 + "\x1b\\"
"""An image in the kitty graphics protocol: an APC string."""


@pytest.mark.parametrize(
    "string",
    [
        SIXEL,
        KITTY,
        "\x1bPtmux;\x1b\x1b]0;title\x07\x1b\\",  # tmux's passthrough, its escapes doubled
        "\x1bP1$r0m\x1b\\",  # a DECRQSS reply
        "\x1b^private message\x1b\\",  # PM
        "\x1bXstart of string\x1b\\",  # SOS
        "\x1bPq#0~~~\x1b[31m",  # cut short by the next escape, which the terminal reads as its own
    ],
    ids=["sixel", "kitty", "tmux passthrough", "decrqss", "pm", "sos", "cut short"],
)
def test_control_strings_show_nothing_as_a_terminal_shows_none(string: str) -> None:
    """A DCS, SOS, PM or APC string is no text: before, its payload was shown, and a sixel chart was read as text."""
    text = f"rendering chart\n{string}\nchart done\n"
    assert render(text).text == "rendering chart\n\nchart done\n"
    long = "".join(f"log line {i}\n" for i in range(terminal.SUB_BLOCK_CHARS // 12)) + text  # past one block
    assert render(long).text.endswith("log line 87380\nrendering chart\n\nchart done\n")
    assert render(f"a{string}b\n").text == "ab\n"  # drawn on a line of its own too
    assert render(f"a\r{string}b\n").text == "b\n"
