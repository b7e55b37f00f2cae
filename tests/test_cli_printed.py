"""What the command line prints can be used as printed: commands run when pasted (the `ctxwarden` on PATH, else its
path), are never wrapped inside an argument, every command ends with 0 on a closed pipe, help lists every event kind,
and messages name the flags to pass.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwarden.cli import build_parser
from ctxwarden.demo.run import cli_command
from ctxwarden.trace import KINDS
from sessions import SMALL_SESSION

LONG_THREAD = "demo-sqlfluff__sqlfluff-1733-a-thread-name-long-enough-to-wrap"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "ctxwarden" not in p)
    return env | extra


def _script() -> Path:
    script = Path(sys.executable).parent / "ctxwarden"
    assert script.is_file()
    return script


def _demo(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    trajectory = tmp_path / "session.json"
    trajectory.write_text(json.dumps(SMALL_SESSION), encoding="utf-8")
    args = ["demo", "--trajectory", str(trajectory), "--state-dir", "my state", "--thread", LONG_THREAD]
    return subprocess.run(
        [str(_script()), *args], cwd=tmp_path, env=_env(COLUMNS="80"), capture_output=True, text=True, timeout=300
    )


def test_the_demos_next_commands_run_as_printed_and_are_never_wrapped(tmp_path: Path) -> None:
    done = _demo(tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [line.strip() for line in lines[lines.index("Next") + 1 :] if line.startswith("  ")]
    assert len(steps) == 3
    for step in steps:
        argv = shlex.split(step, comments=True)
        assert Path(argv[0]).resolve() == _script().resolve()  # not on PATH: the path of the one that ran
        if argv[1] == "demo":
            continue
        assert argv[argv.index("--thread") + 1] == LONG_THREAD  # whole, on the one line
        assert argv[argv.index("--state-dir") + 1] == "my state"  # quoted for the shell
        ran = subprocess.run(step, shell=True, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout or argv[1] == "trace"  # the small session neither cleared nor folded


def test_the_command_is_plain_ctxwarden_when_that_is_the_one_on_path(tmp_path: Path) -> None:
    script = _script()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(script.parent))
        assert cli_command(str(script)) == "ctxwarden"
        patch.setenv("PATH", str(tmp_path))
        patch.chdir(script.parents[2])
        assert cli_command(str(script)) == script.relative_to(script.parents[2]).as_posix()  # e.g. .venv/bin/...


def test_the_demo_ends_with_0_on_a_closed_pipe(tmp_path: Path) -> None:
    trajectory = tmp_path / "session.json"
    trajectory.write_text(json.dumps(SMALL_SESSION), encoding="utf-8")
    with subprocess.Popen(
        [sys.executable, "-m", "ctxwarden", "demo", "--trajectory", str(trajectory), "--state-dir", "s"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert process.stdout.readline()
        process.stdout.close()  # like `ctxwarden demo | head -1`
        error = process.stderr.read().decode()
        assert process.wait(timeout=300) == 0, error
    assert "Traceback" not in error


def test_the_trace_help_lists_every_kind() -> None:
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    shown = " ".join(commands["trace"].format_help().split())
    for kind in (*KINDS, "admit_problem", "fold", "clear", "evict"):
        assert kind in shown, kind


def test_context_without_a_trace_names_the_flag(tmp_path: Path) -> None:
    done = _demo(tmp_path)
    assert done.returncode == 0, done.stderr
    (tmp_path / "my state" / "trace.sqlite").unlink()
    ran = subprocess.run(
        [sys.executable, "-m", "ctxwarden", "context", "--state-dir", "my state", "--thread", LONG_THREAD],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert "trace=" not in ran.stdout + ran.stderr  # a Python argument means nothing in a shell
    assert "--state-dir" in ran.stderr
    assert "spend: unknown" in ran.stdout
