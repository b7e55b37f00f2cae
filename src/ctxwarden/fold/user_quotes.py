"""User messages as a fold's facts quote them: a long one in part, with the way back to it whole.

The facts quote the latest user message folded whole (`ctxwarden.fold.facts`). A log pasted
into a thread under way made every fold after it plan a view as large as the paste, held as
freeing nothing, so the thread never folded again; one of a third of the window made each
summary that large. So a user message longer than the facts cap is quoted as the view shows
it when a batch cut it (`core.task`, `core.pasted`), else in part within the cap: its first
and last lines and the lines holding what the agent wrote, under the note naming
`recall(call_id=<its id>, part="message")`. The thread keeps it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.pasted import MESSAGE_NOTE, shown_message
from ctxwarden.core.task import shown_lines, task_lines
from ctxwarden.fold.state import is_summary


def quoted_users(
    folded: Sequence[BaseMessage], view: Sequence[BaseMessage], tokens: int, meter: TokenMeter
) -> list[BaseMessage]:
    """The `folded` messages with each user message as a fold's facts quote it: as `view` shows it when cut there,
    else in part when longer than `tokens`, its lines chosen from what the agent wrote in `folded`."""
    shown = {m.id: m for m in view if isinstance(m, HumanMessage) and shown_lines(m) is not None}
    out: list[BaseMessage] = []
    for message in folded:
        if not isinstance(message, HumanMessage) or is_summary(message) or not message.id:
            out.append(message)
        elif message.id in shown:
            out.append(shown[message.id])
        elif meter.message_tokens(message) <= tokens:
            out.append(message)
        else:
            lines = task_lines(message, folded, tokens, meter.counter, MESSAGE_NOTE)
            out.append(message if lines is None else shown_message(message, lines))
    return out


__all__ = ["quoted_users"]
