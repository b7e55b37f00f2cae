"""Finding what an agent was built with, so a backend and a trace are given once, or not at all.

`create_deep_agent(model, middleware=context_middleware())` must evict into the same
backend deepagents' file tools read, and `context_report(agent, config)` must find the
trace the agent writes, without either being passed twice. Neither is handed to the
other: deepagents builds its `FilesystemMiddleware` itself, and a compiled graph keeps its
middleware only inside the functions it composed. So this module looks for them by
reference: from the model call's tools to the `FilesystemMiddleware` that made them (its
public `backend`), and from a compiled agent to ctxwarden's own middleware (its recorder's
store and its backend). The search follows only references — closures, bound methods,
partials, containers and instance attributes — never names or private strings, and a test
fails if a new deepagents or langchain hides them.

All discovery of this kind lives here, in one place.
"""

from __future__ import annotations

import functools
import types
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from deepagents.backends import FilesystemBackend
from deepagents.backends.protocol import BackendProtocol
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain.agents.middleware.types import ModelRequest

from ctxwarden.admit.memory import local_path
from ctxwarden.core.layers import CallBudget, LayerEdit
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.stack.middleware import ContextWindowMiddleware
from ctxwarden.stack.routes import refuse_isolation_under_route
from ctxwarden.trace.store import TraceStore

T = TypeVar("T")

SEARCH_LIMIT = 50_000
"""Objects visited at most per search (a deep agent needs a few thousand)."""

_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None), type, types.ModuleType, Path)


def reachable(roots: Iterable[Any], kind: type[T], *, limit: int = SEARCH_LIMIT) -> list[T]:
    """Instances of `kind` reachable from `roots` by reference, nearest first (not searched past a hit)."""
    found: list[T] = []
    seen: set[int] = set()
    queue: deque[Any] = deque(roots)
    while queue and len(seen) < limit:
        obj = queue.popleft()
        if id(obj) in seen or isinstance(obj, _LEAVES):
            continue
        seen.add(id(obj))
        if isinstance(obj, kind):
            found.append(obj)
            continue
        queue.extend(_references(obj))
    return found


def _references(obj: Any) -> list[Any]:
    if isinstance(obj, types.FunctionType):
        cells = [c.cell_contents for c in obj.__closure__ or () if c.cell_contents is not None] if _filled(obj) else []
        return [*cells, *(obj.__defaults__ or ()), *(getattr(obj, "__wrapped__", None),)]
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, list | tuple | set | frozenset | deque):
        return list(obj)
    attributes = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                attributes.append(getattr(obj, slot))
    return attributes


def _filled(function: types.FunctionType) -> bool:
    try:
        [cell.cell_contents for cell in function.__closure__ or ()]
    except ValueError:  # a cell not yet assigned
        return False
    return True


def files_backend(tools: Sequence[Any]) -> BackendProtocol | None:
    """The backend of the deepagents `FilesystemMiddleware` whose file tools are among `tools`."""
    for middleware in reachable(tools, FilesystemMiddleware, limit=5_000):
        backend = middleware.backend
        if isinstance(backend, BackendProtocol):
            return backend
    return None


def context_middlewares(agent: Any) -> list[ContextWindowMiddleware]:
    """ctxwarden's core middleware inside a compiled agent (one, or none when built without it)."""
    found = reachable([agent], ContextWindowMiddleware)
    return list({id(m): m for m in found}.values())


def trace_of(agent: Any) -> TraceStore | None:
    """The trace store a compiled agent records to, if it was built with ctxwarden and a trace."""
    for middleware in context_middlewares(agent):
        store = middleware.recorder.store
        if store is not None:
            return store
    return None


def backend_of(agent: Any) -> Any:
    """The backend ctxwarden evicts and offloads to in a compiled agent (`None` when it has none)."""
    for middleware in context_middlewares(agent):
        backend = middleware.evictor.backend
        return backend.current if isinstance(backend, AgentBackend) else backend
    return None


class AgentBackend(BackendProtocol):
    """ctxwarden's backend when none is given: the one the agent's own file tools use.

    In a deep agent that is the backend of deepagents' `FilesystemMiddleware` (its
    `StateBackend` by default, or whatever was passed to `create_deep_agent`), found from
    the tools of the first model call, so evicted results and folded history land where
    `read_file` looks. An agent without deepagents' file tools (`create_agent`) gets a
    filesystem backend under `state_dir`, each thread seeing only its own files.
    """

    def __init__(self, state_dir: str | Path) -> None:
        self.state_dir = Path(state_dir)
        self._found: BackendProtocol | None = None
        self._fallback: BackendProtocol | None = None
        self._searched: tuple[int, ...] = ()

    def adopt(self, tools: Sequence[Any]) -> None:
        """Use the backend behind these tools, when deepagents' file tools are among them.

        The same tools are searched once: later calls with the same tool objects cost a tuple compare.
        """
        key = tuple(id(tool) for tool in tools)
        if key == self._searched:
            return
        self._searched = key
        found = files_backend(tools)
        if found is not None:
            refuse_isolation_under_route(found, "the agent's file backend")
            self._found = found

    @property
    def current(self) -> BackendProtocol:
        """The backend calls go to now."""
        if self._found is not None:
            return self._found
        if self._fallback is None:
            self._fallback = ThreadIsolatedBackend(FilesystemBackend(root_dir=self.state_dir, virtual_mode=True))
        return self._fallback

    def local_path(self, path: str) -> Path | None:
        """The local file behind `path` on the current backend, if it is one (see `admit.memory.local_path`)."""
        return local_path(self.current, path)

    def __repr__(self) -> str:
        return f"AgentBackend(current={self.current!r})"


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: AgentBackend, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.current, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"`{name}` on the backend found (see `AgentBackend`)."
    return method


for _name in (
    *("ls", "read", "grep", "glob", "write", "edit", "delete", "upload_files", "download_files"),
    *("als", "aread", "agrep", "aglob", "awrite", "aedit", "adelete", "aupload_files", "adownload_files"),
):
    setattr(AgentBackend, _name, _delegate(_name))


class FindBackendLayer:
    """First on every call: point an `AgentBackend` at the backend of the agent's file tools."""

    name = "find-backend"

    def __init__(self, backend: AgentBackend) -> None:
        self.backend = backend

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        self.backend.adopt(request.tools)
        return None

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)


__all__ = [
    "AgentBackend",
    "FindBackendLayer",
    "backend_of",
    "context_middlewares",
    "files_backend",
    "reachable",
    "trace_of",
]
