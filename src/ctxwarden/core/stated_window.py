"""The window a provider states when it refuses a call as too long, kept for the thread's later calls.

The window is resolved from the model the request names, but the model actually called
can be another: a middleware of the user's that runs inside ctxwarden (in a deep agent
every user middleware does) may pick a smaller model per call, or a fallback may answer
for the primary. Such a call is shaped for the wrong window, and the provider refuses it.
Most providers say the limit in the refusal ("prompt is too long: 18588 tokens > 16000
maximum"). Without reading it, every later call of the thread was shaped for the wrong
window again, refused again, and saved by a forced round each time, which clears and
folds as far as it can. With it (`core.refusal.stated_limit`), the call is shaped again
for the stated window, and so is every later call of the thread to that model: the
thresholds follow the window of the model that answers, and the refusals stop.

The limit is kept per model name in private state, so a resumed thread keeps it and
another thread starts without it. It only ever lowers a window: a stated limit at or above
the window the call was shaped for says nothing new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr

from ctxwarden.core.refusal import stated_limit
from ctxwarden.core.window import Window

STATED_KEY = "ctxwarden_windows"
"""Private state key: `{model name: tokens}`, the windows providers stated when they refused a call of this thread."""


class StatedWindowState(AgentState):
    """The windows providers stated when refusing a call of this thread (see the module docstring)."""

    ctxwarden_windows: Annotated[NotRequired[dict[str, int]], PrivateStateAttr]


def with_stated(window: Window, state: Mapping[str, Any] | None) -> Window:
    """`window`, or the smaller one a provider stated for this model when it refused a call of the thread."""
    stated = _stated(state).get(window.model)
    if stated is None or stated >= window.tokens:
        return window
    return dataclasses.replace(window, tokens=stated, source="refusal")


def learned(window: Window, error: BaseException, state: Mapping[str, Any] | None) -> tuple[Window, dict[str, Any]]:
    """The window a refusal states, and the state update that keeps it, when it is smaller than `window`; else
    `window` and no update."""
    limit = stated_limit(error)
    if limit is None or limit >= window.tokens:
        return window, {}
    windows = {**_stated(state), window.model: limit}
    return dataclasses.replace(window, tokens=limit, source="refusal"), {STATED_KEY: windows}


def _stated(state: Mapping[str, Any] | None) -> dict[str, int]:
    """The stated windows in `state`, each a positive int (a value of another shape is no window)."""
    record = (state or {}).get(STATED_KEY)
    if not isinstance(record, Mapping):
        return {}
    return {
        str(name): tokens
        for name, tokens in record.items()
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
    }


__all__ = ["STATED_KEY", "StatedWindowState", "learned", "with_stated"]
