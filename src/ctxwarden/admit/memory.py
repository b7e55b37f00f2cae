"""The memory index: `MEMORY.md`, one line per note; note bodies enter only when the agent reads them.

The index is read from the backend on every call (it is small) and re-rendered only
when its bytes change, so a note the agent adds shows up on the next call, and an
unchanged index stays byte-identical. When the backend keeps it in a local file (a
`FilesystemBackend`, bare or wrapped by ctxwarden), a `stat` that finds the file as it
was read last stands in for the read. The section tells the agent, in a few lines,
how to add a note with the ordinary file tools.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend

from ctxwarden.admit.sections import capped_lines

DEFAULT_MEMORY_INDEX = "/memory/MEMORY.md"


class MemoryIndex:
    """Reads and renders one `MEMORY.md` on a backend."""

    def __init__(self, backend: Any, path: str, max_chars: int) -> None:
        self.backend, self.path, self.max_chars = backend, path, max_chars
        self._rendered: tuple[bytes | None, str, str | None] | None = None
        self._read_last: tuple[tuple[int, ...], tuple[bytes | None, str | None]] | None = None
        """The local file's signature at the last read, and what that read gave."""

    @property
    def folder(self) -> str:
        return self.path.rsplit("/", 1)[0] or "/"

    def section(self) -> tuple[str, str | None]:
        """The rendered section and a problem to report, if any (an unreadable index contributes nothing)."""
        data, problem = self._read()
        if self._rendered is not None and self._rendered[0] == data:
            return self._rendered[1], self._rendered[2]
        text, problem = self._render(data, problem)
        self._rendered = (data, text, problem)
        return text, problem

    def _read(self) -> tuple[bytes | None, str | None]:
        file = local_path(self.backend, self.path)
        signature = _signature(file) if file is not None else None
        if signature is not None and self._read_last is not None and self._read_last[0] == signature:
            return self._read_last[1]
        read = self._download()
        self._read_last = (signature, read) if signature is not None else None
        return read

    def _download(self) -> tuple[bytes | None, str | None]:
        if self.backend is None:
            return None, "no backend to read the memory index from"
        try:
            (response,) = self.backend.download_files([self.path])
        except Exception as exc:  # a backend that raises instead of reporting
            return None, f"{self.path}: {type(exc).__name__}: {exc}"
        if response.error is not None or response.content is None:
            missing = str(response.error) in {"file_not_found", "None"}
            return None, None if missing else f"{self.path}: {response.error}"
        return bytes(response.content), None

    def _render(self, data: bytes | None, problem: str | None) -> tuple[str, str | None]:
        head = (
            "## Memory\n"
            f"Notes kept across sessions live in `{self.folder}/`; `{self.path}` indexes them, one line per note. "
            "Read a note with read_file when it bears on the task.\n"
            f"To remember something: write it to `{self.folder}/<short-name>.md` with write_file, then add one line "
            f"to `{self.path}` with edit_file: `- [Title]({self.folder}/<short-name>.md) — what it is about`."
        )
        if data is None:
            return f"{head}\n(no notes yet)", problem
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"{head}\n(the index could not be read)", f"{self.path}: not UTF-8 ({exc.reason})"
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        if not lines:
            return f"{head}\n(no notes yet)", None
        omitted = "… {count} more lines omitted; read " + self.path + " for the rest"
        return f"{head}\n{capped_lines(lines, self.max_chars, omitted)}", None


def local_path(backend: Any, path: str) -> Path | None:
    """The local file behind `path` on `backend`, or `None` when it is not known to be one.

    A `FilesystemBackend` maps it under its root (virtual mode) or takes it as it is; a
    wrapper says through its own `local_path`. Used only to notice that a file has not
    changed: the read itself always goes through the backend.
    """
    if isinstance(backend, FilesystemBackend):
        if backend.virtual_mode:
            return None if ".." in path else backend.cwd / path.lstrip("/")
        return Path(path) if Path(path).is_absolute() else None
    own = getattr(type(backend), "local_path", None)
    return own(backend, path) if callable(own) else None


def _signature(file: Path) -> tuple[int, ...]:
    """What changes when the file is written, replaced or removed."""
    try:
        info = os.stat(file)
    except OSError:
        return (0,)
    return (1, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


__all__ = ["DEFAULT_MEMORY_INDEX", "MemoryIndex", "local_path"]
