"""Runs one scripted conversation on a state dir and kills its own process (SIGKILL) at a chosen point.

Usage: `python crash_worker.py <state_dir> <scenario> <durability> <invoke|ainvoke>`. The
scenario names where the kill lands: while an evicted result is being written, while the
summarizer writes a fold's summary (the fold's history section is already on disk), while
the summarizer prepares the next fold's summary in the background (nothing of the fold is
written yet), or while the history file, or the copy staged beside it, is being rewritten.
`tests/test_crash.py` runs it, then reopens the state dir and resumes the thread; the
conversation, tools and models here are shared with that test.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, ContextPolicy, create_context_agent
from ctxwarden.fold import SECTIONS
from ctxwarden.replay import ScriptedChatModel, scripted_model
from ctxwarden.stack.isolation import ThreadIsolatedBackend

THREAD = "crash"
CONFIG = {"configurable": {"thread_id": THREAD}}
QUESTION = "Fix the parser. Never touch tests/legacy."
THOUGHT = "Let me think about the parser carefully. " * 40  # ~400 tokens per step: a 4k window folds within a few
POLICY = ContextPolicy(clear_call_text=False)  # keeps THOUGHT in view when its result is cleared, so the window fills
LOG = "\n".join(
    [f"INFO step {i}: compiled module_{i} ✓" for i in range(600)]
    + ["Traceback (most recent call last):", "ValueError: boom"]
    + [f"INFO step {i}: cleanup" for i in range(600)]
)
"""The build log: far above the eviction threshold of any window used here."""


PREPARING = threading.Event()
"""Set when a summary is being prepared in the background; the next tool call then waits there to be killed."""
IN_TOOL = threading.Event()
TOOLS_TAKE_TIME = threading.Event()
"""Set when the scenario kills a preparation: each tool call then takes a moment, as a real one does, so the
background preparation starts during a tool call even on a loaded machine (a scripted step takes no time at all)."""


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    if TOOLS_TAKE_TIME.is_set():
        PREPARING.wait(0.5)
    if PREPARING.is_set():  # a preparation is under way: be killed here, in the middle of the tools step
        IN_TOOL.set()
        time.sleep(60)
    return f"page {page}: " + "data " * 150


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def step(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(THOUGHT, id=f"step-{call_id}", tool_calls=[{"name": name, "args": args, "id": call_id}])


EVICTION_SCRIPT = [step("fetch", {"page": 0}, "f0"), step("build", {"target": "all"}, "big1"), AIMessage("built")]
FOLD_SCRIPT = [*(step("fetch", {"page": i}, f"f{i}") for i in range(8)), AIMessage("parser fixed")]
HISTORY = f"/conversation_history/{THREAD}.md"


class AnsweringSummarizer(ScriptedChatModel):
    """A summarizer model that answers every call with the same structured summary."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        text = "\n".join(f"## {name}\n- from the summarizer" for name in SECTIONS)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class DyingSummarizer(ScriptedChatModel):
    """A summarizer model during whose call the process is killed."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")


class DyingPreparer(ScriptedChatModel):
    """A summarizer asked ahead of the fold, in the background: the process is killed while it writes."""

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        PREPARING.set()
        IN_TOOL.wait(30)  # the agent went on to its next tool call meanwhile
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")


class DyingBackend(FilesystemBackend):
    """A filesystem backend whose `nth` upload to a path `kill_on` accepts writes `share` of its bytes, then dies.

    `FilesystemBackend` truncates a file before writing it, so `share=0` is a kill between
    the truncation and the write, and `share=0.5` a kill in the middle of the write.
    """

    def __init__(self, root_dir: Path, *, kill_on: Callable[[str], bool], nth: int, share: float) -> None:
        super().__init__(root_dir=root_dir, virtual_mode=True)
        self.kill_on, self.nth, self.share = kill_on, nth, share
        self.seen = 0

    def upload_files(self, files: list[tuple[str, bytes]]) -> list:
        for path, data in files:
            if self.kill_on(path):
                self.seen += 1
                if self.seen == self.nth:
                    super().upload_files([(path, data[: int(len(data) * self.share)])])
                    os.kill(os.getpid(), signal.SIGKILL)
        return super().upload_files(files)


@dataclass(frozen=True)
class Scenario:
    script: list[AIMessage]
    window: int
    interrupted: str
    """The graph node the kill lands in."""
    summarizer: Any = DETERMINISTIC
    """The summarizer of the run that is killed; the resumed run answers with `AnsweringSummarizer`."""
    kill_on: Callable[[str], bool] | None = None
    """Which uploads count towards the `nth` that is killed (`None`: the summarizer kills instead)."""
    nth: int = 1
    share: float = 0.0
    policy: ContextPolicy = POLICY

    @property
    def resumed_summarizer(self) -> Any:
        return self.summarizer if self.summarizer == DETERMINISTIC else AnsweringSummarizer(messages=iter(()))


def _evicted(path: str) -> bool:
    return path.startswith("/large_tool_results/")


def _history(path: str) -> bool:
    return path == HISTORY


def _beside_history(path: str) -> bool:
    return path.startswith("/conversation_history/") and path != HISTORY


SCENARIOS = {
    "evicted-file-truncated": Scenario(EVICTION_SCRIPT, 32_000, "tools", kill_on=_evicted),
    "evicted-file-half-written": Scenario(EVICTION_SCRIPT, 32_000, "tools", kill_on=_evicted, share=0.5),
    "summarizer-call": Scenario(
        FOLD_SCRIPT,
        4_500,  # room for a step before the first fold, so its section ends with a tool result
        "model",
        summarizer=DyingSummarizer(messages=iter(())),
        policy=POLICY.replace(fold_prepare_ahead=0),  # the summary is written when the fold fires
    ),
    "summarizer-preparing": Scenario(FOLD_SCRIPT, 4_500, "tools", summarizer=DyingPreparer(messages=iter(()))),
    "first-history-write-half-done": Scenario(FOLD_SCRIPT, 4_000, "model", kill_on=_history, share=0.5),
    "second-history-write-truncated": Scenario(FOLD_SCRIPT, 4_000, "model", kill_on=_history, nth=2),
    "second-staged-copy-half-written": Scenario(FOLD_SCRIPT, 4_000, "model", kill_on=_beside_history, nth=2, share=0.5),
}


def run(state_dir: Path, name: str, durability: str, api: str) -> None:
    """Run scenario `name`'s conversation with `invoke` or `ainvoke`; `durability` says when checkpoints are written."""
    scenario = SCENARIOS[name]
    if isinstance(scenario.summarizer, DyingPreparer):
        TOOLS_TAKE_TIME.set()
    backend: FilesystemBackend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)
    if scenario.kill_on is not None:
        backend = DyingBackend(state_dir, kill_on=scenario.kill_on, nth=scenario.nth, share=scenario.share)
    agent = create_context_agent(
        scripted_model(scenario.script, window=scenario.window),
        [fetch, build],
        state_dir=state_dir,
        summarizer=scenario.summarizer,
        backend=ThreadIsolatedBackend(backend),
        policy=scenario.policy,
    )
    given = {"messages": [HumanMessage(QUESTION)]}
    if api == "ainvoke":
        asyncio.run(agent.ainvoke(given, CONFIG, durability=durability))
    else:
        agent.invoke(given, CONFIG, durability=durability)
    print("the run finished without being killed")


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
