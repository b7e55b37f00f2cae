"""Writing to a checkpointed thread outside a model call, without dropping what ctxwarden does not know.

`compact()` records a fold and a fork seeds a new thread without running the agent. A
graph writes a checkpoint from the channels it knows, so a write through a graph that
knows only ctxwarden's keys silently drops every other key of the thread: deepagents'
todos and in-state files, any middleware's own state. So a write goes through the
agent's own graph when there is one (its schema knows every key, and the node LangGraph
infers as the last one to run keeps the thread's pending steps as they were), and
otherwise through a reader graph whose schema is widened with every key the stored
checkpoint holds, so those values are carried over unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, get_type_hints

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph

from ctxwarden.observe.remote import awrite_served, is_served, write_served
from ctxwarden.view import ContextState

READ_NODE = "read"

COMPACTED_AFTER = "compacted_after"
"""Key in the fold state that `compact()` sets to the id of the last call's reply: the view changed after that
call, so its figures no longer describe it. The next fold done in a call rewrites the fold state without it."""


def _is_state_key(name: str) -> bool:
    """A state key, not one of LangGraph's own channels (`__start__`, `branch:to:model`, ...)."""
    return not name.startswith("__") and ":" not in name


def kept_schema(keys: set[str]) -> type:
    """`ContextState` widened with `keys` (each a plain value), so a write carries them over."""
    hints = get_type_hints(ContextState, include_extras=True)
    extra = {key: NotRequired[Any] for key in sorted(keys - set(hints)) if _is_state_key(key)}
    if not extra:
        return ContextState
    widened: type = TypedDict("KeptState", {**hints, **extra})  # type: ignore[misc]
    return widened


def keeping_reader(checkpointer: BaseCheckpointSaver, stored: set[str]) -> Any:
    """A one-node graph over ctxwarden's state plus the `stored` keys, to write a thread without losing any."""
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(kept_schema(stored))
    graph.add_node(READ_NODE, lambda _state: {})
    graph.add_edge(START, READ_NODE)
    graph.add_edge(READ_NODE, END)
    return graph.compile(checkpointer=checkpointer)


def _stored_keys(checkpointer: BaseCheckpointSaver, config: RunnableConfig) -> set[str]:
    saved = checkpointer.get_tuple(config)
    return set(saved.checkpoint["channel_values"]) if saved is not None else set()


async def _astored_keys(checkpointer: BaseCheckpointSaver, config: RunnableConfig) -> set[str]:
    saved = await checkpointer.aget_tuple(config)
    return set(saved.checkpoint["channel_values"]) if saved is not None else set()


def checkpointer_of(source: Any) -> BaseCheckpointSaver:
    """The checkpointer of an agent (or the checkpointer itself)."""
    if isinstance(source, BaseCheckpointSaver):
        return source
    saver = getattr(source, "checkpointer", None)
    if isinstance(saver, BaseCheckpointSaver):
        return saver
    raise TypeError(f"cannot write threads through a {type(source).__name__}: pass the agent or its checkpointer")


def write_state(source: Any, config: RunnableConfig, update: Mapping[str, Any]) -> None:
    """Apply `update` to the thread in `config`, keeping every other key and the thread's pending steps."""
    if is_served(source):  # a LangGraph server's thread: written over its API
        return write_served(source, config, update)
    if hasattr(source, "update_state"):
        try:
            source.update_state(config, dict(update))
            return
        except InvalidUpdateError:  # no single last node to write as (e.g. parallel steps): widen a reader
            pass
    saver = checkpointer_of(source)
    keeping_reader(saver, _stored_keys(saver, config)).update_state(config, dict(update), as_node=READ_NODE)


async def awrite_state(source: Any, config: RunnableConfig, update: Mapping[str, Any]) -> None:
    """Async twin of `write_state`."""
    if is_served(source):
        return await awrite_served(source, config, update)
    if hasattr(source, "aupdate_state"):
        try:
            await source.aupdate_state(config, dict(update))
            return
        except InvalidUpdateError:  # no single last node to write as (e.g. parallel steps): widen a reader
            pass
    saver = checkpointer_of(source)
    reader = keeping_reader(saver, await _astored_keys(saver, config))
    await reader.aupdate_state(config, dict(update), as_node=READ_NODE)


def seed_thread(checkpointer: BaseCheckpointSaver, config: RunnableConfig, values: Mapping[str, Any]) -> None:
    """Create the thread in `config` holding `values` (messages and any other keys), with no step pending."""
    keeping_reader(checkpointer, set(values)).update_state(config, dict(values), as_node=READ_NODE)


__all__ = [
    "COMPACTED_AFTER",
    "awrite_state",
    "checkpointer_of",
    "keeping_reader",
    "kept_schema",
    "seed_thread",
    "write_state",
]
