"""A test middleware recording what each model call receives: placed after ctxwarden's, it sees the layers' work."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest


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
