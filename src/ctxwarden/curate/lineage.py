"""Which thread a fork came from, kept in the fork's own state.

A fork is seeded with some of its parent's turns; the rest stays in the parent. The
fork may read its parent's content (never change it), for example to search what the
parent cleared or folded, so it must know its parent without being told by anyone but
ctxwarden: the relation is written in the fork's private state when the fork is made
(`Session.fork`), and the chain of parents is followed through each parent's own state.
A thread that is not a fork has no parent, so it reads no thread but its own.

A thread id names a thread only while it exists: a parent deleted from the checkpointer
leaves its id free, and a new thread may take it (a client's own id, used again). So the
fork also records the checkpoint it was made from, and a parent counts as such only while
its checkpointer still holds that checkpoint; the new thread of that id holds none of its
predecessor's, and the fork never reads it.

The checkpoint is also what makes the record ctxwarden's: a client can write any key of its
own thread's state (`update_state`, a server's thread-state endpoint), so a record naming
another thread by id alone would let it read that thread. Its checkpoint ids are random and
shown only to those who read that thread, so a record without one names no parent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

FORK_STATE_KEY = "ctxwarden_fork"
"""The private state key holding `{"parent": <thread id>, "checkpoint": <its checkpoint id the fork was made from>}`
in a fork."""

MAX_FORK_DEPTH = 64
"""How far up a chain of forks a thread reads (a guard against a cycle written by hand)."""


class ForkState(AgentState):
    """The thread this one was forked from."""

    ctxwarden_fork: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


def fork_state(parent: str, checkpoint: str | None) -> dict[str, Any]:
    """The state update that records `parent`, at its `checkpoint`, as the thread a new fork came from."""
    return {FORK_STATE_KEY: {"parent": parent, "checkpoint": checkpoint}}


def parent_of(values: Mapping[str, Any] | None) -> str | None:
    """The thread these state values were forked from, or `None`."""
    return _recorded(values)[0]


def _recorded(values: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """The parent's thread id and the checkpoint id the fork was made from (`None`: not recorded)."""
    raw = (values or {}).get(FORK_STATE_KEY)
    if not isinstance(raw, Mapping):
        return None, None
    parent, checkpoint = raw.get("parent"), raw.get("checkpoint")
    return (
        parent if isinstance(parent, str) and parent else None,
        checkpoint if isinstance(checkpoint, str) and checkpoint else None,
    )


def ancestors(
    values: Mapping[str, Any] | None, read: Callable[[str, str], Mapping[str, Any] | None]
) -> list[tuple[str, Mapping[str, Any]]]:
    """Each thread up the chain of forks, nearest first, with its state values.

    `read(thread, checkpoint)` gives a thread's latest values, or `None` when it is unknown or no longer holds
    `checkpoint` (the one the fork was made from): the chain stops there, as it does at a record without one."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    parent, checkpoint = _recorded(values)
    while parent is not None and checkpoint is not None and parent not in seen and len(found) < MAX_FORK_DEPTH:
        seen.add(parent)
        parent_values = read(parent, checkpoint)
        if parent_values is None:
            break
        found.append((parent, parent_values))
        parent, checkpoint = _recorded(parent_values)
    return found


__all__ = ["FORK_STATE_KEY", "MAX_FORK_DEPTH", "ForkState", "ancestors", "fork_state", "parent_of"]
