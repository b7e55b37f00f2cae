"""The docs say only what is true: every API name they call exists, every JSON key list is the one emitted, and
what they claim a model switch does is what a run records.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

import ctxwarden
import ctxwarden.demo
import ctxwarden.replay
import ctxwarden.report
import ctxwarden.thread
import ctxwarden.trace
from ctxwarden import DETERMINISTIC, Session
from ctxwarden.demo import DemoResult
from ctxwarden.replay import scripted_model
from ctxwarden.report import build_report

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NOT_OURS = {
    "str",
    "Console",
    "ChatOllama",
    "FilesystemMiddleware",
    "ContextEditingMiddleware",
    "init_chat_model",
    "PostgresSaver",
    "PostgresStore",
    "setup",
    "create_deep_agent",
    "FilesystemBackend",
}
"""Names the docs call that belong to Python, rich, langchain, LangGraph or deepagents."""
AGENT_TOOLS = {"read_file", "recall", "compact_conversation"}
"""Tools the agent itself calls, named in the docs as calls."""
INSTANCES = {
    "session": ctxwarden.Session,
    "policy": ctxwarden.ContextPolicy,
    "report": ctxwarden.ContextReport,
    "backend": ctxwarden.ThreadIsolatedStoreBackend,
    "meter": ctxwarden.TokenMeter,
    "agent": CompiledStateGraph,
}
"""Lower-case receivers the docs use for an instance of a ctxwarden class."""


def _module(name: str) -> object | None:
    """The ctxwarden module a dotted name in the docs names, if it is one."""
    if not name.startswith("ctxwarden"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _exported() -> set[str]:
    names: set[str] = set()
    for module in (ctxwarden, ctxwarden.replay, ctxwarden.trace, ctxwarden.report, ctxwarden.thread, ctxwarden.demo):
        names |= set(module.__all__)
    return names


def test_every_name_the_docs_call_exists() -> None:
    exported = _exported()
    missing = []
    for page in PAGES:
        for name in re.findall(r"`([A-Za-z_][\w.]*)\(", page.read_text(encoding="utf-8")):
            owner, _, attribute = name.rpartition(".")
            if not owner:
                known = (
                    name in exported
                    or name in NOT_OURS
                    or name in AGENT_TOOLS
                    or hasattr(Session, name)
                    or hasattr(ctxwarden.trace.SqliteTraceStore, name)
                )
            elif owner in INSTANCES:
                known = hasattr(INSTANCES[owner], attribute)
            elif owner == "request":
                continue
            else:
                target = _module(owner) or getattr(ctxwarden, owner.removeprefix("ctxwarden.").split(".")[0], None)
                known = target is not None and hasattr(target, attribute)
            if not known:
                missing.append(f"{page.name}: {name}(")
    assert missing == []


def _documented_keys(page: str, after: str) -> set[str]:
    text = " ".join((ROOT / "docs" / page).read_text(encoding="utf-8").split())
    start = text.index(after) + len(after)
    sentence = text[start : text.index(". ", start)]
    return set(re.findall(r"`(\w+)`", sentence))


def test_the_demo_json_keys_in_the_docs_are_the_emitted_ones() -> None:
    result = DemoResult("t.json", "t", ".ctxwarden", 32_000, 1, 1, 1, 0.1, 0, 0, 0, 0, 0.1)
    emitted = set(json.loads(result.to_json()))
    assert _documented_keys("cli.md", "`--json` prints one object with the keys") == emitted


def test_the_context_json_keys_in_the_docs_are_the_emitted_ones() -> None:
    from ctxwarden.core.policy import ContextPolicy

    report = build_report([AIMessage("hi")], policy=ContextPolicy(window=1_000))
    documented = _documented_keys("cli.md", "every figure with `--json`: one object with the keys")
    assert documented == set(report.to_dict())


@tool
def read_page(page: int) -> str:
    """Read one page of the manual."""
    return f"page {page}: " + "lorem ipsum " * 120


def test_what_the_session_page_says_a_switch_does_is_what_the_run_records(tmp_path: Path) -> None:
    """docs/session.md and notebook 03: a long thread moved from a 200k model to an 8k one."""
    steps = [
        AIMessage(
            "Reading the next page. " * 30, tool_calls=[{"name": "read_page", "args": {"page": i}, "id": f"p{i}"}]
        )
        for i in range(16)
    ]
    big = scripted_model([*steps, AIMessage("Read it all.")], window=200_000, name="big")
    with Session(big, [read_page], state_dir=tmp_path, summarizer=DETERMINISTIC) as session:
        session.invoke("Read the whole manual.")
        session.switch_model(scripted_model(["Summarized."], window=8_000, name="small"))
        stamp = session.invoke("Summarize what you read.")["messages"][-1].response_metadata["ctxwarden"]
    page = " ".join((ROOT / "docs" / "session.md").read_text(encoding="utf-8").split())
    claim = re.search(r"Going from 200k to 8k, the first call on the small model ([^.]+)\.", page)
    assert claim is not None
    said = claim.group(1)
    assert stamp["input_tokens"] <= 8_000
    assert ("clears" in said) == ("context_clear" in stamp["events"])
    folds_always = "folds" in said and "when clearing alone cannot" not in said
    assert folds_always == ("context_compaction" in stamp["events"])


def test_the_tools_every_call_carries_cost_what_the_docs_say() -> None:
    """Every model call pays for `recall`'s and `compact_conversation`'s schemas: they stay small, as documented."""
    from ctxwarden.clip.recall import make_recall_tool
    from ctxwarden.core.meter import TokenMeter
    from ctxwarden.fold.tool import make_compact_tool

    meter = TokenMeter()
    recall, compact = meter.tools_tokens([make_recall_tool(None)]), meter.tools_tokens([make_compact_tool()])
    page = (ROOT / "docs" / "agent-handle.md").read_text(encoding="utf-8")
    assert f"description, {recall} tokens; `compact_conversation`'s is {compact}" in page
    assert f"they add {recall + compact} tokens to each" in page
    assert recall + compact <= 197  # 311 with an offset argument; 272 with each default and `part`'s values shown
