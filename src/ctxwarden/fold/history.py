"""The history file: folded turns, in full, before they leave the model's view.

One file per thread and agent namespace (`/conversation_history/<thread>.md`, a
subagent's under `/conversation_history/<thread>/<namespace>.md`), one section per
fold. A retry finds its section already there and writes nothing, so a fold is never
written twice.

A backend has no append, so a new section rewrites the whole file, and a process
killed during that write leaves the file cut short (a filesystem truncates it first).
So the new text is staged first, in a hidden file in the thread's folder, ending with a
line that says the staging finished; a later write that finds a finished staged text
the file is a prefix of starts from it. And fold N's section replaces whatever the file
holds from `## fold N` on: a section cut short by a kill, or sections written by a run
whose checkpoint was lost (the thread knows only the folds before N).

Where fold N begins is found by walking the sections, each heading stating the length of
its body, never by searching the text: the folded turns are tool outputs and messages that
may hold a line `## fold 2` of their own, and a search once cut the file there. A file
written before the headings stated their length is searched as it was.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from ctxwarden.core.io import Steps, arun, method, run
from ctxwarden.core.layout import HISTORY_DIR, folder_name
from ctxwarden.core.text import decode, encode
from ctxwarden.fold.transcript import section_marker

_STAGED_END = b"\n<!-- ctxwarden: staged "


def history_path(thread_id: str | None, namespace: str) -> str:
    thread = folder_name(thread_id or "no-thread")
    if namespace:
        return f"/{HISTORY_DIR}/{thread}/{folder_name(namespace)}.md"
    return f"/{HISTORY_DIR}/{thread}.md"


def staged_path(path: str) -> str:
    """Where a rewrite of the history file `path` is staged: a hidden file in its thread's folder."""
    folder, _, name = path.rpartition("/")
    if folder == f"/{HISTORY_DIR}":  # the top-level agent's file: stage it under /conversation_history/<thread>/
        folder = f"{folder}/{name.removesuffix('.md')}"
    return f"{folder}/.{name}.staged"


def _content(response: Any) -> bytes | None:
    return response.content if response.error is None and response.content is not None else None


def _finished(staged: bytes | None) -> str | None:
    """The text of a staged rewrite whose write finished, else `None`."""
    if staged is None:
        return None
    body, sep, end = staged.rpartition(_STAGED_END)
    return decode(body) if sep and end == f"{len(body)} bytes -->\n".encode() else None


def _staged(data: bytes) -> bytes:
    return data + _STAGED_END + f"{len(data)} bytes -->\n".encode()


def _rewrite(current: bytes | None, staged: bytes | None, number: int, section: str) -> tuple[str, str]:
    """What the file holds now, and what it must hold with fold `number`'s section as its last."""
    text = decode(current) if current is not None else ""
    finished = _finished(staged)
    base = finished if finished is not None and finished.startswith(text) else text
    return text, base[: _section_start(base, number)] + section


_HEADING = re.compile(r"\n\n## fold (\d+)\n\n<!-- (\d+) characters; ")


def _section_start(text: str, number: int) -> int:
    """Where fold `number`'s section begins in `text`, or where it goes: past every whole section before it.

    Each heading states its body's length, so the walk jumps from heading to heading and reads no content; a section
    cut short (its stated body runs past the end) is where the walk stops. From a heading written before lengths were
    stated, the old search for the next heading takes over.
    """
    position = 0
    while position < len(text):
        heading = _HEADING.match(text, position)
        if heading is None:
            start = text.find("\n" + section_marker(number), position)
            return len(text) if start < 0 else start
        if int(heading[1]) >= number:
            return position
        line_end = text.find("\n", heading.end())
        end = line_end + 1 + int(heading[2])
        if line_end < 0 or end > len(text):
            return position
        position = end
    return len(text)


def _writes(found: Any, staged: Any, number: int, section: str) -> tuple[bytes | None, bool]:
    """The file's new bytes (`None`: fold `number` is already there) and whether a staged copy is left to remove."""
    current, staging = _content(found), _content(staged)
    text, wanted = _rewrite(current, staging, number, section)
    data = encode(wanted) if wanted != text else None
    return data, data is not None or staging is not None


def appending(backend: Any, path: str, number: int, section: str) -> Steps[str | None]:
    """Write `section` as fold `number`'s, unless it is already there; returns an error message or `None`.

    The sans-I/O core of `append_section` and `aappend_section` (see `ctxwarden.core.io`).
    """
    if backend is None:
        return "no backend to write the history file to"
    staging = staged_path(path)
    try:
        found, staged = yield method(backend, "download_files", [path, staging])
        data, clear_staging = _writes(found, staged, number, section)
        if data is not None:
            with contextlib.suppress(Exception):  # best effort: a backend refusing it still gets the file
                yield method(backend, "upload_files", [(staging, _staged(data))])
            (written,) = yield method(backend, "upload_files", [(path, data)])
            if written.error is not None:
                return str(written.error)
        if clear_staging:
            with contextlib.suppress(Exception):  # without delete, the finished staging stays; the next write reads it
                yield method(backend, "delete", staging)
        return None
    except Exception as exc:  # a backend that raises instead of reporting
        return f"{type(exc).__name__}: {exc}"


def append_section(backend: Any, path: str, number: int, section: str) -> str | None:
    """Write `section` as fold `number`'s, unless it is already there; returns an error message or `None`."""
    return run(appending(backend, path, number, section))


async def aappend_section(backend: Any, path: str, number: int, section: str) -> str | None:
    return await arun(appending(backend, path, number, section))


__all__ = ["aappend_section", "append_section", "appending", "history_path", "staged_path"]
