"""Isolation on the agent's backend: a thread sees its workspace and its own offloaded files, never the databases.

Every thread of an agent shares one backend, and the agent's file tools (`ls`, `glob`,
`grep`, `read_file`, ...) can reach anything on it. Evicted results and folded history
hold whatever the tools and the user said on that thread, so a thread must not list or
read another's. `ThreadIsolatedBackend` wraps a backend and, while a LangGraph step runs,
refuses paths under `/large_tool_results/<other thread>` and `/conversation_history/<other
thread>` and leaves them out of listings and searches. Outside a step (a notebook, the
CLI, `Session.compact()`) there is no current thread and those paths stay reachable:
that is the operator, not an agent. deepagents' own summarization names its history files by a random
session id (`/conversation_history/session_<id>.md`); a thread may open such a file by its name — which only the
thread that wrote it holds — but never lists or searches them.

The embedded default keeps `checkpoints.sqlite` and `trace.sqlite` beside the agent's
files. Those are refused always, in and outside a run, and a search never opens them:
SQLite's locks are per process, so a tool that merely opens and closes a database file
inside the agent process drops that process's locks on it, and a second process on the
same state dir can then checkpoint a WAL this one still writes to, corrupting the
database. So a `grep` over a folder holding a database (or another thread's folders) is
split into searches of what the thread may read, and the database is never opened; a file such a search reaches, or
a `grep` names, is read and searched here (`stack.file_grep`), since the backend's own search may walk its folder.
A folder above ctxwarden's folders or a database is never changed whole: a `delete` of `/` removed them all.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from pathlib import Path
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

from ctxwarden.admit.memory import local_path
from ctxwarden.core.io import Call, Steps, arun, method, run
from ctxwarden.core.layout import DATABASES, DEEPAGENTS_HISTORY, HISTORY_DIR, LARGE_RESULTS_DIR, NO_THREAD, folder_name
from ctxwarden.core.runtime import running_agent_tool, running_thread
from ctxwarden.stack.file_grep import grep_file
from ctxwarden.stack.real_paths import refuse_real_paths

_Listing = TypeVar("_Listing", LsResult, GlobResult, GrepResult)
_Result = TypeVar("_Result", ReadResult, WriteResult, EditResult, DeleteResult)

PRIVATE_DIRS = (LARGE_RESULTS_DIR, HISTORY_DIR)
"""Top-level folders whose second component names the thread that owns what is below."""

SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")
"""A SQLite database is its file plus these: each is refused with it."""


UNGUESSABLE = re.compile(
    rf"/conversation_history/({DEEPAGENTS_HISTORY.pattern}\.md|media/[0-9a-f]{{16,64}}\.\w{{1,8}})"
)
"""deepagents' own history files: named by a random session id or a content hash, recorded in the thread that wrote
them. They cannot be told apart by thread, so a thread may read or write one it names, but never lists or searches
them: without the name, which only its own thread holds, they cannot be found."""


def original_refusal(path: str) -> str | None:
    """Why the agent's running tool may not change `path` (`None`: it may, or no agent's tool is running).

    Evicted outputs and history files are the originals recall and the summaries point to: an agent's tool
    reads them but never writes, edits or deletes one, so what recall returns is what the tool or the
    conversation said. ctxwarden's own writes (eviction, a fold's history) run outside any agent's tool."""
    tool = running_agent_tool()
    if tool is not None and holds(path, PRIVATE_ROOTS):  # `delete /` removed every thread's files, the databases too
        return (
            f"permission_denied: {path} holds ctxwarden's originals of every thread (/{LARGE_RESULTS_DIR}, "
            f"/{HISTORY_DIR}); {tool} may not change it whole. Delete your own files in it by their paths."
        )
    parts = [p for p in normalized(path).split("/") if p]
    if tool is None or not parts or parts[0].casefold() not in PRIVATE_DIRS or _unguessable(path):
        return None
    return (
        f"permission_denied: {path} is an original ctxwarden keeps (an evicted tool output or the conversation's "
        f"history); {tool} may read it but never change it. Write your own notes to another path (e.g. /notes/...)."
    )


PRIVATE_ROOTS = tuple(f"/{folder}" for folder in PRIVATE_DIRS)


def holds(path: str, paths: Iterable[str]) -> bool:
    """Whether `path` is a folder above any of `paths` (casefolded backend paths), so that changing it whole (a
    recursive `delete`) would change them."""
    prefix = normalized(path).rstrip("/").casefold() + "/"
    return any(held.startswith(prefix) for held in paths)


def _unguessable(path: str) -> bool:
    return UNGUESSABLE.fullmatch(normalized(path)) is not None


def _current_thread() -> str | None:
    return running_thread()


def normalized(path: str) -> str:
    """`path` as an absolute backend path with `.`, `..` and repeated slashes resolved."""
    return posixpath.normpath("/" + path.lstrip("/")).replace("//", "/")


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

    def __init__(
        self,
        inner: BackendProtocol,
        *,
        current_thread: Callable[[], str | None] = _current_thread,
        reserved: Iterable[str] = DATABASES,
    ) -> None:
        """`reserved`: backend paths of databases (or other files) the agent must never open.

        Each is refused with its SQLite sidecars (`-wal`, `-shm`, `-journal`).
        """
        refuse_real_paths(inner)
        self.inner = inner
        self.current_thread = current_thread
        self.reserved = frozenset(
            normalized(path + suffix).casefold() for path in reserved for suffix in SQLITE_SIDECARS
        )

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)  # the wrapped backend's own attributes (root_dir, cwd, ...)

    def local_path(self, path: str) -> Path | None:
        """The local file behind `path` on the wrapped backend, for a path this wrapper passes through unchanged."""
        if owner_of(path) is not None or self.refusal(path) is not None:
            return None
        return local_path(self.inner, path)

    def refusal(self, path: str) -> str | None:
        """Why the running thread may not touch `path`, or `None` when it may."""
        return self._refusal(path, self._own())

    def _own(self) -> str | None:
        """The running thread's folder name, or `None` outside a run (read once per backend call)."""
        thread = self.current_thread()
        return None if thread is None else folder_name(thread)

    def _refusal(self, path: str, own: str | None, *, named: bool = True, write: bool = False) -> str | None:
        """Why `path` is refused (`None`: it is not). `named`: the caller names this exact file (not a listing);
        `write`: the call would change it."""
        held = write and holds(path, self.reserved)  # a folder that holds one: a `delete` of it deletes the database
        if held or normalized(path).rstrip("/").casefold() in self.reserved:
            what = "holds" if held else "is"
            return (
                f"permission_denied: {path} {what} one of ctxwarden's own databases; the agent's file tools never "
                "open or change it (read the thread with the /context report or the trace instead)"
            )
        owner = owner_of(path) if own is not None else None
        if owner is None or (owner == own and (named or own != NO_THREAD)) or (named and _unguessable(path)):
            return original_refusal(path) if write else None
        return (
            f"permission_denied: {path} holds another thread's offloaded data; "
            "a thread reads only its own large_tool_results and conversation_history"
        )

    def _only_own(self, result: _Listing, field: str, own: str | None) -> _Listing:
        """`result` with the entries of `field` that are reserved or belong to another thread left out."""
        items = getattr(result, field)
        if items is not None:
            setattr(result, field, [i for i in items if self._refusal(i.get("path") or "", own, named=False) is None])
        return result

    def _must_split(self, path: str, own: str | None) -> bool:
        """Whether searching `path` whole would open a reserved file or another thread's files."""
        if holds(path, self.reserved):
            return True
        base = normalized(path).rstrip("/").casefold()
        return own is not None and (base in PRIVATE_ROOTS or holds(path, PRIVATE_ROOTS))

    def _parts(self, listing: LsResult, own: str | None) -> tuple[list[tuple[str, bool]], list[str]]:
        """A listed folder's entries a search may open: `(files and folders to search whole, each with whether it is
        a folder; folders to split)`."""
        whole, split = [], []
        for entry in listing.entries or []:
            path = (entry.get("path") or "").rstrip("/")
            if not path or self._refusal(path, own, named=False) is not None:
                continue
            if entry.get("is_dir") and self._must_split(path, own):
                split.append(path)
            else:
                whole.append((path, bool(entry.get("is_dir"))))
        return whole, split

    def _search_paths(self, path: str, own: str | None) -> Steps[list[tuple[str, bool | None]]]:
        """What to search instead of `path`, so that nothing refused is ever opened: paths, each with whether it is a
        folder (`None`: not known)."""
        if not self._must_split(path, own):
            return [(path, None)]
        whole, split = self._parts((yield method(self.inner, "ls", path)), own)
        found: list[tuple[str, bool | None]] = list(whole)
        for folder in split:
            found += yield from self._search_paths(folder, own)
        return found

    def _grep_part(
        self, pattern: str, path: str, folder: bool | None, glob: str | None, max_count: int | None
    ) -> Steps[GrepResult]:
        """`grep` of one path a search may open whole: a file is read and searched here (`stack.file_grep`), since
        the backend's own search may walk the file's whole folder."""
        if not folder:
            (answer,) = yield method(self.inner, "download_files", [path])
            if answer.content is not None:
                return grep_file(pattern, path, answer.content, glob, max_count)
            if folder is False:
                return GrepResult(matches=[])
        found: GrepResult = yield method(self.inner, "grep", pattern, path, glob, max_count=max_count)
        return found

    # --- listing and search -----------------------------------------------------
    # Each operation is written once, as a generator that yields its call to the inner backend
    # (see `ctxwarden.core.io`); the sync method runs it with the blocking call, the async one awaits.
    def ls(self, path: str) -> LsResult:
        return run(self._ls(path))

    async def als(self, path: str) -> LsResult:
        return await arun(self._ls(path))

    def _ls(self, path: str) -> Steps[LsResult]:
        own = self._own()
        if (why := self._refusal(path, own)) is not None:
            return LsResult(error=why)
        listing: LsResult = yield method(self.inner, "ls", path)
        return self._only_own(listing, "entries", own)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return run(self._glob(pattern, path))

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return await arun(self._glob(pattern, path))

    def _glob(self, pattern: str, path: str | None) -> Steps[GlobResult]:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GlobResult(error=why)
        found: GlobResult = yield method(self.inner, "glob", pattern, path)
        return self._only_own(found, "matches", own)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        return run(self._grep(pattern, path, glob, max_count))

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        return await arun(self._grep(pattern, path, glob, max_count))

    def _grep(self, pattern: str, path: str | None, glob: str | None, max_count: int | None) -> Steps[GrepResult]:
        own = self._own()
        if path is not None and (why := self._refusal(path, own)) is not None:
            return GrepResult(error=why)
        results: list[GrepResult] = []
        for part, folder in (yield from self._search_paths(path or "/", own)):
            results.append((yield from self._grep_part(pattern, part, folder, glob, _left(max_count, results))))
            if _left(max_count, results) == 0:
                break
        return self._only_own(_merged(results), "matches", own)

    # --- single files -----------------------------------------------------------
    def _named(
        self, file_path: str, refused: Callable[..., _Result], call: Call, *, write: bool = True
    ) -> Steps[_Result]:
        """`call` on the inner backend, unless the running thread may not touch `file_path`."""
        if (why := self._refusal(file_path, self._own(), write=write)) is not None:
            return refused(error=why)
        answer: _Result = yield call
        return answer

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return run(
            self._named(file_path, ReadResult, method(self.inner, "read", file_path, offset, limit), write=False)
        )

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        call = method(self.inner, "read", file_path, offset, limit)
        return await arun(self._named(file_path, ReadResult, call, write=False))

    def write(self, file_path: str, content: str) -> WriteResult:
        return run(self._named(file_path, WriteResult, method(self.inner, "write", file_path, content)))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return await arun(self._named(file_path, WriteResult, method(self.inner, "write", file_path, content)))

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        call = method(self.inner, "edit", file_path, old_string, new_string, replace_all)
        return run(self._named(file_path, EditResult, call))

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        call = method(self.inner, "edit", file_path, old_string, new_string, replace_all)
        return await arun(self._named(file_path, EditResult, call))

    def delete(self, file_path: str) -> DeleteResult:
        return run(self._named(file_path, DeleteResult, method(self.inner, "delete", file_path)))

    async def adelete(self, file_path: str) -> DeleteResult:
        return await arun(self._named(file_path, DeleteResult, method(self.inner, "delete", file_path)))

    # --- batches ----------------------------------------------------------------
    def _refusals(self, paths: list[str], *, write: bool = False) -> list[str | None]:
        own = self._own()
        return [self._refusal(p, own, write=write) for p in paths]

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return run(self._upload(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return await arun(self._upload(files))

    def _upload(self, files: list[tuple[str, bytes]]) -> Steps[list[FileUploadResponse]]:
        refused = self._refusals([p for p, _d in files], write=True)
        allowed = [f for f, why in zip(files, refused, strict=True) if why is None]
        answered = (yield method(self.inner, "upload_files", allowed)) if allowed else []
        return _in_order([p for p, _d in files], refused, answered, FileUploadResponse)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return run(self._download(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return await arun(self._download(paths))

    def _download(self, paths: list[str]) -> Steps[list[FileDownloadResponse]]:
        refused = self._refusals(paths)
        allowed = [p for p, why in zip(paths, refused, strict=True) if why is None]
        answered = (yield method(self.inner, "download_files", allowed)) if allowed else []
        return _in_order(paths, refused, answered, lambda p, why: FileDownloadResponse(p, None, why))


def _left(max_count: int | None, results: list[GrepResult]) -> int | None:
    """How many more matches a split search may return."""
    if max_count is None:
        return None
    return max(0, max_count - sum(len(r.matches or []) for r in results))


def _merged(results: list[GrepResult]) -> GrepResult:
    """The searches of a split `grep` as one result."""
    if len(results) == 1:
        return results[0]
    errors = [r.error for r in results if r.error]
    matches = [m for r in results for m in r.matches or []]
    failed = all(r.matches is None for r in results) and bool(results)
    return GrepResult(
        error="; ".join(errors) or None,
        matches=None if failed else matches,
        truncated=any(r.truncated for r in results),
    )


def _in_order(
    paths: list[str], refused: list[str | None], answered: list[Any], refusal: Callable[..., Any]
) -> list[Any]:
    """One response per path, in the caller's order: the inner backend's answers, refusals where refused."""
    done = iter(answered)
    return [refusal(p, why) if why else next(done) for p, why in zip(paths, refused, strict=True)]


__all__ = [
    "PRIVATE_DIRS",
    "SQLITE_SIDECARS",
    "UNGUESSABLE",
    "ThreadIsolatedBackend",
    "normalized",
    "owner_of",
]
