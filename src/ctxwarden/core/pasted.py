"""A later user message larger than the window, shown in part by the forced round.

A user pastes a whole log into a thread under way, far past what the model takes. No fold
helps (a fold keeps the newest turn), so the provider refused the call, the forced retry
sent the paste whole again, and the run ended. Now the forced round shows such a message as
the task is shown (`core.task`): its first and last lines and the lines most worth it, within
the facts cap, under a note that says how many lines are shown and that
`recall(call_id=<its id>, part="message")` returns it whole. The thread keeps it exact.

Only a message that alone takes half the window or more is cut (below that, the forced fold
makes room), only by the forced round, and only its text: a message with an image or a file
stays whole. Any other user message is an instruction, read whole. The lines are chosen once
and kept in the clearing boundary, so every later call shows the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.task import shown_task, task_lines
from ctxwarden.core.text import text_of

MESSAGE_NOTE = (
    "[ctxwarden: this message is shown in part: {shown} of its {total} lines (…: lines left out); "
    'recall(call_id={id}, part="message") returns it whole.]'
)


def message_cuts(
    messages: Sequence[BaseMessage],
    window: int,
    budget: int,
    meter: TokenMeter,
    done: Mapping[str, tuple[int, ...]],
) -> dict[str, tuple[int, ...]]:
    """By id, the lines a forced batch shows, within `budget` tokens, of each user message after the first that alone
    takes half the `window` and is not cut already (`done`); chosen from what the agent wrote in `messages`."""
    cuts: dict[str, tuple[int, ...]] = {}
    for message in messages[1:]:  # the first is the task (`core.task`)
        if not isinstance(message, HumanMessage) or not isinstance(message.id, str) or not message.id:
            continue
        if message.id in done:
            continue
        if 2 * meter.message_tokens(message) < window:
            continue
        lines = task_lines(message, messages, budget, meter.counter, MESSAGE_NOTE)
        if lines is not None:  # None: it holds an image or a file
            cuts[message.id] = lines
    return cuts


def shown_message(message: BaseMessage, lines: Sequence[int]) -> BaseMessage:
    """`message` as the view shows it once a forced batch cut it: the same object for the same lines."""
    return shown_task(message, lines, MESSAGE_NOTE)


def message_text_by_id(messages: Sequence[BaseMessage], message_id: str) -> str | None:
    """The whole text of the user message of `messages` (identified: `core.identity`) with id `message_id`."""
    found = (m for m in messages if isinstance(m, HumanMessage) and m.id == message_id)
    return next((text_of(m) for m in found), None)


__all__ = ["MESSAGE_NOTE", "message_cuts", "message_text_by_id", "shown_message"]
