"""Per-thread isolation of offloaded files: one thread's evicted results and history stay its own.

Every thread of an agent shares one backend, and the agent's file tools (`ls`, `glob`,
`grep`, `read_file`, ...) can reach anything on it. Evicted results and folded history
hold whatever the tools and the user said on that thread, so a thread must not list or
read another's. `ThreadIsolatedBackend` wraps a backend and, while a LangGraph step runs,
refuses paths under `/large_tool_results/<other thread>` and `/conversation_history/<other
thread>` and leaves them out of listings and searches. Outside a step (a notebook, the
CLI, `Session.compact()`) there is no current thread and every path stays reachable:
that is the operator, not an agent.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any, TypeVar

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

from ctxwarden.clip.names import LARGE_RESULTS_DIR, safe_component
from ctxwarden.core.runtime import step_context
from ctxwarden.fold.history import HISTORY_DIR

_Listing = TypeVar("_Listing", LsResult, GlobResult, GrepResult)

PRIVATE_DIRS = (LARGE_RESULTS_DIR, HISTORY_DIR)
"""Top-level folders whose second component names the thread that owns what is below."""


def _current_thread() -> str | None:
    return step_context()[0]


def owner_of(path: str) -> str | None:
    """The thread component owning `path`, or `None` when the path is not under a private folder."""
    parts = [p for p in posixpath.normpath("/" + path.lstrip("/")).split("/") if p]
    if len(parts) < 2 or parts[0].casefold() not in PRIVATE_DIRS:
        return None
    owner = parts[1]
    if parts[0].casefold() == HISTORY_DIR and len(parts) == 2 and owner.endswith(".md"):
        owner = owner[: -len(".md")]
    return owner


class ThreadIsolatedBackend(BackendProtocol):
    """A backend that shows a running thread only its own offloaded files (see the module docstring)."""

    def __init__(self, inner: BackendProtocol, *, current_thread: Callable[[], str | None] = _current_thread) -> None:
        self.inner = inner
        self.current_thread = current_thread

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)  # the wrapped backend's own attributes (root_dir, cwd, ...)

    def refusal(self, path: str) -> str | None:
        """Why the running thread may not touch `path`, or `None` when it may."""
        return self._refusal(path, self._own())

    def _own(self) -> str | None:
        """The running thread's folder name, or `None` outside a run (read once per backend call)."""
        thread = self.current_thread()
        return None if thread is None else safe_component(thread)

    @staticmethod
    def _refusal(path: str, own: str | None) -> str | None:
        owner = owner_of(path) if own is not None else None
        if owner is None or owner == own:
            return None
        return (
            f"permission_denied: {path} holds another thread's offloaded data; "
            "a thread reads only its own large_tool_results and conversation_history"
        )

    def _only_own(self, result: _Listing, field: str, own: str | None) -> _Listing:
        """`result` with the entries of `field` that belong to another thread left out."""
        items = getattr(result, field)
        if items is not None and own is not None:
            setattr(result, field, [i for i in items if self._refusal(i.get("path") or "", own) is None])
        return result

    # --- listing and search -----------------------------------------------------
    def ls(self, path: str) -> LsResult:
        own = self._own()
        if (why := self._refusal(path, own)) is not None:
            return LsResult(error=why)
        return self._only_own(self.inner.ls(path), "entries", own)

    async def als(self, path: str) -> LsResult:
        own = self._own()
        if (why := self._refusal(path, own)) is not None:
            return LsResult(error=why)
        return self._only_own(await self.inner.als(path), "entries", own)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GlobResult(error=why)
        return self._only_own(self.inner.glob(pattern, path), "matches", own)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GlobResult(error=why)
        return self._only_own(await self.inner.aglob(pattern, path), "matches", own)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GrepResult(error=why)
        return self._only_own(self.inner.grep(pattern, path, glob, max_count=max_count), "matches", own)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GrepResult(error=why)
        return self._only_own(await self.inner.agrep(pattern, path, glob, max_count=max_count), "matches", own)

    # --- single files -----------------------------------------------------------
    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        if (why := self.refusal(file_path)) is not None:
            return ReadResult(error=why)
        return self.inner.read(file_path, offset, limit)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        if (why := self.refusal(file_path)) is not None:
            return ReadResult(error=why)
        return await self.inner.aread(file_path, offset, limit)

    def write(self, file_path: str, content: str) -> WriteResult:
        if (why := self.refusal(file_path)) is not None:
            return WriteResult(error=why)
        return self.inner.write(file_path, content)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        if (why := self.refusal(file_path)) is not None:
            return WriteResult(error=why)
        return await self.inner.awrite(file_path, content)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        if (why := self.refusal(file_path)) is not None:
            return EditResult(error=why)
        return self.inner.edit(file_path, old_string, new_string, replace_all)

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        if (why := self.refusal(file_path)) is not None:
            return EditResult(error=why)
        return await self.inner.aedit(file_path, old_string, new_string, replace_all)

    def delete(self, file_path: str) -> DeleteResult:
        if (why := self.refusal(file_path)) is not None:
            return DeleteResult(error=why)
        return self.inner.delete(file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        if (why := self.refusal(file_path)) is not None:
            return DeleteResult(error=why)
        return await self.inner.adelete(file_path)

    # --- batches ----------------------------------------------------------------
    def _refusals(self, paths: list[str]) -> list[str | None]:
        own = self._own()
        return [self._refusal(p, own) for p in paths]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        refused = self._refusals([p for p, _d in files])
        allowed = [f for f, why in zip(files, refused, strict=True) if why is None]
        answered = self.inner.upload_files(allowed) if allowed else []
        return _in_order([p for p, _d in files], refused, answered, FileUploadResponse)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        refused = self._refusals([p for p, _d in files])
        allowed = [f for f, why in zip(files, refused, strict=True) if why is None]
        answered = await self.inner.aupload_files(allowed) if allowed else []
        return _in_order([p for p, _d in files], refused, answered, FileUploadResponse)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        refused = self._refusals(paths)
        allowed = [p for p, why in zip(paths, refused, strict=True) if why is None]
        answered = self.inner.download_files(allowed) if allowed else []
        return _in_order(paths, refused, answered, lambda p, why: FileDownloadResponse(p, None, why))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        refused = self._refusals(paths)
        allowed = [p for p, why in zip(paths, refused, strict=True) if why is None]
        answered = await self.inner.adownload_files(allowed) if allowed else []
        return _in_order(paths, refused, answered, lambda p, why: FileDownloadResponse(p, None, why))


def _in_order(
    paths: list[str], refused: list[str | None], answered: list[Any], refusal: Callable[..., Any]
) -> list[Any]:
    """One response per path, in the caller's order: the inner backend's answers, refusals where refused."""
    done = iter(answered)
    return [refusal(p, why) if why else next(done) for p, why in zip(paths, refused, strict=True)]


__all__ = ["PRIVATE_DIRS", "ThreadIsolatedBackend", "owner_of"]
