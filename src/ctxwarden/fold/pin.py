"""The task pinned ahead of every summary, whole or in part.

A fold keeps the thread's first user message (the task) ahead of its summary: it opens
every call unchanged, so the provider's cache keeps it across folds, and neither the
summary nor the summarizer's prompt carries it again. Folded instead, it came back quoted
whole in the facts (the latest user message always is) and was billed uncached with every
new summary.

A task within the facts cap (`fold_facts_share` of the window) is pinned whole. A longer
one is pinned in part (`ctxwarden.core.task`): the lines a clearing batch already cut it
to, else lines chosen from what this fold folds. Every later fold keeps them
(`FoldRecord.task_lines`): the pinned part stays byte-identical, and a fold prepared ahead
chooses the same lines as one made on the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ctxwarden.core.task import TASK_NOTE, shown_lines, shown_task, task_lines


def pinned_task(
    pinned: Sequence[BaseMessage],
    by_id: Mapping[Any, BaseMessage],
    last: Any,
    folded: Sequence[BaseMessage],
    cap: tuple[int, Callable[[str], int]],
) -> tuple[tuple[BaseMessage, ...], tuple[int, ...] | None]:
    """The task a fold pins (`pinned`: none, or the view's first message), as shown, and the lines shown of it: those
    of the `last` fold record, or chosen now within `cap` (tokens, and the counter) from what the fold folds."""
    if not pinned:
        return (), None
    task = by_id.get(pinned[0].id, pinned[0])  # the original, when the view shows it in part
    if last is not None and last.pinned == task.id and last.task_lines is not None:
        lines: tuple[int, ...] | None = last.task_lines  # chosen once: the pinned part stays the same bytes
    elif pinned[0] is not task and (cut := shown_lines(pinned[0])) is not None:
        lines = cut  # a clearing batch cut it already: the same lines, the same bytes
    else:  # whole while it fits the cap (a smaller window may not fit it any more)
        lines = task_lines(task, folded, *cap)
    return (shown_task(task, lines),), lines


__all__ = ["TASK_NOTE", "pinned_task", "shown_task", "task_lines"]
