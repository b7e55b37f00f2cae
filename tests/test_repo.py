"""Promises the repository makes to a reader: the README's commands are the ones CI runs, notebooks carry no outputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = readme.split("\n## ", 1)[0]
    return re.findall(r"```(?:bash|sh)\n(.+?)\n```", first_screen, flags=re.S)


def test_readme_first_screen_has_exactly_two_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    demo, tests = commands
    assert demo.startswith("python3 -m venv .venv && ")
    assert '.venv/bin/pip install -e ".[demo]"' in demo  # the extra that installs everything the demo shows
    assert demo.endswith("ctxwarden demo")
    assert tests.startswith("python3 -m venv .venv && ")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    _demo, tests = _readme_commands()
    assert tests in ci


def test_ci_runs_the_readme_demo_command_in_a_fresh_environment() -> None:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    demo, tests = _readme_commands()
    demo_at = lines.index(demo + " > /dev/null")  # verbatim, output silenced
    tests_at = lines.index(tests)
    assert "rm -rf .venv" in lines[demo_at - 3] or any("rm -rf .venv" in line for line in lines[:demo_at])
    assert any(line.startswith("rm -rf .venv") for line in lines[demo_at + 1 : tests_at])  # tests start fresh


def test_readme_one_liner_gets_eviction_the_trace_and_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first snippet: `create_deep_agent(..., middleware=[context_middleware()])`, no other ctxwarden argument."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.+?)\n```", readme, flags=re.S)[0]
    assert "middleware=[context_middleware()]" in block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    exec(compile(block, "README.md", "exec"), namespace)
    report = namespace["report"]
    assert report.lifecycle["eviction"]["count"] > 0  # evicted by ctxwarden, not deepagents' blind preview
    assert report.spend["main"]["calls"] > 0  # the trace was recorded, and found without being named
    messages = namespace["agent"].get_state(namespace["config"]).values["messages"]
    assert any("[ctxwarden: evicted build output" in str(m.content) for m in messages)
    assert (tmp_path / ".ctxwarden" / "trace.sqlite").is_file()


def test_notebooks_are_committed_without_outputs() -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [], f"{path.name} has outputs; clear them before committing"
                assert cell["execution_count"] is None, path.name


def test_the_readme_command_that_runs_a_notebook_runs_it(tmp_path: Path) -> None:
    """The Notebooks section's command, as printed, from a copy of the repository's notebooks folder."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Notebooks\n", 1)[1].split("\n## ", 1)[0]
    (command,) = re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)
    argv = command.split()
    assert argv[0] == ".venv/bin/jupyter"  # what the README's install leaves, activated or not
    notebook = Path(argv[-1])
    (tmp_path / notebook.parent).mkdir(parents=True)
    shutil.copy(ROOT / notebook, tmp_path / notebook)
    argv[0] = str(Path(sys.executable).parent / "jupyter")
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
