"""What clearing shows of a thread outside a model call: its last call's view, or the view a call would get now.

Reports, `/compact` and the thread readers show what the model saw; they build a clearing layer on the stored boundary
and apply it, so the placeholders, gists and texts left out are the bytes the calls were sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.clip.boundary import CLIP_STATE_KEY, Boundary
from ctxwarden.clip.clear import ClearLayer
from ctxwarden.clip.mask import mask_of, masked_turns
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy


def last_view(
    messages: Sequence[BaseMessage], clip_state: Any, policy: ContextPolicy, meter: TokenMeter | None = None
) -> list[BaseMessage]:
    """What the model was shown on the thread's last call: the messages before it, with the boundary applied."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=len(messages))
    return current_view(messages[:last], clip_state, policy, meter)


def current_view(
    messages: Sequence[BaseMessage],
    clip_state: Any,
    policy: ContextPolicy,
    meter: TokenMeter | None = None,
    thread: Sequence[BaseMessage] | None = None,
) -> list[BaseMessage]:
    """`messages` as clearing shows them now (before a batch the next call may add).

    Pass the whole `thread` when `messages` is a folded view of it, so gists come out as the calls saw them.
    """
    layer = ClearLayer(policy, meter or TokenMeter())
    state = {CLIP_STATE_KEY: clip_state} if clip_state else {}
    boundary, index = Boundary.from_state(state), layer._index(messages)
    masked = mask_of(index, masked_turns(index, boundary.masked_turns, boundary.masked_upto))
    return layer.view(messages, boundary, masked, thread or messages)


__all__ = ["current_view", "last_view"]
