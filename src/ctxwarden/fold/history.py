"""The history file: folded turns, in full, before they leave the model's view.

One file per thread and agent namespace (`/conversation_history/<thread>.md`, a
subagent's under `/conversation_history/<thread>/<namespace>.md`), one section per
fold. A retry finds its section already there and writes nothing, so a fold is never
written twice.

A backend has no append, so a new section rewrites the whole file, and a process
killed during that write leaves the file cut short (a filesystem truncates it first).
So the new text is staged first, in a hidden file in the thread's folder, ending with a
line that says the staging finished; a later write that finds a finished staged text
the file is a prefix of starts from it. Fold N's section replaces a section cut short
by a kill. A whole fold N of other turns stays: it belongs to another branch of the
thread (a run resumed from an earlier checkpoint, or a run whose checkpoints were lost),
whose summaries still name this file. The new fold then writes the folds before it and
its own to a part of the file, its branch's own (`core.layout.history_part`), and the
thread's later folds go on in that part.

So each fold reads and writes its whole file, and a long thread's file grows with every
fold. Past `VOLUME_CHARS` the next fold starts a new part instead, whose first line names
the file before it: a fold's cost stays bounded however long the thread runs.

Where fold N begins is found by walking the sections, each heading stating the length of
its body, never by searching the text: the folded turns are tool outputs and messages that
may hold a line `## fold 2` of their own, and a search once cut the file there. A file
written before the headings stated their length is searched as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ctxwarden.core.caches import ObjectCache
from ctxwarden.core.identity import DERIVED_PREFIX
from ctxwarden.core.io import Steps, arun, method, run
from ctxwarden.core.layout import HISTORY_DIR, NO_THREAD, folder_name, history_part, is_history_part
from ctxwarden.core.text import decode, encode
from ctxwarden.fold.transcript import section_marker

_STAGED_END = b"\n<!-- ctxwarden: staged "

VOLUME_CHARS = 1_000_000
"""A history file this long gets no more sections: the next fold starts a part of its own (`history_part`)."""

_VOLUME_HEAD = "<!-- ctxwarden: the folds before fold {number} are in {path} -->\n"
"""A part's first line, naming the file that holds the folds before it."""


def history_path(thread_id: str | None, namespace: str, messages: Sequence[BaseMessage] = ()) -> str:
    """The history file of a thread (a subagent's: its namespace's). Runs without a thread id share a folder, where
    each conversation's file is named by a hash of its first message (`conversation_key`): a file every such run
    could name would show one user's folded turns to another."""
    if thread_id is None:
        name = conversation_key(messages) + (f"-{folder_name(namespace)}" if namespace else "")
        return f"/{HISTORY_DIR}/{NO_THREAD}/{name}.md"
    thread = folder_name(thread_id)
    if namespace:
        return f"/{HISTORY_DIR}/{thread}/{folder_name(namespace)}.md"
    return f"/{HISTORY_DIR}/{thread}.md"


def conversation_key(messages: Sequence[BaseMessage]) -> str:
    """16 hex of the first message's id: the same for every run of one conversation (a client resending its history
    with its ids), unguessable for another. A first message with no id of its own (a `("user", "hello")` tuple, or an
    id ctxwarden derived from its text) gives a random name, kept for that message object while the run holds it:
    named by its text, every conversation opening with "hello" named the same file, and read the others' history."""
    first = messages[0] if messages else None
    named = getattr(first, "id", None)
    if not named or str(named).startswith(DERIVED_PREFIX):
        named = _UNNAMED.get(first)
        if named is None:
            named = secrets.token_hex(16)
            _UNNAMED.put(first, named)
    return hashlib.sha256(f"{getattr(first, 'type', '')}:{named}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


_UNNAMED: ObjectCache[str] = ObjectCache(cap=10_000)
"""The random name of each first message without an id of its own, by object (`conversation_key`)."""


def continued_path(
    last: str | None, thread_id: str | None, namespace: str, messages: Sequence[BaseMessage] = ()
) -> str:
    """The history file of the next fold: the one the thread's last fold wrote, if it is this thread's (its own file
    or a part of it: a branch, or the newest volume), else the thread's own file."""
    path = history_path(thread_id, namespace, messages)
    return last if last is not None and is_history_part(last, path) else path


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


def _held(current: bytes | None, staged: bytes | None) -> tuple[str, str]:
    """What the file holds now, and what it held whole: a finished staged rewrite it is a prefix of, else itself."""
    text = decode(current) if current is not None else ""
    finished = _finished(staged)
    return text, finished if finished is not None and finished.startswith(text) else text


_HEADING = re.compile(r"\n\n## fold (\d+)\n\n<!-- (\d+) characters; ")
_VOLUME_LINE = re.compile(r"<!-- ctxwarden: the folds before fold \d+ are in \S+ -->\n")


def _section_start(text: str, number: int) -> int:
    """Where fold `number`'s section begins in `text`, or where it goes: past every whole section before it.

    Each heading states its body's length, so the walk jumps from heading to heading and reads no content; a section
    cut short (its stated body runs past the end) is where the walk stops. From a heading written before lengths were
    stated, the old search for the next heading takes over. A part's first line (`_VOLUME_HEAD`) comes before them.
    """
    head = _VOLUME_LINE.match(text)
    position = head.end() if head else 0
    while position < len(text):
        heading = _HEADING.match(text, position)
        if heading is None:
            start = text.find("\n" + section_marker(number), position)
            return len(text) if start < 0 else start
        end = _section_end(text, heading)
        if int(heading[1]) >= number or end is None:
            return position
        position = end
    return len(text)


def _section_end(text: str, heading: re.Match[str] | None) -> int | None:
    """Where the section opened by `heading` ends, or `None`: no heading that states its length, or a section cut
    short (its stated body runs past the end of `text`)."""
    if heading is None:
        return None
    line_end = text.find("\n", heading.end())
    end = line_end + 1 + int(heading[2])
    return end if line_end >= 0 and end <= len(text) else None


def _rewrite(
    path: str, current: bytes | None, staged: bytes | None, number: int, section: str
) -> tuple[str, str, tuple[str, str] | None]:
    """What the file at `path` holds now; what it must hold; and, when this fold goes to a part of it instead, the
    part's kind and text (`core.layout.history_part`). A part is written when a whole fold `number` of other turns is
    there (another branch's, which the file keeps): the folds before it as the file has them, then `section`; or when
    the file is full (`VOLUME_CHARS`): a line naming the file, then `section`."""
    text, whole = _held(current, staged)
    start = _section_start(whole, number)
    wanted = whole[:start] + section
    if whole.startswith(wanted):  # already there (a retry), with whatever a branch wrote after it
        return text, whole, None
    if _section_end(whole, _HEADING.match(whole, start)) is not None:
        return text, whole, ("branch", wanted)
    if 0 < start == len(whole) and len(wanted) > VOLUME_CHARS:
        return text, whole, (f"from-fold-{number}", _VOLUME_HEAD.format(number=number, path=path) + section)
    return text, wanted, None  # a new section, or one replacing a section a kill cut short


def appending(
    backend: Any, path: str, number: int, section: str, base: str | None = None
) -> Steps[tuple[str, str | None]]:
    """Write `section` as fold `number`'s after the folds before it, unless it is already there: returns the file that
    holds it (`path`, or a part of the thread's history file `base`, `path` itself by default: another branch's fold
    `number` is there, or the file is full) and an error or `None`.

    The sans-I/O core of `append_section` and `aappend_section` (see `ctxwarden.core.io`).
    """
    if backend is None:
        return path, "no backend to write the history file to"
    try:
        found, staged = yield method(backend, "download_files", [path, staged_path(path)])
        text, kept, elsewhere = _rewrite(path, _content(found), _content(staged), number, section)
        error = yield from _written(backend, path, text, kept, _content(staged) is not None)
        if elsewhere is None or error is not None:
            return path, error
        kind, part = elsewhere
        path = history_part(base or path, kind, part)
        found, staged = yield method(backend, "download_files", [path, staged_path(path)])
        text, whole = _held(_content(found), _content(staged))
        kept = whole if whole.startswith(part) else part  # a retry finds it there, with the folds after it
        return path, (yield from _written(backend, path, text, kept, _content(staged) is not None))
    except Exception as exc:  # a backend that raises instead of reporting
        return path, f"{type(exc).__name__}: {exc}"


def _written(backend: Any, path: str, text: str, wanted: str, staging_left: bool) -> Steps[str | None]:
    """Make the file at `path` hold `wanted` (it holds `text`): staged first, then written; an error or `None`."""
    staging = staged_path(path)
    data = encode(wanted) if wanted != text else None
    clear_staging = data is not None or staging_left
    try:
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


def append_section(
    backend: Any, path: str, number: int, section: str, base: str | None = None
) -> tuple[str, str | None]:
    """Write `section` as fold `number`'s, unless it is already there: the file holding it, and an error or `None`."""
    return run(appending(backend, path, number, section, base))


async def aappend_section(
    backend: Any, path: str, number: int, section: str, base: str | None = None
) -> tuple[str, str | None]:
    return await arun(appending(backend, path, number, section, base))


def renamed_history(text: str, rename: Callable[[str], str]) -> str:
    """`text`, a history file, with the paths in ctxwarden's own lines passed through `rename`: a part's first line
    and, in the folded turns, the notes an evicted or rendered result carries (lines opening `[ctxwarden: `); each
    section's heading states its new length. Every other line, what the user, the model and the tools said, stays as
    it is. A file whose sections cannot be walked (written before the headings stated lengths, or cut short) keeps
    the rest as it is."""
    head = _VOLUME_LINE.match(text)
    out = [rename(head[0])] if head else []
    position = head.end() if head else 0
    while (heading := _HEADING.match(text, position)) is not None and (end := _section_end(text, heading)):
        line_end = text.find("\n", heading.end()) + 1
        body = "".join(
            rename(line) if line.startswith("[ctxwarden: ") else line
            for line in text[line_end:end].splitlines(keepends=True)
        )
        comment = text[heading.end() : line_end]
        out.append(f"\n\n## fold {heading[1]}\n\n<!-- {len(body)} characters; {comment}{body}")
        position = end
    return "".join(out) + text[position:]


__all__ = [
    "aappend_section",
    "append_section",
    "appending",
    "continued_path",
    "history_path",
    "renamed_history",
    "staged_path",
]
