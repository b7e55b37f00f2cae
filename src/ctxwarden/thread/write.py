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
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import InvalidUpdateError

from ctxwarden.errors import ThreadSourceError
from ctxwarden.thread.checkpoints import checkpointer_of
from ctxwarden.thread.read import READ_NODE, reader_graph, stored_keys
from ctxwarden.thread.remote import awrite_served, is_served, write_served

COMPACTED_AFTER = "compacted_after"
"""Key in the fold state that `compact()` sets to the id of the last call's reply: the view changed after that
call, so its figures no longer describe it. The next fold done in a call rewrites the fold state without it."""


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
    saver = _saver(source)
    reader_graph(saver, stored_keys(saver.get_tuple(config))).update_state(config, dict(update), as_node=READ_NODE)


async def awrite_state(source: Any, config: RunnableConfig, update: Mapping[str, Any]) -> None:
    """Async twin of `write_state`: the same writes, through the async calls."""
    if is_served(source):
        return await awrite_served(source, config, update)
    if hasattr(source, "aupdate_state"):
        try:
            await source.aupdate_state(config, dict(update))
            return
        except InvalidUpdateError:  # no single last node to write as (e.g. parallel steps): widen a reader
            pass
    saver = _saver(source)
    reader = reader_graph(saver, stored_keys(await saver.aget_tuple(config)))
    await reader.aupdate_state(config, dict(update), as_node=READ_NODE)


def seed_thread(checkpointer: BaseCheckpointSaver, config: RunnableConfig, values: Mapping[str, Any]) -> None:
    """Create the thread in `config` holding `values` (messages and any other keys), with no step pending."""
    reader_graph(checkpointer, values).update_state(config, dict(values), as_node=READ_NODE)


def _saver(source: Any) -> BaseCheckpointSaver:
    saver = checkpointer_of(source)
    if saver is None:
        raise ThreadSourceError(
            f"cannot write threads through a {type(source).__name__}. Fix: pass the agent or its checkpointer."
        )
    return saver


__all__ = ["COMPACTED_AFTER", "awrite_state", "seed_thread", "write_state"]
