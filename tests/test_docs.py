"""The documentation cannot drift: its code runs, its schema is generated, and the site builds strictly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ctxwarden.trace.schema import BEGIN, END, section

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", path.read_text(encoding="utf-8"), flags=re.S)


def test_examples_that_need_a_service_say_which() -> None:
    skipped = [b for path in DOCS for b in _python_blocks(path) if b.startswith("# requires:")]
    assert all(len(b.splitlines()[0]) > len("# requires: ") + 5 for b in skipped)


def test_the_trace_schema_in_the_docs_is_the_one_the_migrations_make() -> None:
    text = (ROOT / "docs" / "trace.md").read_text(encoding="utf-8")
    documented = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert documented == section(), (
        "regenerate: python -c 'from ctxwarden.trace.schema import section; print(section())'"
    )


def test_the_site_builds_with_strict_checks(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "benchmarks" / "index.html").is_file()


def test_the_reliability_page_quotes_the_tests_it_describes() -> None:
    import test_load
    import test_nothing_lost
    from test_bad_input import HOSTILE_IDS

    page = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    conversations = len(test_load.WORKERS) * test_load.THREAD_IDS_PER_WORKER
    events = test_load.MODEL_CALLS + test_load.TOOL_CALLS + test_load.EVICTIONS
    quoted = [
        f"{test_load.THREADS} threads and {test_load.PROCESSES} processes",
        f"{conversations} conversations of {test_load.TURNS_PER_THREAD} turns",
        f"{test_load.MODEL_CALLS:,} model",
        f"{test_load.TOOL_CALLS:,} tool calls",
        f"{test_load.EVICTIONS} evictions",
        f"{events:,} trace events",
        f"| {test_nothing_lost.EXAMPLES} |",
        f"({len(HOSTILE_IDS)} values, each as both)",
        ", ".join(f"{w:,}" for w in test_nothing_lost.WINDOWS[:2]),
    ]
    for text in quoted:
        assert text in page, text
