"""The window of the model actually called, resolved on every call.

Resolving per call (from `request.model`), never once at build time, is what lets a
checkpointed thread move to another model, or a middleware pick the model at run
time, and have every threshold follow. Local models are read through plain
attributes, so no optional provider package is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from ctxwarden.errors import WindowUnknownError

WindowSource = Literal["override", "profile", "loaded_context", "refusal"]

_LOADED_CONTEXT_ATTRS = ("num_ctx", "n_ctx")
"""Attributes under which local chat models keep the context they were loaded with
(ChatOllama `num_ctx`, llama.cpp `n_ctx`)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A resolved context window."""

    tokens: int
    """Input tokens the model accepts."""

    source: WindowSource
    """Where the number came from."""

    model: str
    """Name of the model it belongs to."""


def model_name(model: Any) -> str:
    """A readable name for a chat model: its model id (or `name`) where it has one, else its class."""
    inner = unwrap_model(model)
    for attr in ("model_name", "model", "model_id", "deployment_name", "name"):
        value = getattr(inner, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(inner).__name__


def unwrap_model(model: Any) -> Any:
    """The chat model inside a `RunnableBinding` (as made by `bind_tools`)."""
    seen = 0
    while hasattr(model, "bound") and seen < 8:
        model = model.bound
        seen += 1
    return model


def resolve_window(model: Any, override: int | None = None) -> Window:
    """Window of `model`: `override`, else `profile["max_input_tokens"]`, else its loaded context.

    Raises `WindowUnknownError` telling how to pass one when none of them is known.
    """
    name = model_name(model)
    if override is not None:
        return Window(override, "override", name)
    inner = unwrap_model(model)
    profile = getattr(inner, "profile", None)
    if isinstance(profile, Mapping):
        tokens = profile.get("max_input_tokens")
        if _positive_int(tokens):
            return Window(tokens, "profile", name)
    for attr in _LOADED_CONTEXT_ATTRS:
        tokens = getattr(inner, attr, None)
        if _positive_int(tokens):
            return Window(tokens, "loaded_context", name)
    raise WindowUnknownError(_unknown_message(inner, name))


def _positive_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _unknown_message(model: Any, name: str) -> str:
    cls = type(model).__name__
    local = next((attr for attr in _LOADED_CONTEXT_ATTRS if hasattr(model, attr)), None)
    if local is not None:
        hint = (
            f"{cls}.{local} is {getattr(model, local)!r}, so the context the model is loaded with is unknown. "
            f"Fix: set it, e.g. {cls}(..., {local}=32768), or pass ContextPolicy(window=32768)."
        )
    else:
        hint = (
            "it has no profile['max_input_tokens'] and no loaded context size. "
            "Fix: pass ContextPolicy(window=128000) to ctxwarden, "
            "or give the model a profile: model.profile = {'max_input_tokens': 128000}."
        )
    return f"cannot tell the context window of model {name!r} ({cls}): {hint}"


__all__ = ["Window", "WindowSource", "model_name", "resolve_window", "unwrap_model"]
