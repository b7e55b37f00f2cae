"""File names of evicted results, derived from thread ids, namespaces and tool-call ids: safe, bounded, collision-free.

Ids come from users and providers and can hold anything: `../`, absolute paths, NUL
bytes, very long or non-ASCII text; each becomes a path component through
`ctxwarden.core.layout.safe_component` (`folder_name` for folders, which stay apart where case is ignored).

A call id is not unique within a thread: many model servers number calls per message
(`call_0` in every turn). So an evicted result's file is keyed by the call id *and* the
call itself — the id of the AI message that made it and its position there — and the
same key tells `recall` which of several results sharing an id is meant
(`recall(call_id="call_0#<key>")`). The key is derived, not random: a step re-run after
a crash writes the same file again instead of a second one. The same call run again with
another output (a thread resumed from an earlier checkpoint) goes beside the first
output's file (`variant_path`), never over it.

Some servers reuse an id within one message too (two parallel calls, both `call_0`). The
call being answered is then told from its twins by its arguments; twins with the same
arguments are keyed by their output as well, so each output still gets a file and a
reference of its own (the key is recorded with the output, and recall reads it from there).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxwarden.core.identity import KEY_SEPARATOR, call_key
from ctxwarden.core.layout import LARGE_RESULTS_DIR, NO_THREAD, folder_name, safe_component
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import text_of

NO_ID = "no-id"
"""How files and placeholders name an empty call id (a model server that sends `"id": ""`), and `recall` reads it."""


def issuing_key(messages: Sequence[BaseMessage], asked: Mapping[str, Any], call_id: str, output: str) -> str | None:
    """The call key of the call `asked` (a tool call being answered with `output`), from the latest AI message in
    `messages` that made a call with id `call_id`; `None` when no message did."""
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        twins = [(i, c) for i, c in enumerate(message.tool_calls) if c.get("id") == call_id]
        if not twins:
            continue
        if len(twins) == 1:
            return call_key(message.id, twins[0][0])
        same = [i for i, c in twins if c is asked] or [
            i for i, c in twins if c.get("name") == asked.get("name") and c.get("args") == asked.get("args")
        ]
        if len(same) == 1:
            return call_key(message.id, same[0])
        # twins with the same arguments, told apart only by what they returned
        digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return call_key(message.id, f"{(same or [twins[0][0]])[0]}:{digest}")
    return None


def recall_id(call_id: str, key: str | None) -> str:
    """The id a recall reference names: the call id, with the call key when there is one."""
    return f"{call_id}{KEY_SEPARATOR}{key}" if key else call_id


def split_recall_id(value: str) -> tuple[str, str | None]:
    """`(call id, call key or None)` from what a recall reference names."""
    call_id, sep, key = value.rpartition(KEY_SEPARATOR)
    if sep and len(key) == 8 and all(c in "0123456789abcdef" for c in key):
        return call_id, key
    return value, None


def content_hash(data: bytes) -> str:
    """The hash an eviction record keeps of the file it wrote (SHA-256, hex)."""
    return hashlib.sha256(data).hexdigest()


SHOWN_HASH = "shown_sha256"
"""Record key of the hash of the text an evicted or rendered result showed when ctxwarden wrote it."""


def shown_hash(message: BaseMessage) -> str:
    """The hash of the text `message` shows (`SHOWN_HASH`)."""
    return content_hash(text_of(message).encode("utf-8", "surrogatepass"))[:16]


def with_shown_hash(message: ToolMessage) -> ToolMessage:
    """`message`, its record keeping the hash of the text it shows (`record_of`)."""
    record = {**(message.response_metadata.get(METADATA_KEY) or {}), SHOWN_HASH: shown_hash(message)}
    return message.model_copy(update={"response_metadata": {**message.response_metadata, METADATA_KEY: record}})


def record_of(message: BaseMessage) -> Any:
    """ctxwarden's record on a tool result (`None` on other messages), unless the result's text changed since
    ctxwarden wrote it: a client that edits an evicted result in the thread (a redaction with `update_state`, the
    metadata copied along) makes what it says now the original, and the file it was evicted to no longer is one, for
    `recall`, the search or a placeholder. (A record written before the hash was kept cannot tell, and stands.)"""
    record = message.response_metadata.get(METADATA_KEY) if isinstance(message, ToolMessage) else None
    if isinstance(record, dict) and isinstance(kept := record.get(SHOWN_HASH), str) and kept != shown_hash(message):
        return None
    return record


def changed_file(record: Mapping[str, Any], data: bytes, *, raw: bool = False) -> bool:
    """Whether `data`, read from an evicted output's file (`raw`: the file of the raw output its arrival kept), is not
    what ctxwarden wrote (records without a hash, written before hashes were kept, cannot tell and count as
    unchanged)."""
    kept = record.get("raw_sha256" if raw else "sha256")
    return isinstance(kept, str) and kept != content_hash(data)


def variant_path(path: str, data: bytes) -> str:
    """Where `data` goes when the file at `path` already holds other bytes: `<path>-<12 hex of data's SHA-256>`.

    A call's file is keyed by the call, and a call can be run twice with two outputs that both stay in the thread:
    a run resumed from an earlier checkpoint (LangGraph's time travel, a fork in Studio) runs the same call again,
    and the first run's file is the only copy of its output, which its own branch still names. No other call's file
    has this name: those end in an 8-hex call key."""
    return f"{path}-{content_hash(data)[:12]}"


TAIL_MARK = "…"
"""Opens a call id shown by its last characters: `recall(call_id="…Sr5FeHu")`."""

SHOWN_TAIL_CHARS = 8
"""How many of a long call id's last characters a placeholder shows."""


def shown_id(call_id: str) -> str:
    """How a placeholder names `call_id`: whole when short, else by its last characters after `TAIL_MARK`.

    A provider's call id is 20 to 30 tokens of random characters, and a placeholder is paid for on every call while
    it stays in view; its last eight characters tell it from every other call of a thread (`recall` resolves them, and
    asks for the whole id in the rare thread where two calls share them)."""
    if not call_id:
        return NO_ID
    return call_id if len(call_id) <= 2 * SHOWN_TAIL_CHARS else TAIL_MARK + call_id[-SHOWN_TAIL_CHARS:]


def result_path(thread_id: str | None, namespace: str, call_id: str, key: str | None = None) -> str:
    """Backend path of an evicted result: `/large_tool_results/<thread>[/<namespace>]/<call id>[-<call key>]`.

    The namespace separates a subagent's files from its parent's on the same thread; the
    call key separates two calls of the thread that share a call id.
    """
    parts = [LARGE_RESULTS_DIR, folder_name(thread_id or NO_THREAD)]
    if namespace:
        parts.append(folder_name(namespace))
    parts.append(f"{safe_component(call_id)}-{key}" if key else folder_name(call_id))  # the key tells calls apart
    return "/" + "/".join(parts)


__all__ = [
    "KEY_SEPARATOR",
    "NO_ID",
    "SHOWN_HASH",
    "SHOWN_TAIL_CHARS",
    "TAIL_MARK",
    "call_key",
    "changed_file",
    "content_hash",
    "issuing_key",
    "recall_id",
    "result_path",
    "shown_id",
    "split_recall_id",
    "variant_path",
]
