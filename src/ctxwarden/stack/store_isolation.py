"""Offloaded files in LangGraph's store, one namespace per thread, so any worker can read them back.

With several workers on one database, a thread may resume on a worker that did not evict
its results; a folder on one machine cannot serve `recall` there. LangGraph's store can (a
`PostgresStore` shared by the workers, or the store a LangGraph server provides), and
deepagents' `StoreBackend` puts files in it. `ThreadIsolatedStoreBackend` routes each path
to a `StoreBackend` over its own namespace:

- `/large_tool_results/<thread>/...` and `/conversation_history/<thread>...` go to the
  namespace `(<prefix>, "threads", <thread>)` of the thread that owns them;
- every other path (the agent's workspace) goes to `(<prefix>, "workspace")`, shared as a
  filesystem root is.

It isolates threads the way `ThreadIsolatedBackend` does on a filesystem: while a
LangGraph step runs, a thread reads and writes only its own offloaded files, and its
listings and searches leave other threads out. A fork reads its parent's (and their
parents') offloaded files, read-only, once `record_fork(parent, child)` has put the
relation in the store, where every worker sees it. Outside a step (a script, the CLI,
`compact()`) there is no running thread and every path is reachable: that is the
operator, not an agent.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from deepagents.backends import StoreBackend
from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from langgraph.config import get_store
from langgraph.store.base import BaseStore

from ctxwarden.core.layout import NO_THREAD, folder_name, is_component, safe_component
from ctxwarden.core.runtime import running_thread
from ctxwarden.errors import CtxwardenError
from ctxwarden.stack.isolation import original_refusal, owner_of

DEFAULT_PREFIX = ("ctxwarden",)
"""The first components of every namespace this backend uses."""

MAX_FORK_DEPTH = 64
"""How far up a chain of forks a thread may read (a guard against a cycle written by hand)."""

_COMPONENT = re.compile(r"^[A-Za-z0-9\-_.@+:~]+$")
_Listing = TypeVar("_Listing", LsResult, GlobResult, GrepResult)


SHARED_BY_NAME = (
    "runs without a thread id share this folder, so a run reads its files by the names its messages give and never "
    "lists or searches it; give the run a thread id (a checkpointer) to list its own files"
)


def _current_thread() -> str | None:
    return running_thread()


def _checked(namespace: Sequence[str], what: str) -> tuple[str, ...]:
    bad = [c for c in namespace if not isinstance(c, str) or not _COMPONENT.match(c)]
    if not namespace or bad:
        raise CtxwardenError(
            f"{what} {tuple(namespace)!r} is not a valid store namespace. "
            "Fix: use non-empty components of letters, digits and - _ . @ + : ~ (e.g. ('ctxwarden',))."
        )
    return tuple(namespace)


class ThreadIsolatedStoreBackend(BackendProtocol):
    """Offloaded files in a LangGraph store, isolated per thread; see the module docstring.

    `store` is the `BaseStore` to use (e.g. a `PostgresStore`); `None` uses the store of
    the running graph (`get_store()`), as under a LangGraph server, which works only
    inside a run. `prefix` starts every namespace; `workspace` is the namespace of paths
    that belong to no thread (default `(*prefix, "workspace")`).
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        prefix: Sequence[str] = DEFAULT_PREFIX,
        workspace: Sequence[str] | None = None,
        current_thread: Callable[[], str | None] = _current_thread,
    ) -> None:
        self.store = store
        self.prefix = _checked(prefix, "prefix")
        self.workspace = _checked(workspace, "workspace") if workspace is not None else (*self.prefix, "workspace")
        self.current_thread = current_thread

    # --- namespaces ---------------------------------------------------------------
    def _store(self) -> BaseStore:
        if self.store is not None:
            return self.store
        try:
            return get_store()
        except RuntimeError:
            raise CtxwardenError(
                "this ThreadIsolatedStoreBackend was given no store, and outside a LangGraph run there is none to use. "
                "Fix: pass the store, ThreadIsolatedStoreBackend(store), to read or record forks from a script."
            ) from None

    def thread_namespace(self, thread: str) -> tuple[str, ...]:
        """The namespace holding `thread`'s offloaded files (`thread` as named in paths, or any thread id)."""
        return (*self.prefix, "threads", safe_component(thread))

    @property
    def forks_namespace(self) -> tuple[str, ...]:
        """Where `record_fork` keeps which thread each fork came from."""
        return (*self.prefix, "forks")

    def _files(self, namespace: tuple[str, ...]) -> StoreBackend:
        return StoreBackend(store=self.store, namespace=lambda _runtime: namespace)

    # --- forks ----------------------------------------------------------------------
    def record_fork(self, parent: str, child: str) -> None:
        """Record that thread `child` was forked from `parent`: `child` may then read `parent`'s offloaded files.

        Call it when the fork is made, before the child runs (any worker sees it from then on).
        A thread has one parent; a relation that would make a cycle is refused.
        """
        parent_name, child_name = folder_name(parent), folder_name(child)
        if child_name == parent_name or child_name in self._ancestors_named(parent_name):
            raise CtxwardenError(
                f"cannot record thread {child!r} as a fork of {parent!r}: {child!r} is {parent!r} or one of its "
                "ancestors. Fix: fork into a new thread id."
            )
        known = self.parent_of(child)
        if known is not None and known != parent_name:
            raise CtxwardenError(
                f"thread {child!r} is already recorded as a fork of {known!r}, not {parent!r}. "
                "Fix: fork into a new thread id."
            )
        self._store().put(self.forks_namespace, child_name, {"parent": parent_name, "recorded_at": time.time()})

    async def arecord_fork(self, parent: str, child: str) -> None:
        """`record_fork` off the event loop."""
        await asyncio.to_thread(self.record_fork, parent, child)

    def forget_forks(self, thread: str) -> None:
        """Drop every recorded fork relation naming `thread`, as fork or as parent (its thread is being deleted).

        Its forks keep their own files; a new thread given the same id is no one's parent."""
        name = folder_name(thread)
        store = self._store()
        while found := store.search(self.forks_namespace, filter={"parent": name}, limit=1_000):
            for item in found:  # each pass deletes what it found, so the next finds the rest
                store.delete(self.forks_namespace, item.key)
        store.delete(self.forks_namespace, name)

    async def aforget_forks(self, thread: str) -> None:
        """`forget_forks` off the event loop."""
        await asyncio.to_thread(self.forget_forks, thread)

    def parent_of(self, thread: str) -> str | None:
        """The thread `thread` was forked from (as named in paths), or `None`."""
        return self._parent_named(folder_name(thread))

    def ancestors(self, thread: str) -> list[str]:
        """The threads `thread` was forked from (as named in paths), nearest first."""
        return self._ancestors_named(folder_name(thread))

    def _parent_named(self, name: str) -> str | None:
        """The parent of the thread named `name` in paths. Read from the store each time, never remembered: a
        deleted parent's relation is gone for every worker at once (`forget_forks`)."""
        item = self._store().get(self.forks_namespace, name)
        parent = item.value.get("parent") if item is not None else None
        return parent if isinstance(parent, str) else None

    def _ancestors_named(self, name: str) -> list[str]:
        found: list[str] = []
        current = self._parent_named(name)
        while current is not None and current not in found and len(found) < MAX_FORK_DEPTH:
            found.append(current)
            current = self._parent_named(current)
        return found

    # --- routing --------------------------------------------------------------------
    def _own(self) -> str | None:
        thread = self.current_thread()
        return None if thread is None else folder_name(thread)

    def _route(self, path: str, own: str | None, *, write: bool) -> tuple[tuple[str, ...] | None, str | None]:
        """`(namespace, None)` for the namespace `path` lives in, or `(None, why)` when the running thread may not."""
        namespace, why = self._thread_route(path, own, write=write)
        if namespace is not None and write and (refused := original_refusal(path)) is not None:
            return None, refused  # the agent's own tool, changing one of ctxwarden's originals
        return namespace, why

    def _thread_route(self, path: str, own: str | None, *, write: bool) -> tuple[tuple[str, ...] | None, str | None]:
        owner = owner_of(path)
        if owner is None:
            return self.workspace, None
        if not _COMPONENT.match(owner) or not is_component(owner):
            return None, f"{path}: no thread is named {owner!r} (names in offload paths are sanitized thread ids)"
        if own is None or owner == own:
            return self.thread_namespace(owner), None
        if owner in self._ancestors_named(own):
            if not write:
                return self.thread_namespace(owner), None
            return None, (
                f"permission_denied: {path} belongs to thread {owner!r}, which this thread was forked from; "
                "a fork reads its parent's offloaded files but never changes them"
            )
        return None, (
            f"permission_denied: {path} holds another thread's offloaded data; "
            "a thread reads only its own large_tool_results and conversation_history (and those of the thread it "
            "was forked from)"
        )

    def _visible(self, own: str | None) -> list[tuple[str, ...]]:
        """Namespaces a listing or search at a path owned by no thread covers: workspace, then threads."""
        if own == NO_THREAD:
            threads = []  # the runs without a thread id share a folder: read by name, never listed
        elif own is not None:
            threads = [own, *self._ancestors_named(own)]
        else:
            root = (*self.prefix, "threads")
            found = self._store().list_namespaces(prefix=root, max_depth=len(root) + 1, limit=1_000_000)
            threads = sorted({ns[len(root)] for ns in found if len(ns) > len(root)})
        return [self.workspace, *(self.thread_namespace(t) for t in threads)]

    def _gather(self, path: str | None, run: Callable[[StoreBackend], _Listing], empty: _Listing) -> _Listing:
        """`run` on the namespace `path` belongs to, or merged over every visible namespace."""
        own = self._own()
        if path is not None and owner_of(path) is not None:
            namespace, why = self._route(path, own, write=False)
            if namespace is None or own == NO_THREAD:
                empty.error = why or SHARED_BY_NAME
                return empty
            return run(self._files(namespace))
        merged: dict[str, Any] = {}
        field = "entries" if isinstance(empty, LsResult) else "matches"
        for namespace in self._visible(own):
            result = run(self._files(namespace))
            if result.error is not None:
                return result
            for item in getattr(result, field) or []:
                key = f"{item.get('path')}:{item.get('line', '')}"
                merged.setdefault(key, item)
        setattr(empty, field, sorted(merged.values(), key=lambda i: (i.get("path") or "", i.get("line", 0))))
        return empty

    # --- listing and search -----------------------------------------------------------
    def ls(self, path: str) -> LsResult:
        return self._gather(path, lambda files: files.ls(path), LsResult())

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self._gather(path, lambda files: files.glob(pattern, path), GlobResult())

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        result = self._gather(path, lambda files: files.grep(pattern, path, glob, max_count=max_count), GrepResult())
        if max_count is not None and result.matches is not None and len(result.matches) > max_count:
            result.matches, result.truncated = result.matches[:max_count], True
        return result

    # --- single files -------------------------------------------------------------------
    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        namespace, why = self._route(file_path, self._own(), write=False)
        return ReadResult(error=why) if namespace is None else self._files(namespace).read(file_path, offset, limit)

    def write(self, file_path: str, content: str) -> WriteResult:
        namespace, why = self._route(file_path, self._own(), write=True)
        return WriteResult(error=why) if namespace is None else self._files(namespace).write(file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        namespace, why = self._route(file_path, self._own(), write=True)
        if namespace is None:
            return EditResult(error=why)
        return self._files(namespace).edit(file_path, old_string, new_string, replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        namespace, why = self._route(file_path, self._own(), write=True)
        return DeleteResult(error=why) if namespace is None else self._files(namespace).delete(file_path)

    # --- batches ------------------------------------------------------------------------
    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        own = self._own()
        answers: list[FileUploadResponse] = []
        for path, data in files:
            namespace, why = self._route(path, own, write=True)
            if namespace is None:
                answers.append(FileUploadResponse(path=path, error=why))
            else:
                answers.extend(self._files(namespace).upload_files([(path, data)]))
        return answers

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        own = self._own()
        answers: list[FileDownloadResponse] = []
        for path in paths:
            namespace, why = self._route(path, own, write=False)
            if namespace is None:
                answers.append(FileDownloadResponse(path=path, content=None, error=why))
            else:
                answers.extend(self._files(namespace).download_files([path]))
        return answers


__all__ = ["DEFAULT_PREFIX", "MAX_FORK_DEPTH", "ThreadIsolatedStoreBackend"]
