"""A scripted chat model for examples, notebooks and tests: fixed replies, real tool binding.

langchain-core's `GenericFakeChatModel` cannot be given tools, and every deep agent has
tools, so this subclass accepts `bind_tools` (keeping nothing: the replies are
scripted) and takes a `profile` like any real model, so its window is known. It streams
like a provider (text in pieces, tool calls as chunks), so `stream_mode="messages"` works.

Once an agent has bound it, it answers only the agent's own calls: a call from outside the
agent loop — a fold asking the agent's model for a summary when no summarizer was given —
raises `ReplayMismatchError` saying to pass one, instead of spending the agent's next
scripted reply on it (the fold then falls back to its deterministic summary; the run goes on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import GenericFakeChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr

from ctxwarden.errors import ReplayMismatchError
from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay.streaming import StreamedReplies

AGENT_CALL = "ctxwarden_agent_call"
"""The keyword `bind_tools` binds, so the model can tell its agent's calls from anyone else's."""


class ScriptedChatModel(StreamedReplies, GenericFakeChatModel):
    """Answers each call with the next scripted message; usable as a deep agent's model."""

    _bound: bool = PrivateAttr(default=False)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Keep no tools (the replies are scripted); mark the agent's calls as its own."""
        self._bound = True
        return self.bind(**{AGENT_CALL: True})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # only the agent's own model (bound) refuses: a scripted model given as the summarizer is there to answer folds
        if self._bound and (not kwargs.pop(AGENT_CALL, False) or is_fold_request(messages)):
            raise ReplayMismatchError(
                f"scripted model {self.name!r} was called outside its agent's loop (a fold asking for a summary, "
                "when no summarizer was given); its replies are scripted for the agent, so none is spent here. "
                "Fix: pass summarizer='deterministic', or a summarizer model such as another "
                "scripted_model([...summary text...])."
            )
        kwargs.pop(AGENT_CALL, None)
        return super()._generate(messages, stop, run_manager, **kwargs)


def scripted_model(
    replies: Iterable[AIMessage | str], *, window: int | None = None, name: str = "scripted"
) -> ScriptedChatModel:
    """A `ScriptedChatModel` answering with `replies` in order; `window` sets `profile["max_input_tokens"]`."""
    profile = ModelProfile(max_input_tokens=window) if window is not None else None
    messages = iter([AIMessage(r) if isinstance(r, str) else r for r in replies])
    return ScriptedChatModel(messages=messages, profile=profile, name=name)


__all__ = ["ScriptedChatModel", "scripted_model"]
