"""A scripted chat model for examples, notebooks and tests: fixed replies, real tool binding.

langchain-core's `GenericFakeChatModel` cannot be given tools, and every deep agent has
tools, so this subclass accepts `bind_tools` (keeping nothing: the replies are
scripted) and takes a `profile` like any real model, so its window is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.language_models import GenericFakeChatModel, LanguageModelInput
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool


class ScriptedChatModel(GenericFakeChatModel):
    """Answers each call with the next scripted message; usable as a deep agent's model."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def scripted_model(
    replies: Iterable[AIMessage | str], *, window: int | None = None, name: str = "scripted"
) -> ScriptedChatModel:
    """A `ScriptedChatModel` answering with `replies` in order; `window` sets `profile["max_input_tokens"]`."""
    profile = ModelProfile(max_input_tokens=window) if window is not None else None
    messages = iter([AIMessage(r) if isinstance(r, str) else r for r in replies])
    return ScriptedChatModel(messages=messages, profile=profile, name=name)


__all__ = ["ScriptedChatModel", "scripted_model"]
