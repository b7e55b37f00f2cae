"""Structure-aware previews keep the head, the tail and the lines that carry the signal."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwarden.clip import preview, signal_lines
from ctxwarden.clip.signal_lines import ANY_SIGNAL
from ctxwarden.core.text import TextLines

preview_module = importlib.import_module("ctxwarden.clip.preview")  # the package exports the function by this name

NOISE = [f"collecting module_{i}.py ... ok" for i in range(2_000)]


def _text(*middle: str) -> str:
    return "\n".join(NOISE[:1_000] + list(middle) + NOISE[1_000:])


def test_short_output_is_kept_whole() -> None:
    assert preview("a\nb", max_chars=100).text == "a\nb"


def test_head_and_tail_are_always_kept() -> None:
    shown = preview(_text(), max_chars=2_000).text
    assert shown.startswith(NOISE[0])
    assert shown.endswith("collecting module_1999.py ... ok") or NOISE[-1] in shown
    assert "lines omitted" in shown


def test_a_traceback_in_the_middle_survives() -> None:
    traceback = [
        "Traceback (most recent call last):",
        '  File "src/parser.py", line 42, in parse',
        "    node = self.visit(tree)",
        '  File "src/visitor.py", line 7, in visit',
        "    raise KeyError(name)",
        "KeyError: 'comment'",
    ]
    shown = preview(_text(*traceback), max_chars=2_000).text
    for line in traceback:
        assert line in shown


def test_test_summary_and_failing_tests_survive() -> None:
    lines = [
        "FAILED tests/test_parser.py::test_comments - AssertionError: lost",
        "FAILED tests/test_parser.py::test_nested - KeyError",
        "E       assert 'x' == 'y'",
        "=========== 2 failed, 318 passed, 4 skipped in 12.31s ===========",
    ]
    shown = preview(_text(*lines), max_chars=1_500).text
    for line in lines:
        assert line in shown


def test_compiler_errors_survive() -> None:
    error = "src/main.c:120:5: error: use of undeclared identifier 'cnt'"
    assert error in preview(_text(error), max_chars=1_500).text


def test_grep_output_lists_every_file_with_exact_counts() -> None:
    lines = []
    for f in range(30):
        lines += [f"src/mod_{f}.py:{n}:    comment = parse(x)" for n in range(1, 2 + f)]
    shown = preview("\n".join(lines), max_chars=4_000).text
    assert shown.startswith(f"{len(lines):,} matching lines in 30 files")
    assert "src/mod_0.py: 1 match" in shown
    assert "src/mod_29.py: 30 matches" in shown or "src/mod_29.py (30)" in shown
    assert "src/mod_5.py:1:    comment = parse(x)" in shown


@pytest.mark.parametrize(
    "clock", ["10:00:{s:02d}", "2026-11-28 10:00:{s:02d}", "2026-11-28T10:00:{s:02d}Z", "[10:00:{s:02d}]"]
)
def test_a_log_whose_lines_start_with_the_time_is_not_read_as_grep_output(clock: str) -> None:
    # `10:00:01 ERROR ...` reads as path `10`, line `00`: the preview said "90,909 matching lines in 1 files" and
    # showed two lines of them
    lines = [f"{clock.format(s=i % 60)} INFO worker-{i % 8}: request {i} served" for i in range(3_000)]
    lines[1_500] = f"{clock.format(s=0)} ERROR worker-3: database connection refused"
    shown = preview("\n".join(lines), max_chars=4_000).text
    assert "matching lines" not in shown
    assert "database connection refused" in shown  # the error line is kept, as in any log
    assert shown.startswith(lines[0])


def test_the_preview_is_bounded() -> None:
    text = "\n".join(["x" * 5_000] * 50 + [f"error: {i}" for i in range(5_000)])
    shown = preview(text, max_chars=3_000)
    assert len(shown.text) < 3_000 + 2_000  # omission markers come on top of the budget
    assert shown.total_lines == 5_050
    assert shown.shown_lines < 5_050


SIGNAL_LINES = [
    "=========== 2 failed, 318 passed, 4 skipped in 12.31s ===========",
    "3 passed",
    "Ran 12 tests in 0.301s",
    "FAILED (failures=2, errors=1)",
    "OK",
    "OK (skipped=1)",
    "10 tests passed",
    "Tests:       5 failed",
    "Traceback (most recent call last):",
    "panic: runtime error: index out of range",
    "Exception in thread main java.lang.IllegalStateException",
    "E       assert 'x' == 'y'",
    "E\t\tassert 1 == 2",
    "KeyError: 'comment'",
    "src/main.c:120:5: error: use of undeclared identifier 'cnt'",
    "    django.core.exceptions.ValidationError",
    "pkg.CustomException",
    "FAILED tests/test_parser.py::test_comments - AssertionError: lost",
    "tests/test_parser.py::test_nested FAILED",
    "FAIL: test_round_trip (tests.test_io.RoundTrip)",
    "ERROR: test_encode (tests.test_io.Encode)",
    "KeyboardInterrupt",
    "SystemExit: 2",
    "bash: pytes: command not found",
    "cat: setup.cfg: No such file or directory",
    "fatal: not a git repository",
    "src/app.py:3:1: warning: unused import",
    "The build failed: see above",
]
PASSING = [f"tests/unit/test_mod_{i % 97}.py::test_case_{i} PASSED [ {i % 100:>2}%] v={i * 31}" for i in range(5_000)]


def test_a_block_scan_finds_every_signal_line_a_line_by_line_scan_finds() -> None:
    lines = PASSING[:2_500] + SIGNAL_LINES + PASSING[2_500:]
    found = list(signal_lines.signal_lines(lines).latest)
    by_line = [i for i, line in enumerate(lines) if ANY_SIGNAL.search(line)]
    assert found == by_line
    assert [lines[i] for i in found] == SIGNAL_LINES  # each pattern's lines, and no passing line


def test_signal_lines_after_characters_of_several_bytes_are_found_on_their_own_lines() -> None:
    # the block is scanned as UTF-8 and each hit placed by the line breaks before it, not by its byte offset
    wide = [f"ビルド {i}: 成功 — ✓ 𝔬𝔨 café" for i in range(600)]
    lines = wide[:300] + SIGNAL_LINES[:6] + wide[300:] + ["\ud800 lone surrogate", *SIGNAL_LINES[6:]]
    found = list(signal_lines.signal_lines(lines).latest)
    assert found == [i for i, line in enumerate(lines) if ANY_SIGNAL.search(line)]
    assert [lines[i] for i in found] == SIGNAL_LINES


def test_a_huge_output_keeps_its_middle_traceback_and_weighs_a_bounded_share_of_its_lines() -> None:
    traceback = ["Traceback (most recent call last):", '  File "src/core.py", line 88, in run', "ValueError: bad"]
    lines = PASSING * 40  # 200,000 lines
    lines[100_000:100_000] = traceback
    shown = preview("\n".join(lines), max_chars=4_000).text
    for line in traceback:
        assert line in shown
    pool = preview_module._detail_pool(len(lines), list(signal_lines.signal_lines(lines).latest))
    assert len(pool) <= preview_module.DETAIL_LINES + 5 * len(traceback)
    assert 100_000 in pool


class _Searched:
    """A pattern that notes the length of every text it is asked to search."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.lengths: list[int] = []

    def search(self, text: str) -> Any:
        self.lengths.append(len(text))
        return self.pattern.search(text)

    def match(self, text: str) -> Any:
        self.lengths.append(len(text))
        return self.pattern.match(text)


def test_a_line_too_long_to_show_is_never_searched_nor_weighed(monkeypatch: pytest.MonkeyPatch) -> None:
    searched = _Searched(ANY_SIGNAL)
    for name in ("ERROR", "FAILING_TEST", "TRACEBACK_START", "FAILURE"):  # every pattern a signal line is read with
        monkeypatch.setattr(signal_lines, name, _Searched(getattr(signal_lines, name)))
        monkeypatch.setattr(getattr(signal_lines, name), "lengths", searched.lengths)
    summary = signal_lines.summary_line
    monkeypatch.setattr(signal_lines, "summary_line", lambda line: searched.lengths.append(len(line)) or summary(line))
    weighed: list[str] = []
    choose = preview_module.choose_lines
    monkeypatch.setattr(preview_module, "choose_lines", lambda lines, *a: weighed.extend(lines) or choose(lines, *a))
    huge = "error: " + "x" * 2_000_000  # holds a signal word, and cannot be shown whole
    lines = [*PASSING[:50], huge, "ValueError: bad", *PASSING[50:100]]
    shown = preview("\n".join(lines), max_chars=4_000).text
    assert "ValueError: bad" in shown  # the signal line that can be shown still is
    assert huge not in shown
    assert max(searched.lengths) <= preview_module.MAX_LINE_CHARS
    assert max(map(len, weighed)) <= preview_module.MAX_LINE_CHARS


_PIECES = st.sampled_from(["a", "bc", "é", "\n", "\r", "\r\n", "\x0b", "\x85", "\u2028", "\n\n", "xyz"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60), st.integers(1, 12), st.integers(0, 70), st.integers(0, 70))
def test_text_lines_are_the_lines_splitlines_gives(pieces: list[str], chunk: int, start: int, stop: int) -> None:
    text = "".join(pieces)
    lines = TextLines(text, chunk_chars=chunk)
    expected = text.splitlines()
    assert len(lines) == len(expected)
    assert list(lines) == expected
    assert [lines[i] for i in range(-len(expected), len(expected))] == expected + expected
    assert lines[start:stop] == expected[start:stop]
    # a run read a chunk at a time ends where a line-by-line read ends
    end = next((i for i in range(start, len(expected)) if "a" not in expected[i]), max(start, len(expected)))
    assert lines.run_end(start, lambda line: "a" in line) == end


def test_a_preview_never_holds_every_line_of_a_huge_output(monkeypatch: pytest.MonkeyPatch) -> None:
    split: list[int] = []
    chunk = TextLines._chunk

    def splitting(self: TextLines, index: int) -> list[str]:
        if index not in self._cached:  # not a chunk held: split
            split.append(index)
        return chunk(self, index)

    monkeypatch.setattr(TextLines, "_chunk", splitting)
    lines = [f"step {i}" for i in range(400_000)]
    lines[200_000] = "ValueError: bad"
    shown = preview("\n".join(lines), max_chars=4_000)
    assert "ValueError: bad" in shown.text
    assert shown.total_lines == 400_000
    assert len(split) < 3 * len(set(split))  # each chunk split about once, one held at a time


class _ReadCount(list[str]):
    """The lines of an output, counting how many times a line is read."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        _ReadCount.reads += 1
        return super().__getitem__(index)


def test_indented_tracebacks_are_scanned_once_each_line_not_once_each_start() -> None:
    # captured subprocess output indents its tracebacks: every line of an indented run may start one
    lines = _ReadCount(["build log", *["  Traceback (most recent call last):"] * 4_000, "done"])
    _ReadCount.reads = 0
    groups = [list(group) for _first, group in signal_lines.signal_lines(lines).groups()]
    assert _ReadCount.reads < 10 * len(lines)  # each pattern once a line; before: the rest of the run each start, 8M
    assert len(groups) == 4_000
    assert groups[-1] == [1, 2, 3, 4, *range(4_002 - 26, 4_002)]  # the first one, its head and its end, as before
