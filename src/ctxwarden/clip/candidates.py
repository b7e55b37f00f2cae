"""What a clearing batch takes, most disposable first, and how far a batch reaches.

Results a later call superseded go first (the same command run again, a file read and then
written), then results whose every new detail the thread shows again later, then the oldest
results and large arguments; the newest results, and the calls that made them, stay. Each is
read from the thread's index (`clip.index`) with the tokens hiding it frees, so ordering them
costs a sort of the index, never a read of the thread's text.

One exception, last of all: a batch past the fold threshold may clip the arguments of the
newest calls when they alone keep the call past it, which no fold can take (a fold keeps the
newest turn whole); a batch forced by a provider's refusal, when they are as large as a result
evicted at arrival. A model that writes a 200 KB file sends it as one argument; kept whole,
the call after it is over a 32k window whatever a fold takes, and the provider refuses it
twice. Clipped, the call keeps its first line and the lines that write a file, and
`recall(call_id=..., part="args")` returns the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set

from langchain_core.messages import BaseMessage, ToolMessage

from ctxwarden.clip.boundary import Boundary
from ctxwarden.clip.index import ThreadIndex
from ctxwarden.clip.mask import Mask
from ctxwarden.clip.order import superseded
from ctxwarden.core.layers import CallBudget
from ctxwarden.core.task import task_excess

Candidate = tuple[str, str, float]
"""`(kind, call id, tokens freed)`: kind `"result"` or `"args"`."""

Rank = Callable[[ToolMessage, bool], int]
"""0: superseded (the flag says so); 1: every new detail it showed appears again later; 2: the rest."""


def candidates(
    index: ThreadIndex,
    messages: Sequence[BaseMessage],
    boundary: Boundary,
    masked: Mask,
    keep: int,
    rank: Rank,
    budget: CallBudget | None = None,
) -> list[Candidate]:
    """What a batch may take beyond `boundary` and `masked`, most disposable first; the newest `keep` results and the
    calls that made them stay, but for arguments of those calls from `newest_args_bar(budget)` tokens (last)."""
    newest_args_from = newest_args_bar(budget) if budget is not None else None
    kept, kept_from = index.kept_results(keep), index.kept_callers_from(keep)
    cleared, clipped = set(boundary.results) | masked.results, set(boundary.args) | masked.args
    stale = superseded(messages)
    found: list[tuple[int, int, str, str, float]] = []
    for result in index.results:
        if result.call_id not in cleared and result.call_id not in kept:
            message = index.messages[result.position]
            assert isinstance(message, ToolMessage)
            found.append(
                (rank(message, result.call_id in stale), result.position, "result", result.call_id, result.saving)
            )
    found.extend(
        (2 if arg.position < kept_from else 3, arg.position, "args", arg.call_id, arg.saving)
        for arg in index.args
        if arg.call_id not in clipped
        and (arg.position < kept_from or (newest_args_from is not None and arg.saving >= newest_args_from))
    )
    found.sort(key=lambda item: (item[0], item[1]))
    return [(kind, call_id, saving) for _rank, _pos, kind, call_id, saving in found]


def newest_args_bar(budget: CallBudget) -> int | None:
    """Raw tokens from which a batch for `budget` clips the newest calls' arguments too (see the module docstring):
    past the fold threshold, those that alone keep the call past it, which no fold can take; after a provider's
    refusal, whose window was smaller than said, those as large as a result evicted at arrival. `None`: the call is
    not urgent."""
    if budget.force:
        return budget.evict_over
    if budget.used <= budget.fold_at:
        return None
    return max(1, int(budget.fold_at / budget.measurement.factor) - budget.measurement.fixed)


def extend(found: Iterable[Candidate], boundary: Boundary, need: float) -> tuple[Boundary, float]:
    """`boundary` grown by `found`, in order, until `need` raw tokens are freed (or none are left), and what it frees.
    The result holds no gists or counts: `clip.boundary.remembered` adds those."""
    results, args = list(boundary.results), list(boundary.args)
    freed = 0.0
    for kind, call_id, saving in found:
        if freed >= need:
            break
        (results if kind == "result" else args).append(call_id)
        freed += saving
    task, lines, cut = boundary.task, boundary.task_lines, boundary.cut_messages
    return Boundary(tuple(results), tuple(args), task=task, task_lines=lines, cut_messages=cut), freed


def hidden_by(index: ThreadIndex, boundary: Boundary, masked: Mask) -> tuple[Set[str], Set[str]]:
    """Call ids whose results, and whose arguments, are out of the view: the same sets while boundary and mask hold."""
    memo = index.memo.get("hidden")
    if memo is not None and memo[0] is boundary and memo[1] is masked:
        known: tuple[Set[str], Set[str]] = memo[2]
        return known
    hidden = (frozenset(boundary.results) | masked.results, frozenset(boundary.args) | masked.args)
    index.memo["hidden"] = (boundary, masked, hidden)
    return hidden


def may_be_worth_it(index: ThreadIndex, boundary: Boundary, masked: Mask, need: float, smallest: float) -> bool:
    """Whether a batch could free `smallest` raw tokens, judged in O(1) from the index: a batch frees at most every
    candidate together, and less than what it needs plus its largest candidate."""
    if need + index.largest < smallest:
        return False
    hidden = hidden_by(index, boundary, masked)
    return index.disposable(*hidden, index.policy.keep_tool_results) >= smallest


def task_saving_of(
    index: ThreadIndex,
    boundary: Boundary,
    thread: Sequence[BaseMessage] | None,
    task_budget: int,
    smallest: float,
    *,
    unread: bool = False,
) -> int:
    """The raw tokens a batch frees by showing the thread's task within `task_budget` (`core.task.task_excess`; with
    `unread`, before the model answered it)."""
    first = index.messages[0] if index.messages else None
    if boundary.task is not None or first is None or not thread or thread[0].id != first.id:
        return 0  # cut already, or the call does not open with the thread's own first message (`recall` returns it)
    return task_excess(index.messages, task_budget, smallest, index.meter.message_tokens, unread=unread)


__all__ = ["Candidate", "Rank", "candidates", "extend", "hidden_by", "may_be_worth_it", "task_saving_of"]
