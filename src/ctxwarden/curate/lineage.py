"""Which thread a fork came from, kept in the fork's own state.

A fork is seeded with some of its parent's turns; the rest stays in the parent. The
fork may read its parent's content (never change it), for example to search what the
parent cleared or folded, so it must know its parent without being told by anyone but
ctxwarden: the relation is written in the fork's private state when the fork is made
(`Session.fork`), and the chain of parents is followed through each parent's own state.
A thread that is not a fork has no parent, so it reads no thread but its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

FORK_STATE_KEY = "ctxwarden_fork"
"""The private state key holding `{"parent": <thread id>}` in a fork."""

MAX_FORK_DEPTH = 64
"""How far up a chain of forks a thread reads (a guard against a cycle written by hand)."""


class ForkState(AgentState):
    """The thread this one was forked from."""

    ctxwarden_fork: Annotated[NotRequired[dict[str, Any]], PrivateStateAttr]


def fork_state(parent: str) -> dict[str, Any]:
    """The state update that records `parent` as the thread a new fork came from."""
    return {FORK_STATE_KEY: {"parent": parent}}


def parent_of(values: Mapping[str, Any] | None) -> str | None:
    """The thread these state values were forked from, or `None`."""
    raw = (values or {}).get(FORK_STATE_KEY)
    parent = raw.get("parent") if isinstance(raw, Mapping) else None
    return parent if isinstance(parent, str) and parent else None


def ancestors(
    values: Mapping[str, Any] | None, read: Callable[[str], Mapping[str, Any] | None]
) -> list[tuple[str, Mapping[str, Any]]]:
    """Each thread up the chain of forks, nearest first, with its state values (`read(thread)`; `None`: unknown)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    parent = parent_of(values)
    while parent is not None and parent not in seen and len(found) < MAX_FORK_DEPTH:
        seen.add(parent)
        parent_values = read(parent)
        if parent_values is None:
            break
        found.append((parent, parent_values))
        parent = parent_of(parent_values)
    return found


__all__ = ["FORK_STATE_KEY", "MAX_FORK_DEPTH", "ForkState", "ancestors", "fork_state", "parent_of"]
