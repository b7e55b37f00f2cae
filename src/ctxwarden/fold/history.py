"""The history file: folded turns, in full, before they leave the model's view.

One file per thread and agent namespace (`/conversation_history/<thread>.md`, a
subagent's under `/conversation_history/<thread>/<namespace>.md`), one section per
fold. A retry finds its section already there and writes nothing, so a fold is never
written twice.
"""

from __future__ import annotations

from typing import Any

from ctxwarden.clip.evict import decode, encode
from ctxwarden.clip.names import safe_component
from ctxwarden.fold.transcript import section_marker

HISTORY_DIR = "conversation_history"


def history_path(thread_id: str | None, namespace: str) -> str:
    thread = safe_component(thread_id or "no-thread")
    if namespace:
        return f"/{HISTORY_DIR}/{thread}/{safe_component(namespace)}.md"
    return f"/{HISTORY_DIR}/{thread}.md"


def append_section(backend: Any, path: str, number: int, section: str) -> str | None:
    """Append `section` unless fold `number` is already there; returns an error message or `None`."""
    if backend is None:
        return "no backend to write the history file to"
    try:
        (found,) = backend.download_files([path])
        existing = decode(found.content) if found.error is None and found.content is not None else ""
        if section_marker(number) in existing:
            return None
        (written,) = backend.upload_files([(path, encode(existing + section))])
        return None if written.error is None else str(written.error)
    except Exception as exc:  # a backend that raises instead of reporting
        return f"{type(exc).__name__}: {exc}"


async def aappend_section(backend: Any, path: str, number: int, section: str) -> str | None:
    if backend is None:
        return "no backend to write the history file to"
    try:
        (found,) = await backend.adownload_files([path])
        existing = decode(found.content) if found.error is None and found.content is not None else ""
        if section_marker(number) in existing:
            return None
        (written,) = await backend.aupload_files([(path, encode(existing + section))])
        return None if written.error is None else str(written.error)
    except Exception as exc:  # a backend that raises instead of reporting
        return f"{type(exc).__name__}: {exc}"


__all__ = ["HISTORY_DIR", "aappend_section", "append_section", "history_path"]
