"""The messages ctxwarden makes for a view (fold summaries, gauge notes), told apart by identity.

A view shows the model messages the thread does not hold. Every later step has to tell
them from the thread's own: a summary is not folded again, nor written to the history
file, nor searched. Their marks (`lc_source`, an id) cannot be the test: a client can
send a message with any of them, and a thread's message is an original whatever it says
of itself. So the objects made here are remembered while alive, and only they count.
"""

from __future__ import annotations

import weakref

from langchain_core.messages import BaseMessage, HumanMessage

_MADE: weakref.WeakValueDictionary[int, BaseMessage] = weakref.WeakValueDictionary()


def view_message(message: HumanMessage) -> HumanMessage:
    """`message`, remembered as made for a view (`is_view_message`)."""
    _MADE[id(message)] = message
    return message


def is_view_message(message: BaseMessage, source: str | None = None) -> bool:
    """Whether `message` is one `view_message` made (of `lc_source` `source`, when given)."""
    if _MADE.get(id(message)) is not message:
        return False
    return source is None or message.additional_kwargs.get("lc_source") == source


__all__ = ["is_view_message", "view_message"]
