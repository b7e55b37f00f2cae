"""Which lines are drawn on a screen: a move reaches as far as it can and no further, and long outputs stay slices."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwarden.clip import terminal
from ctxwarden.clip.screen_regions import stretches
from ctxwarden.clip.terminal import full_screen_lines, render


def _status_log(redraws: int) -> str:
    block = "".join(f"item {j:02d} ok\n" for j in range(49))
    return "".join(f"{block}\x1b[1A\x1b[2K\rprogress: batch {i}\n" for i in range(redraws))


def test_a_status_line_redrawn_in_place_is_drawn_with_the_line_it_reaches_only() -> None:
    data = _status_log(40)
    rendered = render(data)
    assert rendered.text.split("\n") == [*full_screen_lines(data), ""]  # the last `\n` leaves an empty line
    assert rendered.text.count("progress: batch") == 40
    assert "item 48 ok" not in rendered.text
    # each redraw is drawn with the one line above it and the one after it: 3 lines, not one screen either side (49)
    assert rendered.screen_lines == 3 * 40
    assert [(s.start, s.end, s.rows) for s in stretches(data)][:2] == [(48, 51, 2), (98, 101, 2)]


def test_a_later_move_whose_screen_reaches_a_redraw_draws_both_on_a_whole_screen() -> None:
    plain = "".join(f"plain {i}\n" for i in range(30))
    data = f"{plain}\x1b[2Aup\n{plain[:40]}\x1b8ab"  # a restore with nothing saved: the top left of a full screen
    assert [line.rstrip() for line in render(data).text.split("\n") if line.strip()] == full_screen_lines(data)
    assert [(s.start, s.rows) for s in stretches(data)] == [(6, 24)]  # the redraw's own 3 lines would be (28, 3)


_BLOCKS = ["".join(f"plain {i}\n" for i in range(count)) for count in (5, 30, 60)]
_MOVES = ["\x1b[A", "\x1b[2A", "\x1b[1F", "\x1b[3A", "\x1b[5F", "\x1b[0A", "\x1b[23A", "\x1bM", "\x1b[H", "\x1b[B"]
_ATOMS = ["ab", "xyz ", "\r", "\x1b[K", "\x1b[2K", "\n", "\n", "\x1b7", "\x1b8", *_MOVES, *_BLOCKS]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=40))
def test_redraws_far_apart_or_near_other_moves_render_as_the_whole_output_drawn_on_one_screen(
    atoms: list[str],
) -> None:
    data = "".join(atoms)
    shown = [line.rstrip() for line in render(data).text.split("\n") if line.strip()]
    assert shown == [line.rstrip() for line in full_screen_lines(data)]


@pytest.mark.parametrize("block", [1, 7, 64])
def test_codes_that_show_nothing_are_taken_out_a_block_at_a_time_as_from_the_whole(
    monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    coloured = "".join(f"\x1b[32mPASSED\x1b[0m test_{i}\n" for i in range(30))
    titled = f"{coloured}\x1b]0;a title\nover two lines\x07after\n{coloured}\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\\n"
    unterminated = f"{coloured}\x1b]0;never ends\n{coloured}"  # a title with no end runs to the next escape
    monkeypatch.setattr(terminal, "SUB_BLOCK_CHARS", block)
    for text in (coloured, titled, unterminated):
        assert terminal._visible(text) == terminal._INVISIBLE.sub("", text)


def test_a_spinner_of_wide_and_zero_width_frames_hands_only_its_visible_frames_to_the_drawing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spinner = "".join(f"\r⚠️ {i} vulnerabilities" for i in range(10_000)) + "\n"  # a variation selector in each frame
    drawn: list[str] = []
    fast_row = terminal.fast_row
    monkeypatch.setattr(terminal, "fast_row", lambda data: drawn.append(data) or fast_row(data))
    assert render(spinner).text.split("\n")[0] == full_screen_lines(spinner)[0] == "⚠️ 9999 vulnerabilities"
    # a frame a later, wider one draws over is never listed: before, all 10,000 frames (230,000 characters) were
    assert max(map(len, drawn)) < 100
