"""The summarizer's request as the continuation of a call: the call as the model received it, then the instruction.

A provider caches the prefix of each call (tools, system prompt, messages) and bills a later
request that begins with it at a fraction of the price. A transcript prompt begins with
nothing the agent's calls sent, so every fold paid again, in full, for the turns it read.
When the summarizer is the model the agent calls (no summarizer was given), the fold sends
that call instead — same tools, same system prompt, same messages, in the same order —
with one user message appended that asks for the summary. Everything but that message is
read from the cache. A prepared fold sends it once its call has been answered, when the
cache holds it (`ctxwarden.fold.prepare`).

The model then reads its own conversation, not a transcript of it, and could take it for
one to continue: the instruction says to answer with the summary and call no tool. A reply
without text counts as a failed summary (retried, then the deterministic summary is used).
A separate summarizer model shares no cache with the agent, so it still gets the transcript
(`ctxwarden.fold.summarize.prompt_for`), as does a model that cannot take the call's tools.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import BaseMessage, HumanMessage

from ctxwarden.fold.summarize import FOLD_REQUEST_SOURCE, SECTIONS_GUIDE

ANTHROPIC = "anthropic-chat"
"""`_llm_type` of langchain-anthropic's chat model, whose requests read the cache only where marked."""

INSTRUCTION = (
    "Pause the task: your context is being compacted. Write the summary that will replace the conversation above "
    "(its newest turns stay in view as well: name them briefly). Do not call any tool; answer with the summary "
    "only, written so that you can continue the task from it.\n"
    + SECTIONS_GUIDE
    + " If the conversation above opens with a summary of earlier turns, extend it rather than restarting it: "
    "keep what still holds.\n{focus}"
)


@dataclass(frozen=True)
class SentCall:
    """What a model call sends: the prefix an in-place summarizer request repeats, byte for byte."""

    model: Any
    system: BaseMessage | None
    messages: Sequence[BaseMessage]
    tools: Sequence[Any] = ()
    tool_choice: Any = None
    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, request: ModelRequest[Any]) -> SentCall:
        return cls(
            request.model,
            request.system_message,
            request.messages,  # not copied: a layer replaces the list, never edits it
            request.tools,
            request.tool_choice,
            dict(request.model_settings),
        )

    @functools.cached_property
    def bound(self) -> Any | None:
        """The model bound as the agent binds it for this call (`None`: it cannot take the call's tools); bound once."""
        settings = dict(self.settings)
        if getattr(self.model, "_llm_type", None) == ANTHROPIC and "cache_control" not in settings:
            settings["cache_control"] = {"type": "ephemeral"}  # Anthropic reads its cache at a marked point only
        if not self.tools:
            return self.model.bind(**settings) if settings else self.model
        try:
            return self.model.bind_tools(list(self.tools), tool_choice=self.tool_choice, **settings)
        except NotImplementedError:
            return None


def fold_request(sent: SentCall, *, budget_words: int, focus: str | None) -> list[BaseMessage]:
    """The call `sent`, then the instruction to summarize all of it (the fold keeps its newest turns in view too)."""
    text = INSTRUCTION.format(budget=budget_words, focus=f"Focus especially on: {focus}\n" if focus else "")
    ask = HumanMessage(text.strip(), additional_kwargs={"lc_source": FOLD_REQUEST_SOURCE})
    return [*([sent.system] if sent.system is not None else []), *sent.messages, ask]


__all__ = ["INSTRUCTION", "SentCall", "fold_request"]
