"""Per-call overhead of each context manager's model-call hook on long histories.

Each middleware's `wrap_model_call` runs on a request whose history grows by one
message per call, with a handler that returns at once, so only the middleware's own
work is timed: ctxwarden's full stack (admit, folded view, clearing, folding checks,
stamping), deepagents' summarization and langchain's context editing. The window is
set far above the history so no strategy folds or summarizes: this is the price every
call pays just for being managed.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, cast

from deepagents.backends import StateBackend
from deepagents.middleware.summarization import create_summarization_middleware
from langchain.agents.middleware import ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ctxwarden.bench.meter import synthetic_history
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.replay.scripted import scripted_model
from ctxwarden.stack.build import context_middleware

SIZES = (100_000, 1_000_000)


def _middlewares(window: int) -> dict[str, Any]:
    model = scripted_model([], window=window)
    return {
        "ctxwarden": context_middleware(policy=ContextPolicy())[0],
        "deepagents summarization": create_summarization_middleware(model, StateBackend()),
        "langchain context editing": ContextEditingMiddleware(),
    }


def time_per_call(tokens: int, messages: int = 2_000, calls: int = 12) -> dict[str, float]:
    """Median milliseconds per call for each middleware at a `tokens`-token history."""
    window = tokens * 4
    history: list[Any] = list(synthetic_history(tokens, messages))
    model = scripted_model([], window=window)
    reply = ModelResponse(result=[AIMessage("ok")])
    results = {}
    for name, middleware in _middlewares(window).items():
        grown = list(history)
        samples = []
        for i in range(calls):
            grown.append(HumanMessage(f"message {i}", id=f"extra-{name}-{i}"))
            request = ModelRequest(
                model=model,
                messages=list(grown),
                system_message=SystemMessage("You are a coding agent."),
                tool_choice=None,
                tools=[],
                response_format=None,
                state=cast(Any, {"messages": list(grown)}),
                runtime=Runtime(context=None),
            )
            started = time.perf_counter()
            middleware.wrap_model_call(request, lambda _request: reply)
            samples.append((time.perf_counter() - started) * 1000)
        results[name] = statistics.median(samples[1:])  # the first call fills caches every strategy may keep
    return results


def run() -> dict[int, dict[str, float]]:
    return {tokens: time_per_call(tokens) for tokens in SIZES}


__all__ = ["SIZES", "run", "time_per_call"]
