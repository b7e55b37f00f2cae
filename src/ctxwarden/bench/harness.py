"""One replay of one recorded session under one strategy at one window, measured call by call.

The replayed model keeps what each call received (messages and tool schemas) and how
long the model itself took; a callback times the whole model step. From these the
metrics module computes tokens, cost, visible share and overhead without trusting
any strategy's own accounting.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import PrivateAttr

from ctxwarden.bench.strategies import STRATEGIES, Asked, fixed_summarizer
from ctxwarden.fold.state import SUMMARY_SOURCE
from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay.driver import replay_into
from ctxwarden.replay.model import ReplayChatModel
from ctxwarden.replay.recording import Recording
from ctxwarden.replay.tools import replay_tools


@dataclass(frozen=True, slots=True)
class SeenCall:
    """What one model call received."""

    step: int
    """How many recorded steps had been replayed before this call."""
    messages: list[BaseMessage]
    tools: list[Any]
    model_ms: float


class CapturingReplay(ReplayChatModel):
    """A replay model that keeps what each call received."""

    _seen: list[SeenCall] = PrivateAttr(default_factory=list)

    @property
    def seen(self) -> list[SeenCall]:
        return self._seen

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if is_fold_request(messages):  # answered by the fixed summarizer, which keeps what it was asked
            return super()._generate(messages, stop, run_manager, **kwargs)
        step = self.position
        started = time.perf_counter()
        result = super()._generate(messages, stop, run_manager, **kwargs)
        took = (time.perf_counter() - started) * 1000
        self._seen.append(SeenCall(step, list(messages), list(kwargs.get("tools") or []), took))
        return result


class StepTimer(BaseCallbackHandler):
    """Times each run of the agent's `model` step (middleware and model together)."""

    def __init__(self) -> None:
        self._started: dict[UUID, float] = {}
        self.durations_ms: list[float] = []

    @property
    def ignore_chat_model(self) -> bool:
        """Skipped for chat-model events: langchain gives a handler without `on_chat_model_start` every message as
        text instead (`on_llm_start`), a cost of the timer that grows with the view and would count as overhead."""
        return True

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if kwargs.get("name") == "model":
            self._started[run_id] = time.perf_counter()

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        started = self._started.pop(run_id, None)
        if started is not None:
            self.durations_ms.append((time.perf_counter() - started) * 1000)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._started.pop(run_id, None)


@dataclass(slots=True)
class Replayed:
    """Everything one replay produced, for the metrics."""

    strategy: str
    window: int
    recording: Recording
    calls: list[SeenCall]
    step_ms: list[float]
    summarizer_calls: list[int]
    final_messages: list[BaseMessage]
    folder: Path
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    folds_at: list[int] = field(default_factory=list)
    """How many model calls had been made when each fold happened (the next call is the first after it)."""
    asked: list[Asked] = field(default_factory=list)
    """Every summarizer request, as sent (billed by the prefix it shares with the calls before it)."""


def replay(recording: Recording, strategy: str, window: int, workdir: Path | None = None) -> Replayed:
    """Replay `recording` under `strategy` at `window` tokens; errors are caught and reported in the result."""
    folder = Path(tempfile.mkdtemp(prefix=f"{strategy}-{window}-", dir=workdir))
    # stable reply ids (each replay is a new thread): an evicted result's path, which the model reads, is keyed by them
    summarizer = fixed_summarizer()
    model = CapturingReplay(
        recording=recording,
        usage="received",
        reply_ids="replay",
        profile={"max_input_tokens": window},
        summaries=summarizer,  # the agent's model summarizes, as when no summarizer is given
    )
    summarizer.tick = lambda: len(model.seen)
    tools = replay_tools(recording)
    agent = STRATEGIES[strategy].build(model, tools, folder, summarizer, window, recording.system_prompt)
    timer = StepTimer()
    config = {"configurable": {"thread_id": "bench"}, "callbacks": [timer], "recursion_limit": 10_000}
    error = None
    messages: list[BaseMessage] = []
    try:
        messages = replay_into(agent, recording, config)  # type: ignore[arg-type]
    except Exception as exc:  # one failing replay is reported, not fatal
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        saver = getattr(agent, "checkpointer", None)
        if saver is not None and hasattr(saver, "conn"):
            saver.conn.close()
    return Replayed(
        strategy,
        window,
        recording,
        model.seen,
        timer.durations_ms,
        summarizer.calls,
        messages,
        folder,
        error,
        asked=summarizer.asked,
        folds_at=applied_folds(model.seen),
    )


def applied_folds(calls: Sequence[SeenCall]) -> list[int]:
    """For each fold, the index of the first call that showed its summary (how many calls had been made before it).

    Counted from the views, not from the summarizer's calls: a summary prepared ahead is asked for calls before the
    fold applies it, and the fold's probes belong to the first view after it. A view shows a new fold when its
    summary, or the first message after the summary (where the fold cut), is not what the previous view showed.
    """
    found: list[int] = []
    previous: tuple[str, str] | None = None
    for position, call in enumerate(calls):
        folded = _fold_mark(call.messages)
        if folded is not None and folded != previous:
            found.append(position)
        previous = folded
    return found


def _fold_mark(view: Sequence[BaseMessage]) -> tuple[str, str] | None:
    for index, message in enumerate(view):
        if _summary_of_any_strategy(message):
            after = view[index + 1] if index + 1 < len(view) else None
            return str(message.content), f"{after.type}:{after.content}" if after is not None else ""
    return None


def _summary_of_any_strategy(message: BaseMessage) -> bool:
    """A summary in a view of any strategy measured (ctxwarden's, deepagents', langchain's all carry langchain's mark):
    the bench reads the views a model was sent, so the mark is the test here, not `fold.state.is_summary`."""
    return isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE


__all__ = ["CapturingReplay", "Replayed", "SeenCall", "StepTimer", "applied_folds", "replay"]
