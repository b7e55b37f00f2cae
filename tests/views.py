"""Test recorders: a middleware keeping what each model call receives (placed after ctxwarden's, it sees the layers'
work), and a layer keeping the budget each call hands it."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest

from ctxwarden.core.layers import CallBudget


class Views(AgentMiddleware):
    """Keeps the messages of every model call it is handed, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list[list[Any]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.views.append(list(request.messages))
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.views.append(list(request.messages))
        return await handler(request)


class Watch:
    """A test layer that changes nothing and records the budget it was handed."""

    name = "watch"

    def __init__(self) -> None:
        self.budgets: list[CallBudget] = []

    def shape(self, request: ModelRequest, budget: CallBudget) -> None:
        self.budgets.append(budget)

    async def ashape(self, request: ModelRequest, budget: CallBudget) -> None:
        return self.shape(request, budget)
