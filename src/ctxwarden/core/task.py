"""The task shown in part: the thread's first user message, within a share of the window.

SWE-agent and other scaffolds put a whole demonstration in the first user message, a third
of a 16k window; kept whole, it is read again on every call long after the agent has used
what it needed of it. Once a clearing batch runs, or a fold pins the task above its summary,
the task is shown within the facts cap (`fold_facts_share` of the window): its first and
last lines and the lines holding the names, paths and numbers the agent wrote, the others
marked by a gap line, under a note that says how many lines are shown and that
`recall(part="task")` returns it whole. The original stays in the thread untouched.

The lines are chosen once, by the first batch or fold that cuts the task, and kept by every
later one (in the clearing boundary and the fold record): the task opens every call with
the same bytes, so the provider's cache keeps it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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

SHOWN_CAP = 4_096
"""Tasks, and copies, the two caches below remember (weakly). A copy whose entry was dropped would be taken for an
original and cut again, so the cap is far above the threads one process serves at once."""

_SHOWN: ObjectCache[tuple[tuple[int, ...], HumanMessage]] = ObjectCache(SHOWN_CAP)
"""By original task: the lines shown of it and the copy showing them (one object for the same lines)."""
_ORIGINALS: ObjectCache[BaseMessage] = ObjectCache(SHOWN_CAP)
"""By copy `shown_task` made: the original it shows in part."""


def task_lines(
    task: BaseMessage,
    folded: Sequence[BaseMessage],
    budget: int,
    counter: Callable[[str], int],
    note: str = TASK_NOTE,
) -> tuple[int, ...] | None:
    """The lines of `task` to pin within `budget` tokens (note included), or `None` when it is pinned whole: it fits, or
    it holds an image or a file besides its text. `note` is the note shown above the lines (`shown_task`).

    Greedy on value per token: a line is worth the distinctive tokens of it that the agent wrote in `folded` (twice
    each), its other distinctive tokens (a quarter each), and one more among the first and last `EDGE_LINES`."""
    text = _text(task)
    if text is None:  # an image or a file among its blocks: shown whole, never cut to its text
        return None
    whole, lines = _read(task, text, counter)
    if whole <= budget:
        return None
    used = {token for m in folded if isinstance(m, AIMessage) for token in TOKEN.findall(message_text(m))}
    left = budget - counter(_note(note, task, lines.total, lines.total))
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


def shown_task(task: BaseMessage, lines: Sequence[int] | None, note: str = TASK_NOTE) -> BaseMessage:
    """`task` as the view shows it: itself, or (the same object for the same lines) a copy showing `lines` under
    `note`, with the original's id, name and metadata. A copy made here stands for its original: showing it again
    starts from that."""
    task = _ORIGINALS.get(task) or task
    if lines is None or not isinstance(task, HumanMessage):
        return task
    key = tuple(lines)
    hit = _SHOWN.get(task)
    if hit is not None and hit[0] == key:
        return hit[1]
    all_lines = text_of(task).splitlines()
    kept = [index for index in key if 0 <= index < len(all_lines)]
    # a copy with its id, name and metadata: the same speaker, only the text is cut
    heading = _note(note, task, len(kept), len(all_lines))
    shown = task.model_copy(update={"content": f"{heading}\n{render(all_lines, kept)}"})
    _SHOWN.put(task, (key, shown))
    _ORIGINALS.put(shown, task)
    return shown


def _note(note: str, message: BaseMessage, shown: int, total: int) -> str:
    """`note` filled in: the lines shown, of how many, and the message's id as a JSON string (a note may name it)."""
    return note.format(shown=shown, total=total, id=json.dumps(message.id, ensure_ascii=False))


def shown_lines(message: BaseMessage) -> tuple[int, ...] | None:
    """The lines `message` shows of its task when it is a copy `shown_task` made; `None` for any other message."""
    task = _ORIGINALS.get(message)
    hit = _SHOWN.get(task) if task is not None else None
    return hit[0] if hit is not None and hit[1] is message else None


def task_excess(
    messages: Sequence[BaseMessage],
    budget: int,
    smallest: float,
    count: Callable[[BaseMessage], int],
    *,
    unread: bool = False,
) -> int:
    """Tokens a clearing batch frees by showing the task that opens `messages` within `budget`: 0 when it is shown in
    part already, the model has not answered it yet (unless `unread`), or that frees less than `smallest` (a batch's
    worth: showing the part uncached must pay). Weighed from its count (`count`) alone: no line is chosen."""
    first = messages[0] if messages else None
    if not isinstance(first, HumanMessage) or _text(first) is None or shown_lines(first) is not None:
        return 0
    if not (unread or _answered(messages)):
        return 0
    saved = count(first) - budget
    return saved if saved >= smallest else 0


def task_cut(
    messages: Sequence[BaseMessage], budget: int, counter: Callable[[str], int], *, unread: bool = False
) -> tuple[str, tuple[int, ...]] | None:
    """The cut a clearing batch makes of the thread's task: its id and the lines shown within `budget` tokens, chosen
    from what the agent wrote so far; `None` when the first message is no task with an id, the model has not yet
    answered it (it reads a task whole at least once) unless `unread` (a task larger than the window cannot be read
    whole, and the forced round shows it in part rather than end the run), or it fits `budget`."""
    task = messages[0] if messages else None
    if not isinstance(task, HumanMessage) or not isinstance(task.id, str) or not task.id:
        return None
    if not (unread or _answered(messages)):
        return None
    lines = task_lines(task, messages, budget, counter)
    return None if lines is None else (task.id, lines)


def _text(task: BaseMessage) -> str | None:
    """The task's text when that is all it holds: a string, or text blocks only (as chat front ends send a message);
    `None` when it holds an image or a file."""
    if isinstance(task.content, str):
        return task.content
    if all(isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text") for b in task.content):
        return text_of(task)
    return None


def _answered(messages: Sequence[BaseMessage]) -> bool:
    """Whether the model answered the task that opens `messages` (a reply follows it)."""
    return any(isinstance(m, AIMessage) for m in itertools.islice(messages, 1, None))


__all__ = ["EDGE_LINES", "SHOWN_CAP", "TASK_NOTE", "shown_lines", "shown_task", "task_cut", "task_excess", "task_lines"]
