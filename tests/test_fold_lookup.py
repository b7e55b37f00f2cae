"""What a fold reads of the thread is bounded by its view, not by how long the thread has grown.

After a fold the view is a summary and the newest turns, while the thread keeps every
message. A prepared fold is checked against the thread's originals of the messages it
covers on every call past the pre-fold point, and on the call that folds: those are the
thread's latest messages, found by reading it back from its end only as far as the view.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.core.identity import fingerprint
from ctxwarden.fold.draft import Drafts
from ctxwarden.fold.engine import FoldInput
from ctxwarden.fold.preparation import Preparation, prepared_cut
from ctxwarden.fold.state import FoldRecord, Folds, originals, summary_message

WINDOW = 16_000


class ReadBack(list[BaseMessage]):
    """A thread that counts the messages read from it one by one."""

    read = 0

    def __iter__(self) -> Iterator[BaseMessage]:
        for message in super().__iter__():
            self.read += 1
            yield message

    def __reversed__(self) -> Iterator[BaseMessage]:
        for message in super().__reversed__():
            self.read += 1
            yield message


def _steps(start: int, end: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(start, end):
        call = {"name": "fetch", "args": {"page": i}, "id": f"f{i}"}
        out += [
            AIMessage("", tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"page {i}", tool_call_id=f"f{i}", id=f"t{i}"),
        ]
    return out


def test_the_originals_of_a_view_are_found_from_the_threads_end() -> None:
    thread = ReadBack([HumanMessage("Go.", id="u0"), *_steps(0, 5_000)])
    shown = [thread[-40], ToolMessage("[cleared]", tool_call_id="f4980", id=thread[-39].id), *thread[-38:]]
    found = originals(thread, shown)
    assert found == list(thread[-40:])  # the cleared placeholder's original, the rest as they are
    assert thread.read <= 40
    assert originals(thread, [HumanMessage("not in the thread", id="elsewhere")])[0].id == "elsewhere"
    twice = [HumanMessage("first", id="dup"), HumanMessage("second", id="dup")]
    assert originals(twice, [twice[0]])[0].content == "second"  # the last of a repeated id, as a dict of the thread


def test_checking_a_prepared_fold_reads_the_thread_only_as_far_back_as_its_view() -> None:
    history = [HumanMessage("Go.", id="u0"), *_steps(0, 5_000)]
    record = FoldRecord(1, "t4979", "## Session intent\nGo.", None, 0, 0, "fixed", False)
    view = [history[0], summary_message(record), *history[-40:]]
    thread = ReadBack(history)
    folds = Folds([record], None, None)
    given = FoldInput(view, thread, folds, WINDOW, 0, 1.0, WINDOW, "t", "")
    folded = view[2:12]
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    preparation = Preparation(
        2, (1, "t4979"), tuple((m.id, fingerprint(m)) for m in folded), None, future, 0.0, Drafts(len(folded))
    )
    assert prepared_cut(preparation, given, 2) == 12
    assert thread.read <= len(view)
    edited = ReadBack([*history[:-35], ToolMessage("EDITED", tool_call_id="f4982", id="t4982"), *history[-34:]])
    stale = FoldInput(view, edited, folds, WINDOW, 0, 1.0, WINDOW, "t", "")
    assert prepared_cut(preparation, stale, 2) is None  # the thread's original changed: never applied
