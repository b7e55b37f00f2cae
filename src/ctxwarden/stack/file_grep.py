"""`grep` of one file, read whole: what an isolating backend does instead of handing a file path to the backend.

deepagents' `FilesystemBackend` searches with ripgrep where it is installed and in Python
where it is not; given a file, the Python search walks the file's whole folder and keeps
what it finds. Handed `/notes.txt`, it opened every file of the state dir: the databases
(which a tool must never open: `stack.isolation`) and every other thread's offloaded files,
whose matches were left out afterwards, but whose count still stopped a search cut at
`max_count` early: one bit of another thread's text a call. So a file is read and searched
here, as the backend would: the pattern is literal, a line holds it or not, lines are read
with universal newlines, a file that is not UTF-8 is skipped as binary, and the include glob
is matched against its name.
"""

from __future__ import annotations

import io
import posixpath

from deepagents.backends.protocol import GrepMatch, GrepResult
from deepagents.backends.utils import compile_grep_include_glob


def grep_file(pattern: str, path: str, content: bytes, glob: str | None, max_count: int | None) -> GrepResult:
    """The lines of the file at `path` (its `content`) that hold `pattern`, at most `max_count` of them."""
    if glob is not None and not compile_grep_include_glob(glob)(posixpath.basename(path)):
        return GrepResult(matches=[])
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return GrepResult(matches=[])
    matches: list[GrepMatch] = []
    for number, line in enumerate(io.StringIO(text, newline=None), 1):
        if pattern not in line:
            continue
        if max_count is not None and len(matches) >= max_count:
            return GrepResult(matches=matches, truncated=True)
        matches.append({"path": path, "line": number, "text": line.rstrip("\n")})
    return GrepResult(matches=matches)


__all__ = ["grep_file"]
