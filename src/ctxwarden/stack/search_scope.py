"""What `recall(query=...)` searches in a managed agent: the thread as its model sees it, and a fork's parents.

The recall tool alone knows the thread's messages; here it is also given what the
model is shown now (the folds and the clearing boundary replayed, as for the /context
report), so a hit the model still sees is marked as such, and the threads the running
one was forked from (`ctxwarden.curate.lineage`), read from the agent's checkpointer,
read-only. A parent's offloaded files belong to another thread, which the agent's own
file tools may not open (`ThreadIsolatedBackend`); the search reads them beneath that
isolation, and only those whose path names one of the running thread's ancestors.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER

from ctxwarden.clip.search import Source, file_sources, message_sources
from ctxwarden.clip.search_files import Reader, own_files, reader
from ctxwarden.core.identity import identified
from ctxwarden.core.layout import HISTORY_DIR, folder_name
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.runtime import step_context
from ctxwarden.curate.fork import relocated
from ctxwarden.curate.lineage import ancestors
from ctxwarden.stack.isolation import ThreadIsolatedBackend, owner_of
from ctxwarden.thread.read import reader_graph
from ctxwarden.thread.view import model_view


class ThreadScope:
    """A recall `Scope`: the running thread with its view, then the threads it was forked from."""

    def __init__(self, backend: Any, policy: ContextPolicy, meter: TokenMeter) -> None:
        self.backend, self.policy, self.meter = backend, policy, meter

    def __call__(self, state: Mapping[str, Any]) -> list[Source]:
        backend = getattr(self.backend, "current", self.backend)  # a backend found on the agent's tools
        read = reader(backend)
        messages = identified(state.get("messages", []))
        view = model_view(messages, state, self.policy, self.meter)
        own = message_sources(messages, view, read)
        parents = ancestors(state, _thread_values)
        thread = step_context()[0]
        covered = [s.path for s in own if s.path]
        if thread is not None:  # a fork's copies of its parents' history files: the parents are searched whole
            covered += [relocated(f"/{HISTORY_DIR}/{folder_name(p)}.md", p, thread) for p, _values in parents]
        files = file_sources(own_files(backend, thread, covered, messages), read)
        if not parents:
            return [*own, *files]
        beneath = _beneath(backend, {folder_name(name) for name, _values in parents})
        seeded = frozenset(m.id for m in messages if m.id)
        earlier: list[Source] = []
        for name, values in reversed(parents):  # the oldest first: conversation order
            theirs = message_sources(identified(values.get("messages", [])), None, beneath, thread=name, skip=seeded)
            covered = [s.path for s in theirs if s.path]
            theirs_files = own_files(_inner(backend), name, covered, values.get("messages", []))
            earlier += theirs + file_sources(theirs_files, beneath, thread=name)
        return [*earlier, *own, *files]


def _thread_values(thread: str, checkpoint: str) -> Mapping[str, Any] | None:
    """The latest state values of `thread`, from the running graph's checkpointer (`None` outside a run, or when the
    thread does not hold `checkpoint`, the one a fork was made from: the thread of that id is another)."""
    try:
        saver = get_config()[CONF].get(CONFIG_KEY_CHECKPOINTER)
    except RuntimeError:
        return None
    if saver is None:
        return None
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    made_from: RunnableConfig = {
        "configurable": {**config["configurable"], "checkpoint_ns": "", "checkpoint_id": checkpoint}
    }
    if contextvars.Context().run(saver.get_tuple, made_from) is None:
        return None
    # read in a fresh context: nothing of the running step's config may leak into which checkpoint is read
    state = contextvars.Context().run(reader_graph(saver).get_state, config)
    return state.values if isinstance(state.values, Mapping) and state.values.get("messages") else None


def _inner(backend: Any) -> Any:
    return backend.inner if isinstance(backend, ThreadIsolatedBackend) else backend


def _beneath(backend: Any, allowed: set[str]) -> Reader:
    """A reader of the files of the `allowed` threads (folder names), read-only, beneath a thread-isolating backend."""
    read = reader(_inner(backend))

    def guarded(paths: Sequence[str]) -> Mapping[str, str]:
        return read([p for p in paths if owner_of(p) in allowed])

    return guarded


__all__ = ["ThreadScope"]
