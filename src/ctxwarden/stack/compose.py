"""What `context_middleware()` returns: one middleware that composes in a plain list with the caller's own.

A user adds their own middleware the way deepagents and langchain document it:
`create_deep_agent(model, tools, middleware=[context_middleware(), Mine()])`. Both
builders read each entry of that list as one middleware (deepagents places it by its
`name`), so ctxwarden must be one middleware, not a list of them. `ContextStack` is the
core middleware (`ContextWindowMiddleware`, named after deepagents' summarization slot, so
a deep agent puts it in that slot, ahead of user middleware, wherever it stands in the
list) that also reads as a one-item sequence of itself, so the older spellings
`middleware=context_middleware()` and `[*context_middleware(), Mine()]` keep working.

What used to be a second middleware — deepagents' skills loader, when `skills=` is given —
is chained inside: `SkilledContextStack` runs the loader's hooks itself (loading the skills
into state before the run, pinning named skills before a model call, disclosing a read
skill's tools inside the call, after the layers have shaped it), so the skills ride in the
same slot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypedDict, get_type_hints, overload

from deepagents.middleware.skills import SkillsMiddleware, SkillsState
from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from ctxwarden.stack.middleware import ContextWindowMiddleware


class ContextStack(ContextWindowMiddleware, Sequence[AgentMiddleware]):
    """The ctxwarden middleware, usable as one entry of a middleware list or as the whole list (see module doc)."""

    @overload
    def __getitem__(self, index: int) -> AgentMiddleware: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[AgentMiddleware]: ...

    def __getitem__(self, index: int | slice) -> AgentMiddleware | Sequence[AgentMiddleware]:
        return [self][index]  # a list of one: [0] is the middleware itself

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[AgentMiddleware]:
        yield self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, layers={[layer.name for layer in self.layers]})"


class SkilledContextStack(ContextStack):
    """`ContextStack` that also runs deepagents' skills loader (its prompt section off: the admit layer renders)."""

    def __init__(self, *, skills: SkillsMiddleware, **options: Any) -> None:
        super().__init__(**options)
        self.skills = skills
        self.state_schema = with_skills_state(self.state_schema)  # type: ignore[assignment]

    def before_agent(self, state: Any, runtime: Runtime[Any], config: RunnableConfig) -> Any:  # type: ignore[override]
        return self.skills.before_agent(state, runtime, config)

    async def abefore_agent(self, state: Any, runtime: Runtime[Any], config: RunnableConfig) -> Any:  # type: ignore[override]
        return await self.skills.abefore_agent(state, runtime, config)

    def before_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return self.skills.before_model(state, runtime)

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> Any:
        return await self.skills.abefore_model(state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        def inner(shaped: ModelRequest[Any]) -> Any:
            return self.skills.wrap_model_call(shaped, handler)

        return super().wrap_model_call(request, inner)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        async def inner(shaped: ModelRequest[Any]) -> Any:
            return await self.skills.awrap_model_call(shaped, handler)

        return await super().awrap_model_call(request, inner)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return super().wrap_tool_call(request, lambda inner: self.skills.wrap_tool_call(inner, handler))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        async def inner(called: ToolCallRequest) -> ToolMessage | Command[Any]:
            return await self.skills.awrap_tool_call(called, handler)

        return await super().awrap_tool_call(request, inner)


def with_skills_state(schema: type) -> type:
    """`schema` plus the keys deepagents' skills loader keeps (a key both declare keeps `schema`'s type)."""
    hints = get_type_hints(SkillsState, include_extras=True) | get_type_hints(schema, include_extras=True)
    joined: type = TypedDict(f"{schema.__name__}WithSkills", hints)  # type: ignore[misc]
    return joined


__all__ = ["ContextStack", "SkilledContextStack", "with_skills_state"]
