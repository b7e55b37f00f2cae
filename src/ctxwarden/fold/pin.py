"""The task pinned ahead of every summary, whole or in part.

A fold keeps the thread's first user message (the task) ahead of its summary: it opens
every call unchanged, so the provider's cache keeps it across folds, and neither the
summary nor the summarizer's prompt carries it again. Folded instead, it came back quoted
whole in the facts (the latest user message always is) and was billed uncached with every
new summary.

A task within the facts cap (`fold_facts_share` of the window) is pinned whole. A longer
one — SWE-agent puts a whole demonstration in it, a third of a 16k window — is pinned in
part, within that cap: its first and last lines, and the lines that hold the names, paths
and numbers the folded turns wrote (what the session went on to use of it), the others
marked by a gap line. A note above says how many lines are shown and how to get the rest:
`recall(part="task")` returns the original, which stays in the thread untouched. The lines
are chosen once, by the first fold that pins the task, from what that fold folds, and
every later fold keeps them (`FoldRecord.task_lines`): the pinned part stays byte-identical,
and a fold prepared ahead chooses the same lines as one made on the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxwarden.core.caches import ObjectCache
from ctxwarden.core.gist import render
from ctxwarden.core.text import TOKEN, message_text, text_of

TASK_NOTE = (
    '[ctxwarden: the task is shown in part: {shown} of its {total} lines (…: lines left out); recall(part="task") '
    "returns it whole.]"
)

EDGE_LINES = 3
"""The task's first and last lines are worth more: the framing, and what it asks last."""

_SHOWN: ObjectCache[tuple[tuple[int, ...], HumanMessage]] = ObjectCache(64)


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
    else:  # whole while it fits the cap (a smaller window may not fit it any more)
        lines = task_lines(task, folded, *cap)
    return (shown_task(task, lines),), lines


def task_lines(
    task: BaseMessage, folded: Sequence[BaseMessage], budget: int, counter: Callable[[str], int]
) -> tuple[int, ...] | None:
    """The lines of `task` to pin within `budget` tokens (note included), or `None` when it is pinned whole: it fits, or
    its content is blocks rather than text.

    Greedy on value per token: a line is worth the distinctive tokens of it that the agent wrote in `folded` (twice
    each), its other distinctive tokens (a quarter each), and one more among the first and last `EDGE_LINES`."""
    if not isinstance(task.content, str):  # blocks (an image, a file): shown whole, never cut to their text
        return None
    whole, lines = _read(task, task.content, counter)
    if whole <= budget:
        return None
    used = {token for m in folded if isinstance(m, AIMessage) for token in TOKEN.findall(message_text(m))}
    left = budget - counter(TASK_NOTE.format(shown=lines.total, total=lines.total))
    ranked = []
    for index, tokens, cost in lines.lines:
        edge = index < EDGE_LINES or index >= lines.total - EDGE_LINES
        value = 2 * len(tokens & used) + 0.25 * len(tokens - used) + (1.0 if edge else 0.0)
        if value > 0:
            ranked.append((-value / cost, index, cost))
    chosen = []
    for _rank, index, cost in sorted(ranked):
        if cost <= left:
            chosen.append(index)
            left -= cost
    return tuple(sorted(chosen))


@dataclass(frozen=True, slots=True)
class _Lines:
    """A task's non-blank lines as `task_lines` weighs them: index, distinctive tokens, tokens with its line break."""

    total: int
    lines: tuple[tuple[int, frozenset[str], int], ...]


_READ: ObjectCache[tuple[Callable[[str], int], int, _Lines]] = ObjectCache(64)
"""By task: its count and lines, read once (the fold plans of the calls before the first fold all weigh them)."""


def _read(task: BaseMessage, text: str, counter: Callable[[str], int]) -> tuple[int, _Lines]:
    hit = _READ.get(task)
    if hit is not None and hit[0] is counter:
        return hit[1], hit[2]
    split = text.splitlines()
    lines = tuple(
        (index, frozenset(TOKEN.findall(line)), counter(line) + 1) for index, line in enumerate(split) if line.strip()
    )
    read = (counter, counter(text), _Lines(len(split), lines))
    _READ.put(task, read)
    return read[1], read[2]


def shown_task(task: BaseMessage, lines: Sequence[int] | None) -> BaseMessage:
    """`task` as the view pins it: itself, or (the same object for the same lines) a copy showing `lines`, with the
    original's id, name and metadata."""
    if lines is None or not isinstance(task, HumanMessage):
        return task
    key = tuple(lines)
    hit = _SHOWN.get(task)
    if hit is not None and hit[0] == key:
        return hit[1]
    all_lines = text_of(task).splitlines()
    kept = [index for index in key if 0 <= index < len(all_lines)]
    note = TASK_NOTE.format(shown=len(kept), total=len(all_lines))
    # a copy with its id, name and metadata: the same speaker, only the text is cut
    shown = task.model_copy(update={"content": f"{note}\n{render(all_lines, kept)}"})
    _SHOWN.put(task, (key, shown))
    return shown


__all__ = ["EDGE_LINES", "TASK_NOTE", "pinned_task", "shown_task", "task_lines"]
