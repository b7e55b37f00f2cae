"""Saving, restoring and scrolling the cursor: output that draws its updates in one place shows its last one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwarden.clip.terminal import full_screen_lines, render


def test_a_display_that_saves_the_cursor_once_and_restores_it_per_frame_shows_its_last_frame() -> None:
    for save, restore in (("\x1b7", "\x1b8"), ("\x1b[s", "\x1b[u")):  # `tput sc` / `tput rc`, and the CSI forms
        frames = "".join(f"{restore}{percent}%" for percent in range(0, 101, 10))
        shown = render(f"fetching index\nDownloading: {save}{frames}\ndone\n").text
        # before: the second restore found no saved cursor and drew `100%` over "fetching index"; with `CSI s`, every
        # frame was appended (`0%10%20%...`)
        assert shown.split("\n")[:3] == ["fetching index", "Downloading: 100%", "done"]


def test_csi_s_and_u_save_and_restore_as_esc_7_and_8_do_and_a_keyboard_protocols_u_moves_nothing() -> None:
    assert render("abc\x1b[sdef\ngh\x1b[uZ\n").text.split("\n")[:2] == ["abcZef", "gh"]
    assert render("ab\x1b[scd\x1b[>1uef\n").text.split("\n")[0] == "abcdef"  # `CSI > 1 u`: a keyboard mode, no move


def test_a_restore_far_below_its_save_lands_in_the_saved_column() -> None:
    lines = "".join(f"step {index}\n" for index in range(80))
    data = f"start: \x1b7\n{lines}\x1b8X\n"  # the two moves are drawn on separate screens: 80 lines apart
    shown = render(data).text.split("\n")
    assert shown == full_screen_lines(data)  # the terminal's screen row 0, column 7, once 80 lines scrolled by
    assert "step 57X" in shown  # before: column 0 of that row, "Xtep 57"


def test_a_restore_inside_a_scrolling_region_leaves_the_saved_cursor_as_saved() -> None:
    data = (
        "top\x1b7\n\n\n\n\x1b[3;4r\x1b8A\x1b[r\x1b8B\n"  # the first restore lands in the region, the second at the save
    )
    expected = ["topB", "   A"]
    assert [line for line in render(data).text.split("\n") if line] == expected
    assert (
        full_screen_lines(data) == expected
    )  # before: pyte moved the saved cursor into the region, and B landed there


def test_scrolling_the_region_moves_its_lines_and_leaves_the_cursor() -> None:
    up = render("a\nb\nc\x1b[2S\n").text.split("\n")
    assert [line for line in up if line] == ["a", "b", "c"]  # a and b scrolled into the scrollback, c to the top
    assert render("a\nb\nc\x1b[1Td\n").text.split("\n") == ["", "a", "bd", "c"]  # down one; `d` where the cursor was
    # before: pyte ignored both, and `d` followed `c`


_CURSOR_ATOMS = ["ab", "xyz ", "\r", "\x1b7", "\x1b8", "\x1b[s", "\x1b[u", "\x1b[A", "\x1b[2B", "\x1b[S", "\x1b[2T"]
_CURSOR_ATOMS += ["\x1b[K", "\n", "\n", "".join(f"plain {index}\n" for index in range(30))]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_CURSOR_ATOMS), max_size=40))
def test_saves_restores_and_scrolls_render_as_the_whole_output_drawn_on_one_screen(atoms: list[str]) -> None:
    data = "".join(atoms)  # blocks of 30 plain lines split the output into screens drawn apart
    shown = [line.rstrip() for line in render(data).text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data)]
