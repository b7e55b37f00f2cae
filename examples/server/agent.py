"""A deep agent served by the LangGraph server, with ctxwarden managing its context window.

The server imports this module, takes its module-level `graph` (named in `langgraph.json`)
and brings its own checkpointer and store, so the graph is built with
`context_middleware(...)` rather than `create_context_agent` (which would add a checkpointer
of its own). One backend serves every thread: `ThreadIsolatedBackend` gives each thread its
own offload folders under `AGENT_FILES`, and the trace goes to `AGENT_FILES/trace.sqlite`,
where `ctxwarden context --url ... --state-dir AGENT_FILES` reads it.

The model is a stand-in that needs no key: `BuildModel` decides each reply from the
conversation it is shown (so every thread of the server gets the same, deterministic run),
and streams like a provider. Replace it with any chat model, e.g.
`init_chat_model("anthropic:claude-sonnet-4-5")`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, ThreadIsolatedBackend, context_middleware
from ctxwarden.replay.streaming import StreamedReplies

AGENT_FILES = os.environ.get("AGENT_FILES", "./agent-files")
"""Where the offloaded files and the trace go (one machine: a folder every thread shares, each in its own part)."""

WINDOW = 6_000
"""A small window, so a short run shows every layer: eviction, clearing and a fold."""

REQUEST = re.compile(r"build (?P<target>[\w-]+) in (?P<steps>\d+) steps")
CALL_ID = re.compile(r"^build-(?P<target>[\w-]+)-(?P<step>\d+)-of-(?P<steps>\d+)$")
RECALL = re.compile(r"recall (?P<call>build-[\w-]+)")
NEXT_PAGE = re.compile(r"; page=(?P<page>\d+) for the rest\]$")


def build_log(target: str, step: int) -> str:
    """The log a build step prints: odd steps print a long one (evicted at arrival), even steps a short one."""
    lines = 400 if step % 2 else 16
    return "\n".join(f"[{target} step {step}] compiled {target}/module_{i}.py in {i % 7 + 1} ms" for i in range(lines))


@tool
def build(target: str, step: int) -> str:
    """Build one step of a target and return its whole log."""
    return build_log(target, step)


class BuildModel(StreamedReplies, BaseChatModel):
    """Answers `build TARGET in N steps` by calling `build` N times, one step a turn, then reports;
    answers `recall CALL_ID` by calling ctxwarden's `recall` for that call's whole result, page after page (each
    page what the window leaves room for).

    Each reply depends only on the messages the call is shown: the request, or the id of
    the last tool call (which names the target, the step and the step count), so a fold that
    took the request out of view does not change what comes next.
    """

    @property
    def _llm_type(self) -> str:
        return "build-model"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any) -> Any:
        return self  # the replies are decided by the conversation, not by the tools

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next_reply(messages))])


def next_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """The agent's next step, from the last message of the conversation it is shown.

    Messages ctxwarden adds to the view (a fold's summary, a gauge note) carry an `lc_source`
    and are not the conversation: they are skipped.
    """
    said = [m for m in messages if not m.additional_kwargs.get("lc_source")]
    last = said[-1] if said else None
    if isinstance(last, ToolMessage) and last.name == "recall":
        wanted_call, _sep, page = last.tool_call_id.removeprefix("recall-").partition("-page-")
        if more := NEXT_PAGE.search(str(last.content)):
            return recall_page(wanted_call, int(more["page"]))
        return AIMessage(f"Recalled {wanted_call}: {page or 1} page(s).")
    if isinstance(last, HumanMessage) and (wanted := RECALL.search(str(last.content))):
        return recall_page(wanted["call"], 1)
    if isinstance(last, ToolMessage) and (done := CALL_ID.match(last.tool_call_id)):
        target, step, steps = done["target"], int(done["step"]), int(done["steps"])
    elif isinstance(last, HumanMessage) and (asked := REQUEST.search(str(last.content))):
        target, step, steps = asked["target"], 0, int(asked["steps"])
    else:
        return AIMessage("Tell me what to build: 'build TARGET in N steps'.")
    if step >= steps:
        return AIMessage(f"Built {target}: all {steps} steps passed.")
    note = f"Step {step + 1} of {steps} for {target}: running the build and reading its log before going on. " * 3
    call = {
        "name": "build",
        "args": {"target": target, "step": step + 1},
        "id": f"build-{target}-{step + 1}-of-{steps}",
    }
    return AIMessage(note.strip(), tool_calls=[call])


def recall_page(call_id: str, page: int) -> AIMessage:
    """A call of ctxwarden's `recall` for page `page` of the result of `call_id`."""
    args = {"call_id": call_id, "page": page, "limit": 50_000}
    suffix = f"-page-{page}" if page > 1 else ""
    return AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": f"recall-{call_id}{suffix}"}])


backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=AGENT_FILES, virtual_mode=True))
graph = create_deep_agent(
    BuildModel(profile={"max_input_tokens": WINDOW}),
    [build],
    backend=backend,  # ctxwarden finds it: evicted results land where read_file looks
    middleware=context_middleware(
        state_dir=AGENT_FILES,  # the trace: AGENT_FILES/trace.sqlite
        summarizer="deterministic",  # fold summaries without a model (the stand-in model cannot summarize)
        policy=ContextPolicy(),
    ),
)
