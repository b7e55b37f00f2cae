"""The placeholders that stand in for cleared results and clipped arguments.

Each names what was removed, its size, and how to get it back — `recall(call_id=...)`,
and the file for an evicted result — so nothing leaves the model's view without a way
back. A cleared result keeps its gist; a clipped argument (a script, a file body the agent
wrote) keeps its first line and the lines that write a file, whole and verbatim, so the paths
it wrote stay in view as long as the call does. (Keeping more of a script's lines, chosen as
a gist's are, was measured on recorded sessions: the larger view folded sooner and kept less.)
A call whose every result is out of the view loses its text as well: the reasoning about a result leaves with
the result (whose gist keeps the lines worth keeping), the call itself stays. (Measured on recorded sessions: the
smaller view clears and folds less often, and keeps more of what the agent later uses.)
They are built from the message alone, so the same message always gets the same bytes:
consecutive calls share their prefix and a provider's prompt cache keeps hitting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from ctxwarden.clip.media_files import media_count
from ctxwarden.clip.names import record_of, shown_id
from ctxwarden.core.gist import MAX_LINE_CHARS, Gist, render
from ctxwarden.core.media import media_of
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.writes import lines_writes

RECALL_REFERENCE = re.compile(r'recall\(call_id="(?P<id>[^"]+)"(?:, part="(?P<part>args|result)")?\)')
"""Finds the recall calls a placeholder or preview offers."""

ARG_VALUE_MIN_CHARS = 200
"""Argument values at least this long (as JSON) are replaced inside a clipped call."""

NAME_MAX_CHARS = 80
"""A small argument value up to this long, on one line, stays when its call's arguments are clipped as a whole."""

CLIPPED_KEY = "ctxwarden_clipped"
"""The key that holds the pointer of arguments clipped as a whole."""

FIRST_LINE_MAX_CHARS = 160
"""A clipped text argument keeps its first line, verbatim, when it is no longer than this."""


def result_placeholder(message: ToolMessage, tokens: int, excerpt: Gist | None = None) -> ToolMessage:
    """`message` with its content replaced by a pointer back to it, and the excerpt's verbatim lines after it.

    The pointer is short, as every call pays for it while the result stays cleared: the tool's name is in the call
    just before it, a long call id is named by its end (`shown_id`), what `recall` returns is in the tool's
    description, and a `…` line marks each span the excerpt leaves out."""
    record = record_of(message) or {}
    where = f"; full output in {record['path']}" if record.get("evicted") else ""
    media = media_of(message)
    size = f"{tokens:,} tokens" + (f", {media_count(media)}" if media else "")
    text = f'[cleared, {size}: recall(call_id="{shown_id(message.tool_call_id)}"){where}]'
    if excerpt is not None and excerpt.shown_lines:
        text += f"\n{excerpt.text}"
    return message.model_copy(
        update={
            "content": text,
            "artifact": None,
            "response_metadata": {**message.response_metadata, METADATA_KEY: {**record, "cleared": True}},
        }
    )


def args_placeholder(message: AIMessage, call_ids: set[str], *, keep_text: bool = True) -> AIMessage:
    """`message` with the large arguments of the calls in `call_ids` replaced; ids and names stay valid.

    Without `keep_text` its text is left out too (every result it called for is out of the view): the calls stay,
    and `recall(call_id=..., part="text")` returns the text."""
    return clip_calls(message, call_ids, keep_text=keep_text)[0]


def clip_calls(
    message: AIMessage, call_ids: set[str], *, keep_text: bool = True, lines: Sequence[int] | None = None
) -> tuple[AIMessage, tuple[int, ...]]:
    """`args_placeholder`, and the lines each clipped value keeps (`LINES_END` after each value): the clearing
    boundary carries them, so a process that resumes the thread renders the same placeholder from `lines` without
    reading the arguments' lines again. `lines` that do not fit the arguments are not used."""
    given = _groups(lines)
    groups = len(given) if given is not None else 0
    kept: list[int] = []
    calls = []
    for call in message.tool_calls:
        if call.get("id") in call_ids:
            call = {**call, "args": _clip_args(str(call["id"]), call.get("args") or {}, given, kept)}
        calls.append(call)
    if given is not None and (given or kept.count(LINES_END) != groups):  # not this message's lines
        return clip_calls(message, call_ids, keep_text=keep_text)
    content: Any = message.content
    if isinstance(content, list):  # provider-native tool_use blocks repeat the arguments
        clipped = {c["id"]: c["args"] for c in calls if c.get("id") in call_ids}
        content = [
            {**b, "input": clipped[b["id"]]} if isinstance(b, dict) and b.get("id") in clipped and "input" in b else b
            for b in content
        ]
    marks: dict[str, Any] = {"clipped_args": sorted(call_ids)}
    if not keep_text:
        content = [b for b in content if not _is_text(b)] if isinstance(content, list) else ""
        marks["text_cleared"] = True
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in {"tool_calls", "function_call"}}
    record = message.response_metadata.get(METADATA_KEY) or {}
    shown = message.model_copy(
        update={
            "tool_calls": calls,
            "content": content,
            "additional_kwargs": extra,
            "response_metadata": {**message.response_metadata, METADATA_KEY: {**record, **marks}},
        }
    )
    return shown, tuple(kept)


LINES_END = -1
"""Ends each clipped value's lines in what `clip_calls` returns and takes back."""


def _groups(lines: Sequence[int] | None) -> list[list[int]] | None:
    """`lines` as `clip_calls` returned them, one list per clipped value, oldest last (popped in order)."""
    if not lines or lines[-1] != LINES_END:
        return None
    groups: list[list[int]] = [[]]
    for index in lines[:-1]:
        if index == LINES_END:
            groups.append([])
        else:
            groups[-1].append(index)
    groups.reverse()
    return groups


def has_text(message: AIMessage) -> bool:
    """Whether `message` says anything besides its calls."""
    content = message.content
    return bool(content) if isinstance(content, str) else any(_is_text(b) and _block_text(b) for b in content)


def _block_text(block: Any) -> str:
    return block if isinstance(block, str) else str(block.get("text") or "")


def _is_text(block: Any) -> bool:
    """A text block of a list content (a provider's tool-use, thinking and other blocks are kept)."""
    return isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")


def _clip_args(call_id: str, args: dict[str, Any], given: list[list[int]] | None, kept: list[int]) -> dict[str, Any]:
    """`args` with each large value replaced; the lines each keeps are appended to `kept`, taken from `given` (the
    same, from another process) when they fit the value."""
    note = f'recall(call_id="{shown_id(call_id)}", part="args")'
    clipped: dict[str, Any] = {}
    for key, value in args.items():
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        if size >= ARG_VALUE_MIN_CHARS:
            lines = value.splitlines() if isinstance(value, str) else []
            stored = given.pop() if given else None
            fits = stored is not None and stored == sorted(set(stored)) and all(0 <= i < len(lines) for i in stored)
            chosen = stored if fits and stored is not None else args_lines(lines)
            kept.extend((*chosen, LINES_END))
            clipped[key] = f"[clipped {size:,} chars: {note}]" + (f"\n{render(lines, chosen)}" if chosen else "")
        else:
            clipped[key] = value
    if clipped == args:  # many small values: the ones that name something stay, the others go under one pointer
        size = len(json.dumps(args, ensure_ascii=False, default=str))
        named = {key: value for key, value in args.items() if _names_something(value)}
        return {
            **(named if len(named) < len(args) else {}),
            CLIPPED_KEY: f"[clipped {size:,} chars of arguments: {note}]",
        }
    return clipped


def _names_something(value: Any) -> bool:
    """A value short enough to say which file or line a call was about (a path, a number, a flag): an edit's path
    stays in view when its strings are clipped."""
    if isinstance(value, str):
        return len(value) <= NAME_MAX_CHARS and "\n" not in value
    return isinstance(value, int | float | bool) or value is None


def args_lines(lines: list[str]) -> list[int]:
    """Indexes of the lines a clipped text argument keeps, in order: its first line when short (a command's head
    names what it runs or writes), and every line that writes a file, each whole."""
    keep: list[int] = []
    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    if first is not None and len(lines[first]) <= FIRST_LINE_MAX_CHARS:
        keep.append(first)
    writes = lines_writes(lines)
    keep += [
        index for index, line in enumerate(lines) if index != first and len(line) <= MAX_LINE_CHARS and writes[index]
    ]
    return sorted(keep)


def text_cleared(message: Any) -> bool:
    """Whether `message` is a call shown without its text (every result it called for is cleared)."""
    return _marked(message, "text_cleared")


def is_cleared(message: Any) -> bool:
    return _marked(message, "cleared")


def _marked(message: Any, mark: str) -> bool:
    record = getattr(message, "response_metadata", {}).get(METADATA_KEY)
    return isinstance(record, dict) and bool(record.get(mark))


__all__ = [
    "ARG_VALUE_MIN_CHARS",
    "LINES_END",
    "RECALL_REFERENCE",
    "args_lines",
    "args_placeholder",
    "clip_calls",
    "has_text",
    "is_cleared",
    "result_placeholder",
    "text_cleared",
]
