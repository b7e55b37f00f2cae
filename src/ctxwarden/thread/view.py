"""What the model is shown, rebuilt from a checkpointed thread: earlier folds, then clearing.

The layers compute the view on every call and keep only what they need to repeat it
(the folds and the clearing boundary, in private state); these functions replay that,
for the /context report, the demo's recoverability check and the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxwarden.clip.clear import CLIP_STATE_KEY, ClipState
from ctxwarden.clip.shown import current_view
from ctxwarden.core.gauge_note import NoteState
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.stated_window import StatedWindowState
from ctxwarden.curate.lineage import ForkState
from ctxwarden.fold.state import Folds, FoldState, folded_view
from ctxwarden.thread.history import HistoryState


class ContextState(ClipState, FoldState, ForkState, NoteState, HistoryState, StatedWindowState):
    """The agent state plus ctxwarden's private keys (the clearing boundary, the folds, a fork's parent, the
    gauge notes in view, when the thread's history began, the windows providers stated refusing its calls)."""


def model_view(
    messages: Sequence[BaseMessage],
    values: Mapping[str, Any] | None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
) -> list[BaseMessage]:
    """`messages` as the next call would show them (before any new batch or fold it may add)."""
    values = values or {}
    folded = folded_view(messages, Folds.from_state(values))
    return current_view(folded, values.get(CLIP_STATE_KEY), policy, meter, thread=messages)


def last_call_view(
    messages: Sequence[BaseMessage],
    values: Mapping[str, Any] | None,
    policy: ContextPolicy = DEFAULT_POLICY,
    meter: TokenMeter | None = None,
) -> list[BaseMessage]:
    """What the thread's last model call was shown: the messages before its reply, folded and cleared."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=len(messages))
    return model_view(messages[:last], values, policy, meter)


__all__ = ["ContextState", "last_call_view", "model_view"]
