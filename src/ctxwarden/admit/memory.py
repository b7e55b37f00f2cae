"""The memory index: `MEMORY.md`, one line per note; note bodies enter only when the agent reads them.

The index is read from the backend on every call (it is small) and re-rendered only
when its bytes change, so a note the agent adds shows up on the next call, and an
unchanged index stays byte-identical. The section tells the agent, in a few lines,
how to add a note with the ordinary file tools.
"""

from __future__ import annotations

from typing import Any

from ctxwarden.admit.sections import capped_lines

DEFAULT_MEMORY_INDEX = "/memory/MEMORY.md"


class MemoryIndex:
    """Reads and renders one `MEMORY.md` on a backend."""

    def __init__(self, backend: Any, path: str, max_chars: int) -> None:
        self.backend, self.path, self.max_chars = backend, path, max_chars
        self._rendered: tuple[bytes | None, str, str | None] | None = None

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


__all__ = ["DEFAULT_MEMORY_INDEX", "MemoryIndex"]
