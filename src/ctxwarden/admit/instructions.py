"""Instruction files: every `AGENTS.md` from the repository root down to the working directory.

Broad first (the root's file, then each folder's on the way down), each labelled with
its folder; a file identical to one already taken counts once. Each file is capped
(`instruction_file_max_chars`) and all of them together (`instructions_max_chars`);
past the budget one line names what was omitted. The repository root is the nearest
folder holding `.git`; without one, only the working directory is read. The candidate
files are found once; each is re-read when it changes (size or modification time), and
the rendered section is reused while none does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ctxwarden.admit.sections import capped_text

FILE_NAME = "AGENTS.md"


@dataclass(frozen=True, slots=True)
class InstructionFile:
    folder: str
    path: Path
    text: str


def repository_root(working_dir: Path) -> Path | None:
    for folder in (working_dir, *working_dir.parents):
        if (folder / ".git").exists():
            return folder
    return None


def candidate_paths(working_dir: Path) -> list[Path]:
    """`AGENTS.md` paths from the repository root down to `working_dir`, broad first."""
    working_dir = working_dir.resolve()
    root = repository_root(working_dir)
    if root is None:
        return [working_dir / FILE_NAME]
    chain = [working_dir, *working_dir.parents]
    folders = list(reversed(chain[: chain.index(root) + 1]))
    return [folder / FILE_NAME for folder in folders]


class Instructions:
    """Collects and renders the instruction files for one working directory."""

    def __init__(self, working_dir: str | Path, per_file: int, total: int) -> None:
        self.working_dir = Path(working_dir)
        self.per_file, self.total = per_file, total
        self._rendered: tuple[tuple[tuple[str, int, int], ...], str, list[str]] | None = None
        self._paths: list[Path] | None = None
        """The candidate files, found on first use (the repository root does not move under a running agent)."""

    def section(self) -> tuple[str, list[str]]:
        """The rendered section and the problems to report (unreadable files contribute nothing)."""
        if self._paths is None:
            self._paths = candidate_paths(self.working_dir)
        paths = self._paths
        signature = tuple(_stat(p) for p in paths)
        if self._rendered is not None and self._rendered[0] == signature:
            return self._rendered[1], self._rendered[2]
        files, problems = self._read(paths)
        text = self._render(files)
        self._rendered = (signature, text, problems)
        return text, problems

    def _read(self, paths: list[Path]) -> tuple[list[InstructionFile], list[str]]:
        root = repository_root(self.working_dir.resolve()) or self.working_dir.resolve()
        files, problems, seen = [], [], set()
        for path in paths:
            if not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: {exc}")
                continue
            digest = hashlib.sha256(text.strip().encode()).hexdigest()
            if digest in seen or not text.strip():
                continue
            seen.add(digest)
            folder = path.parent.relative_to(root).as_posix() if path.parent != root else "."
            files.append(InstructionFile(folder, path, text.strip()))
        return files, problems

    def _render(self, files: list[InstructionFile]) -> str:
        if not files:
            return ""
        parts = ["## Instructions (AGENTS.md)\nProject instructions, broad first; the folder each applies to is named."]
        used = 0
        for index, file in enumerate(files):
            body = capped_text(file.text, self.per_file, f"… [{{chars}} more chars: read {file.path}]")
            block = f"### {file.folder}\n{body}"
            if used + len(block) > self.total:
                rest = ", ".join(str(f.path) for f in files[index:])
                parts.append(f"… {len(files) - index} more instruction files omitted: {rest}")
                break
            parts.append(block)
            used += len(block)
        return "\n\n".join(parts)


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        info = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), info.st_size, info.st_mtime_ns)


__all__ = ["FILE_NAME", "Instructions", "candidate_paths", "repository_root"]
