"""Proof that nothing was lost: every original byte is in the model's view or reachable from it.

For each original tool output, the model's view must hold it verbatim, or show a way
back — a `recall(call_id=...)` reference (the id whole, or its end as a placeholder
shows it), the path of an evicted file, or for a folded turn the history file its
summary names — that really returns the exact original.
The demo reports the share of bytes that pass; the tests require all of them to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ctxwarden.clip.names import shown_id
from ctxwarden.clip.placeholders import RECALL_REFERENCE
from ctxwarden.clip.recall import original_result
from ctxwarden.clip.render import from_exact
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import decode, encode, text_of

HISTORY_REFERENCE = re.compile(r"The folded turns are in (\S+\.md)")


@dataclass(frozen=True, slots=True)
class Recoverability:
    """How much of the original output the model can still get to."""

    total_bytes: int
    recoverable_bytes: int
    lost: tuple[str, ...]
    """Call ids whose output is neither in the view nor reachable from it."""

    @property
    def fraction(self) -> float:
        return 1.0 if self.total_bytes == 0 else self.recoverable_bytes / self.total_bytes


def check_outputs(
    view: Sequence[BaseMessage], thread: Sequence[BaseMessage], originals: Mapping[str, str], backend: Any
) -> Recoverability:
    """Check every original output (by call id) against the model's `view` and the checkpointed `thread`."""
    shown = {m.tool_call_id: m for m in view if isinstance(m, ToolMessage)}
    histories = _histories(view, backend)
    in_thread = {m.tool_call_id: m for m in thread if isinstance(m, ToolMessage)}
    total = reachable = 0
    lost = []
    for call_id, original in originals.items():
        size = len(encode(original))
        total += size
        if call_id in shown:
            ok = _reachable(shown[call_id], call_id, original, thread, backend)
        else:
            ok = call_id in in_thread and _in_history(in_thread[call_id], original, histories, backend)
        if ok:
            reachable += size
        else:
            lost.append(call_id)
    return Recoverability(total, reachable, tuple(lost))


def _histories(view: Sequence[BaseMessage], backend: Any) -> str:
    """The text of the history files the view's summaries point to."""
    paths = {m.group(1) for message in view for m in HISTORY_REFERENCE.finditer(str(message.content))}
    if not paths or backend is None:
        return ""
    texts = []
    for response in backend.download_files(sorted(paths)):
        if response.error is None and response.content is not None:
            texts.append(decode(response.content))
    return "\n".join(texts)


def _in_history(message: ToolMessage, original: str, histories: str, backend: Any) -> bool:
    """A folded result: its full text is in the history file, or it was evicted (or rendered at arrival) and the file
    it names holds it."""
    if original in histories:
        return True
    record = message.response_metadata.get(METADATA_KEY) or {}
    if _raw_file_holds(record, histories, original, backend):
        return True
    path = record.get("path")
    if record.get("evicted") and path and path in histories and backend is not None:
        (response,) = backend.download_files([path])
        return response.error is None and response.content is not None and decode(response.content) == original
    return False


def _reachable(message: ToolMessage, call_id: str, original: str, thread: Sequence[BaseMessage], backend: Any) -> bool:
    text = text_of(message)
    if text == original:
        return True
    refs = {m.group("id") for m in RECALL_REFERENCE.finditer(text)}
    if refs & {call_id, shown_id(call_id)} and original_result(list(thread), call_id, backend) == original:
        return True
    record = message.response_metadata.get(METADATA_KEY) or {}
    if _raw_file_holds(record, text, original, backend):
        return True
    path = record.get("path")
    if path and path in text and backend is not None:
        (response,) = backend.download_files([path])
        return response.error is None and response.content is not None and decode(response.content) == original
    return False


def _raw_file_holds(record: Mapping[str, Any], named_in: str, original: str, backend: Any) -> bool:
    """An output rendered or made readable at arrival (`clip.render`): `named_in` names its raw file, and that file
    gives back the exact original."""
    path = record.get("raw_path")
    if not path or path not in named_in or backend is None:
        return False
    (response,) = backend.download_files([path])
    if response.error is not None or response.content is None:
        return False
    return from_exact(response.content, str(record.get("raw_encoding") or "strict")) == original


__all__ = ["Recoverability", "check_outputs"]
