"""The strategies compared: one deep agent harness, only the context management differs.

Every strategy is a `create_deep_agent` with the same replayed model and tools and a
filesystem backend in its own folder; what changes is what sits in the summarization
slot (where deepagents puts its context management) and whether the filesystem
middleware evicts large results:

- `none`: no eviction, nothing in the slot;
- `context-editing`: langchain's `ContextEditingMiddleware` with `ClearToolUsesEdit(trigger=window // 2, keep=3)`
  (its 100,000-token default is half of the 200,000-token window it was written for), no eviction;
- the peers of `ctxwarden.bench.peers`, no eviction, each set as its docs recommend for the window:
  `anthropic-clearing`, `anthropic-compaction`, `openhands-masking`, `openhands-summarizing`, `codex`;
- `deepagents`: `create_deep_agent`'s defaults (eviction at 20,000 tokens, its summarization);
- `ctxwarden` and `ctxwarden-cost-first`: `create_context_agent` with the default and cost-first policies.

Summaries come from one fixed fake summarizer shared by every strategy, so folds cost
the same everywhere and the comparison is about context management alone. It stands in
for the agent's own model, which summarizes in both products when no summarizer is
given: deepagents asks it with a transcript, ctxwarden by continuing the call
(`ctxwarden.fold.in_place`), and the replayed model hands it those requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.summarization import create_summarization_middleware
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden.bench.peers import (
    AnthropicClearing,
    AnthropicCompaction,
    CodexCompaction,
    ObservationMasking,
    SummarizingCondenser,
)
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.stack.build import create_context_agent

SUMMARY_TOKENS = 405
"""Length of the fixed summary every strategy's folds receive."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One summarizer request as sent: its messages and tool schemas, and how many agent calls were made before it."""

    after_calls: Any
    messages: list[BaseMessage]
    tools: list[Any]


class FixedSummarizer(BaseChatModel):
    """Answers every summarization request with the same summary, and counts what it was asked."""

    counter: Any
    tick: Any = None
    """Called at each request; its answer is kept in `at` (the harness passes the number of model calls so far)."""
    _calls: list[int] = PrivateAttr(default_factory=list)
    _at: list[Any] = PrivateAttr(default_factory=list)
    _asked: list[Asked] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "ctxwarden-fixed-summarizer"

    @property
    def calls(self) -> list[int]:
        """Input tokens of each request."""
        return self._calls

    @property
    def asked(self) -> list[Asked]:
        """Each request as sent."""
        return self._asked

    @property
    def at(self) -> list[Any]:
        """`tick()` at each request."""
        return self._at

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        asked = sum(self.counter(str(m.content)) for m in messages)
        self._calls.append(asked)
        self._at.append(self.tick() if self.tick is not None else None)
        self._asked.append(Asked(self._at[-1], list(messages), list(kwargs.get("tools") or [])))
        text = _summary_text(self.counter)
        reply = AIMessage(
            text,
            usage_metadata={
                "input_tokens": asked,
                "output_tokens": SUMMARY_TOKENS,
                "total_tokens": asked + SUMMARY_TOKENS,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _summary_text(counter: Any) -> str:
    sections = ["Session intent", "Key decisions", "Artifacts", "Errors seen", "Current state", "Next steps"]
    words = " ".join(f"## {s}\n- the work so far, summarized for the benchmark." for s in sections)
    text = words
    while counter(text) < SUMMARY_TOKENS:
        text += " detail"
    return text


class _Passthrough(AgentMiddleware):
    """Occupies the summarization slot and does nothing: no context management."""

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"


class _SlotContextEditing(ContextEditingMiddleware):
    """langchain's context editing in the summarization slot."""

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"


@dataclass(frozen=True, slots=True)
class Strategy:
    name: str
    build: Callable[..., Any]
    """`(model, tools, folder, summarizer, window, system_prompt) -> agent`."""


def _no_eviction(backend: Any) -> FilesystemMiddleware:
    return FilesystemMiddleware(backend=backend, tool_token_limit_before_evict=None)


def _none(
    model: Any, tools: list[Any], folder: Path, summarizer: FixedSummarizer, window: int, system_prompt: str | None
) -> Any:
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    middleware: list[Any] = [_no_eviction(backend), _Passthrough()]
    return create_deep_agent(
        model, tools, system_prompt=system_prompt, backend=backend, middleware=middleware, checkpointer=InMemorySaver()
    )


def _context_editing(
    model: Any, tools: list[Any], folder: Path, summarizer: FixedSummarizer, window: int, system_prompt: str | None
) -> Any:
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    edit = ClearToolUsesEdit(trigger=window // 2, keep=3)
    middleware: list[Any] = [_no_eviction(backend), _SlotContextEditing(edits=[edit])]
    return create_deep_agent(
        model, tools, system_prompt=system_prompt, backend=backend, middleware=middleware, checkpointer=InMemorySaver()
    )


PEERS: dict[str, Callable[[int, FixedSummarizer], AgentMiddleware]] = {
    # trigger: Anthropic's default 100,000 input tokens on a 200,000-token window is half of it; clear_at_least: the
    # docs' example clears at least 5,000 of a 30,000 trigger (a sixth); keep 3, no exclusions, inputs kept: defaults
    "anthropic-clearing": lambda w, s: AnthropicClearing(w, s, trigger=w // 2, keep=3, clear_at_least=w // 12),
    # compaction's default trigger, 150,000 input tokens on a 200,000-token window, is three quarters of it
    "anthropic-compaction": lambda w, s: AnthropicCompaction(w, s, trigger=w * 3 // 4),
    # OpenHands' condenser configs: attention_window 100; keep_first 1, max_size 100 (events, whatever the window)
    "openhands-masking": lambda w, s: ObservationMasking(w, s, attention_window=100),
    "openhands-summarizing": lambda w, s: SummarizingCondenser(w, s, keep_first=1, max_size=100),
    # Codex: auto-compaction at 90% of the context window; recent user messages kept up to 20,000 tokens
    "codex": lambda w, s: CodexCompaction(w, s, token_limit=w * 9 // 10, user_budget=20_000),
}


def _peer(name: str) -> Callable[..., Any]:
    def build(
        model: Any, tools: list[Any], folder: Path, summarizer: FixedSummarizer, window: int, system_prompt: str | None
    ) -> Any:
        backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
        middleware: list[Any] = [_no_eviction(backend), PEERS[name](window, summarizer)]
        return create_deep_agent(
            model,
            tools,
            system_prompt=system_prompt,
            backend=backend,
            middleware=middleware,
            checkpointer=InMemorySaver(),
        )

    return build


def _deepagents(
    model: Any, tools: list[Any], folder: Path, summarizer: FixedSummarizer, window: int, system_prompt: str | None
) -> Any:
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    summarizer.profile = {"max_input_tokens": window}  # its thresholds come from this profile; its summaries are fixed
    slot = create_summarization_middleware(summarizer, backend)
    return create_deep_agent(
        model, tools, system_prompt=system_prompt, backend=backend, middleware=[slot], checkpointer=InMemorySaver()
    )


def ctxwarden_builder(policy: ContextPolicy) -> Callable[..., Any]:
    """The strategy builder for `create_context_agent` with `policy`, given no summarizer: the agent's model
    summarizes, as by default, and the replayed model hands those requests to the fixed summarizer (its `summaries`).
    """

    def build(
        model: Any, tools: list[Any], folder: Path, summarizer: FixedSummarizer, window: int, system_prompt: str | None
    ) -> Any:
        return create_context_agent(
            model,
            tools,
            state_dir=folder,
            policy=policy,
            trace=folder / "trace.sqlite",
            system_prompt=system_prompt,
        )

    return build


STRATEGIES = {
    "none": Strategy("none", _none),
    "context-editing": Strategy("context-editing", _context_editing),
    **{name: Strategy(name, _peer(name)) for name in PEERS},
    "deepagents": Strategy("deepagents", _deepagents),
    "ctxwarden": Strategy("ctxwarden", ctxwarden_builder(ContextPolicy())),
    "ctxwarden-cost-first": Strategy("ctxwarden-cost-first", ctxwarden_builder(ContextPolicy.cost_first())),
}


def fixed_summarizer() -> FixedSummarizer:
    return FixedSummarizer(counter=TokenMeter().counter, name="fixed-summarizer")


__all__ = [
    "PEERS",
    "STRATEGIES",
    "SUMMARY_TOKENS",
    "FixedSummarizer",
    "Strategy",
    "ctxwarden_builder",
    "fixed_summarizer",
]
