"""Choosing the model per run, from the run's context, for a graph that is not rebuilt.

`agent.invoke(inputs, config, context={"model": "small"})` switches the model of that
run; every threshold follows the model picked, because the pick happens in the core
middleware before anything is measured. A value is a chat model, a key of the
`models` given, or a `provider:model` string for `init_chat_model`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models import BaseChatModel

from ctxwarden.errors import CtxwardenError

ModelPicker = Callable[[ModelRequest[Any]], Any]
"""Returns the model for a request, or `None` to keep the agent's own."""


def model_from_context(models: Mapping[str, Any] | None = None, *, key: str = "model") -> ModelPicker:
    """A picker reading `context[key]` (a dict key or an attribute of the run's context)."""
    named = dict(models or {})
    made: dict[str, Any] = {}

    def pick(request: ModelRequest[Any]) -> Any:
        context = getattr(request.runtime, "context", None)
        value = context.get(key) if isinstance(context, Mapping) else getattr(context, key, None)
        if value is None or isinstance(value, BaseChatModel) or hasattr(value, "bound"):
            return value
        if not isinstance(value, str):
            raise CtxwardenError(
                f"context[{key!r}]={value!r} is neither a chat model nor a model name. Fix: pass a chat model, "
                f"one of {sorted(named)}, or a 'provider:model' string."
            )
        if value in named:
            return named[value]
        if value not in made:
            if ":" not in value:
                known = ", ".join(sorted(named)) or "none"
                raise CtxwardenError(
                    f"context[{key!r}]={value!r} is not one of the models given ({known}). "
                    "Fix: pass one of those names, a chat model, or a 'provider:model' string such as "
                    "'anthropic:claude-sonnet-4-5'."
                )
            from langchain.chat_models import init_chat_model

            made[value] = init_chat_model(value)
        return made[value]

    return pick


__all__ = ["ModelPicker", "model_from_context"]
