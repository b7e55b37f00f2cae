"""Which trace events belong to the branch of a thread a config names, the thread as it stands.

LangGraph resumes a thread from any earlier checkpoint (time travel, Studio's edit of a
message): both branches stay under the one thread id, and the trace, keyed by thread id,
holds what each did. Every event recorded in a step names the checkpoint the step was
computed from (`checkpoint` in its payload, `trace.recorder`), so a branch's events are
those of the steps computed from its checkpoints: its newest (or the one the config names)
and every parent up from it, found from the checkpointer's parent links.

Where the branch left another, its checkpoint has two children: the step computed from it
ran once for each branch, with the same checkpoint and the same task. The branch's run of
it is told by time: after every sibling made before the branch's own child (the other
branch had finished before this one was resumed), and no later than that child. The step
computed from the newest checkpoint belongs to the branch only while no checkpoint follows
(a run that failed on it, or goes on now). An event without a checkpoint (recorded outside a
step, or before events named one) belongs to every branch.

The parents are read without the values: SQLite's table directly (`list` would load every
checkpoint and its writes), any other checkpointer through `list`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from ctxwarden.thread.checkpoints import checkpointer_of

ALWAYS = (float("-inf"), float("inf"))


@dataclass(frozen=True, slots=True)
class Branch:
    """The steps of one branch: for each checkpoint a step of it was computed from, when that step ran."""

    spans: Mapping[str, tuple[float, float]]
    """By checkpoint id: `(after, upto)`, the times between which the branch's step computed from it ran."""

    def holds(self, checkpoint: str, ts: float) -> bool:
        """Whether an event recorded at `ts` in a step computed from `checkpoint` is this branch's."""
        span = self.spans.get(checkpoint)
        return span is not None and span[0] < ts <= span[1]


def branch_of(source: Any, config: RunnableConfig) -> Branch | None:
    """The branch `config` names (its newest checkpoint, or the `checkpoint_id` it gives); `None` when every event of
    the thread is the branch's: the thread never branched, or `source` has no checkpointer to tell (a served one)."""
    saver = checkpointer_of(source)
    if saver is None:
        return None
    top = _top(config)
    newest = saver.get_tuple(top)
    if newest is None:
        return None
    parents = _parents(saver, top)
    plan = _plan(_checkpoint_id(newest.config), parents)
    if plan is None:
        return None
    lineage, forks = plan
    times = {child: _time(saver.get_tuple(_at(top, child))) for child in _timed(forks, lineage[0])}
    return _branch(lineage, forks, times)


async def abranch_of(source: Any, config: RunnableConfig) -> Branch | None:
    """Async twin of `branch_of`, for async checkpointers."""
    saver = checkpointer_of(source)
    if saver is None:
        return None
    if isinstance(getattr(saver, "conn", None), sqlite3.Connection):
        return await asyncio.to_thread(branch_of, saver, config)
    top = _top(config)
    newest = await saver.aget_tuple(top)
    if newest is None:
        return None
    listed: RunnableConfig = {"configurable": {k: v for k, v in top["configurable"].items() if k != "checkpoint_id"}}
    parents = {_checkpoint_id(t.config): _parent_id(t) async for t in saver.alist(listed)}
    plan = _plan(_checkpoint_id(newest.config), parents)
    if plan is None:
        return None
    lineage, forks = plan
    times = {child: _time(await saver.aget_tuple(_at(top, child))) for child in _timed(forks, lineage[0])}
    return _branch(lineage, forks, times)


def _plan(start: str, parents: Mapping[str, str | None]) -> tuple[list[str], dict[str, list[str]]] | None:
    """The branch's checkpoints, newest first, and the children of each of them that has another branch's (the
    newest: any); `None` when the branch is every checkpoint there is."""
    lineage: list[str] = []
    current: str | None = start
    while current is not None and current not in lineage:
        lineage.append(current)
        current = parents.get(current)
    if len(lineage) >= len(parents):
        return None
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(child)
    forks = {p: children[p] for p in lineage if len(children.get(p, ())) > (0 if p == start else 1)}
    return lineage, forks


def _timed(forks: Mapping[str, list[str]], newest: str) -> list[str]:
    """The children whose times tell the branch's step from another's (the newest's are never the branch's)."""
    return [child for parent, kids in forks.items() if parent != newest for child in kids]


def _branch(lineage: list[str], forks: Mapping[str, list[str]], times: Mapping[str, float]) -> Branch:
    spans: dict[str, tuple[float, float]] = {}
    for index, checkpoint in enumerate(lineage):
        if index == 0:  # the newest: its step is the branch's only while nothing follows it
            if checkpoint not in forks:
                spans[checkpoint] = ALWAYS
            continue
        kids = forks.get(checkpoint)
        if kids is None:
            spans[checkpoint] = ALWAYS
            continue
        own = times[lineage[index - 1]]
        before = [times[k] for k in kids if times[k] < own]
        spans[checkpoint] = (max(before, default=float("-inf")), own)
    return Branch(spans)


def _top(config: RunnableConfig) -> RunnableConfig:
    """`config`'s thread (and checkpoint, if it names one) in the top-level namespace, where the branch is told."""
    configurable = dict(config.get("configurable") or {})
    kept = {k: configurable[k] for k in ("thread_id", "checkpoint_id") if configurable.get(k) is not None}
    return {"configurable": {**kept, "checkpoint_ns": ""}}


def _at(top: RunnableConfig, checkpoint: str) -> RunnableConfig:
    return {"configurable": {**top["configurable"], "checkpoint_id": checkpoint}}


def _parents(saver: BaseCheckpointSaver, top: RunnableConfig) -> dict[str, str | None]:
    """Each checkpoint of the thread's top-level namespace, with its parent's id."""
    thread = str(top["configurable"]["thread_id"])
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        rows = conn.execute(
            "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
            (thread,),
        ).fetchall()
        return {str(row[0]): (str(row[1]) if row[1] else None) for row in rows}
    listed: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return {_checkpoint_id(t.config): _parent_id(t) for t in saver.list(listed)}


def _time(checkpoint: Any) -> float:
    """When a checkpoint was written (unix seconds)."""
    return datetime.fromisoformat(str(checkpoint.checkpoint["ts"])).timestamp() if checkpoint else float("inf")


def _checkpoint_id(config: RunnableConfig) -> str:
    return str(config["configurable"]["checkpoint_id"])


def _parent_id(checkpoint: Any) -> str | None:
    parent = checkpoint.parent_config
    return _checkpoint_id(parent) if parent else None


__all__ = ["Branch", "abranch_of", "branch_of"]
