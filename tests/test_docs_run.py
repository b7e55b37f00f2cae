"""Every Python block of the README and the docs runs, each page's blocks in order in one fresh directory, as a reader
pastes them one after another; a `print(...)` the text says the output of (a `# prints: <line>` comment on the line
above it) prints exactly that.

The claimed lines are written from a run, never by hand: `python tests/test_docs_run.py --write` runs every page the
same way and writes what each such `print` printed into its comment. The README's shell lines that read the state dir
(`ctxwarden context`, `ctxwarden trace`) run after its Python blocks, on what they left.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.+?)\n```", flags=re.S)
CLAIM = re.compile(r"^\s*# prints: (?P<line>.*)$")
"""The comment saying what the `print(...)` on the next line prints."""
SERVICE = "# requires:"
"""A block that needs a service the suite cannot start opens with this line, naming it; it is not run here."""


def blocks(page: Path) -> list[str]:
    return [b for b in BLOCK.findall(page.read_text(encoding="utf-8")) if not b.startswith(SERVICE)]


def claims(block: str) -> list[str]:
    """The lines the block's text says its prints print, in order."""
    return [m.group("line") for line in block.splitlines() if (m := CLAIM.match(line))]


def _claimed(lines: list[str]) -> list[int]:
    """Indexes of the claimed `print(...)` lines (each right under its `# prints:` comment)."""
    found = [i + 1 for i, line in enumerate(lines) if CLAIM.match(line)]
    for i in found:
        if i >= len(lines) or not lines[i].strip().startswith("print("):
            raise AssertionError(f"no print(...) right under: {lines[i - 1]}")
    return found


@contextlib.contextmanager
def inside(directory: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def run_page(page: Path, directory: Path) -> list[list[str]]:
    """Run the page's blocks in order in `directory`; for each block, the lines its claimed prints printed."""
    printed: list[list[str]] = []
    with inside(directory):
        for block in blocks(page):
            lines = block.splitlines()
            # each claimed print is wrapped so its output is caught apart from the block's other output
            for i in _claimed(lines):
                code = lines[i]
                indent = code[: len(code) - len(code.lstrip())]
                lines[i] = f"{indent}with __claim__():\n{indent}    {code.strip()}"
            caught: list[str] = []

            @contextlib.contextmanager
            def claim(caught: list[str] = caught) -> Iterator[None]:
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    yield
                caught.append(buffer.getvalue().rstrip("\n"))

            namespace = {"__name__": "docs_example", "__claim__": claim}
            exec(compile("\n".join(lines), str(page.name), "exec"), namespace)
            printed.append(caught)
    return printed


CLAIMED = [pytest.param(page, id=page.name) for page in PAGES if blocks(page)]


@pytest.mark.parametrize("page", CLAIMED)
def test_the_pages_blocks_run_in_order_and_print_what_the_text_says(page: Path, tmp_path: Path) -> None:
    printed = run_page(page, tmp_path)
    for block, out in zip(blocks(page), printed, strict=True):
        assert out == claims(block), f"{page.name}: regenerate with python tests/test_docs_run.py --write"


def test_the_readme_run_again_in_the_same_directory_prints_the_same(tmp_path: Path) -> None:
    """The first snippet's thread is in memory, its trace in `./.ctxwarden`: run again, it is a new thread there,
    reported on its own (the observe snippet's thread is checkpointed: run again, it goes on)."""
    readme = ROOT / "README.md"
    run_page(readme, tmp_path)
    again = run_page(readme, tmp_path)
    assert again[0] == claims(blocks(readme)[0])


def _readme_shell_lines() -> list[str]:
    """The README's `ctxwarden context|trace` lines, without their optional `[...]` parts."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"^(ctxwarden (?:context|trace) [^\n]*)$", text, flags=re.M)
    return [re.sub(r"\s*\[[^\]]*\]", "", line) for line in found]


def test_the_readme_shell_lines_read_what_its_blocks_left(tmp_path: Path) -> None:
    run_page(ROOT / "README.md", tmp_path)
    lines = _readme_shell_lines()
    assert len(lines) >= 2
    script = Path(sys.executable).parent / "ctxwarden"
    for line in lines:
        argv = [str(script), *line.split()[1:]]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout, line
    context = subprocess.run(
        [str(script), "context", "--state-dir", ".ctxwarden", "--thread", "observe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    observe = blocks(ROOT / "README.md")[-1]
    gauge = claims(observe)[0]
    assert gauge in context  # the shell reads the same thread the snippet reported on
    assert "spend: main 2 calls" in context  # two invokes on a new thread: its own calls only


def write() -> None:
    """Write what every claimed print printed into its comment (run from a fresh directory per page)."""
    for page in PAGES:
        if not blocks(page):
            continue
        with tempfile.TemporaryDirectory() as directory:
            printed = run_page(page, Path(directory))
        text = page.read_text(encoding="utf-8")
        outputs = iter([line for out in printed for line in out])

        def fill(match: re.Match[str], outputs: Iterator[str] = outputs) -> str:
            block = match.group(0)
            if block.startswith("```python\n" + SERVICE):
                return block
            return "\n".join(
                f"{line[: m.start('line')]}{next(outputs)}" if (m := CLAIM.match(line)) else line
                for line in block.split("\n")
            )

        updated = re.sub(r"```python\n.+?\n```", fill, text, flags=re.S)
        if updated != text:
            page.write_text(updated, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.exit("usage: python tests/test_docs_run.py --write")
