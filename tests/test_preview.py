"""Structure-aware previews keep the head, the tail and the lines that carry the signal."""

from __future__ import annotations

from ctxwarden.clip import preview

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


def test_the_preview_is_bounded() -> None:
    text = "\n".join(["x" * 5_000] * 50 + [f"error: {i}" for i in range(5_000)])
    shown = preview(text, max_chars=3_000)
    assert len(shown.text) < 3_000 + 2_000  # omission markers come on top of the budget
    assert shown.total_lines == 5_050
    assert shown.shown_lines < 5_050
