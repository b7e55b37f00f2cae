"""Which offloaded files `recall(query=...)` reads beside the thread's messages, and how it reads them.

The messages name the thread's own evictions, which the search reads with them. Beside those
a thread's folders hold files no message of it names: a subagent's evictions and history
files, which the search reads too, and files of other branches of the thread (a run resumed
from an earlier checkpoint runs calls again, see `clip.names.variant_path`) or of a run whose
checkpoints were lost, which are not this conversation's and are left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ctxwarden.clip.media_files import MEDIA_FILE
from ctxwarden.clip.names import record_of
from ctxwarden.core.layout import HISTORY_DIR, HISTORY_PART, LARGE_RESULTS_DIR, folder_name
from ctxwarden.core.text import decode

Reader = Callable[[Sequence[str]], Mapping[str, str]]
"""Reads backend paths; answers the text of each one it could read."""


def own_files(
    backend: Any, thread: str | None, covered: Iterable[str], messages: Sequence[BaseMessage] = ()
) -> list[str]:
    """A thread's offloaded files that its messages do not hold: a subagent's evictions and history files, and the
    raw bytes its `messages` name (an output's `.raw`, which holds what rendering cut).

    Left out: the thread's own history files (its file, and its parts with a fork's copies of them), which hold
    the folded turns the thread itself still holds (a fold changes only the view); and every other file of its own
    results folder, which is another branch's (a thread resumed from an earlier checkpoint runs calls again, see
    `clip.names.variant_path`) or a lost run's, not this conversation's.
    """
    if backend is None or thread is None:
        return []
    name = folder_name(thread)
    paths: list[str] = []
    for folder in (f"/{HISTORY_DIR}/{name}", f"/{LARGE_RESULTS_DIR}/{name}"):
        paths += _listed(backend, folder, depth=3)
    held = set(covered)
    raw = {str(r["raw_path"]) for m in messages if isinstance(r := record_of(m), dict) and r.get("raw_path")}
    results = f"/{LARGE_RESULTS_DIR}/{name}/"
    parts = re.compile(rf"/{HISTORY_DIR}/{re.escape(name)}/(?:fork-of-[^/]+-)?{HISTORY_PART.pattern}")
    return [
        p
        for p in dict.fromkeys(paths)
        if p not in held
        and not parts.fullmatch(p)
        and not MEDIA_FILE.fullmatch(p)  # an evicted result's images and PDFs, not text to search
        and (p in raw or not p.startswith(results) or "/" in p[len(results) :])  # a subagent's: its own folder
    ]


def _listed(backend: Any, folder: str, *, depth: int) -> list[str]:
    try:
        listing = backend.ls(folder)
    except Exception:  # a backend without listing, or a folder that is not there
        return []
    found: list[str] = []
    for entry in getattr(listing, "entries", None) or []:
        path = str(entry.get("path") or "").rstrip("/")
        if not path or path.rsplit("/", 1)[-1].startswith("."):  # a staged rewrite, not a file of its own
            continue
        if entry.get("is_dir"):
            found += _listed(backend, path, depth=depth - 1) if depth > 1 else []
        else:
            found.append(path)
    return found


def reader(backend: Any) -> Reader:
    """A `Reader` over `backend` (files it refuses or lacks are left out)."""

    def read(paths: Sequence[str]) -> dict[str, str]:
        if backend is None or not paths:
            return {}
        try:
            answers = backend.download_files(list(paths))
        except Exception:  # a backend that raises instead of reporting
            return {}
        return {str(a.path): _text(a.content) for a in answers if a.error is None and a.content is not None and a.path}

    return read


def _text(data: bytes) -> str:
    """The text of a file to search: as ctxwarden wrote it, or, for bytes that are not text (a tool's `bytes` kept raw,
    a subagent's binary file), with each undecodable byte as U+FFFD: a search shows lines, it never returns a file."""
    try:
        return decode(data)
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


__all__ = ["Reader", "own_files", "reader", "record_of"]
