"""The arrival stage before eviction: a tool result enters the thread as text a model can read, its raw bytes kept.

Three kinds of output are not, as they come, text worth a model's tokens:

- output written for a terminal (progress bars, colour, cursor movement) is rendered as a
  terminal shows it once the program ended (`clip.terminal`), and tail-capped;
- output holding bytes that are not valid UTF-8 (a Python string with lone surrogates, as
  `errors="surrogateescape"` decodes them) is shown with those bytes as `\\xNN`; a checkpoint
  could not store them, and a file of them would not open with `read_file`;
- a tool that returns `bytes` reaches the middleware as the `repr` langchain made of them;
  they are shown decoded, undecodable bytes as `\\xNN` (binary data, holding NUL bytes, as
  Python writes bytes, and never rendered as terminal output).

In each case the exact original goes to a file beside the result's own path (`<path>.raw`),
the message says how much it saved and how to get the original back
(`recall(call_id=..., part="raw")`), and its metadata records the file and how its bytes
decode, so `recall` returns the original exactly. Eviction then runs on what arrived.
Plain text (none of these) is not touched, and costs three substring scans.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage

from ctxwarden.clip.names import content_hash, with_shown_hash
from ctxwarden.clip.terminal import render, terminal_output
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import text_of

RAW_SUFFIX = ".raw"
"""The file of a result's exact original: its own path plus this."""

SURROGATES = re.compile("[\ud800-\udfff]")
"""Lone surrogates: how undecodable bytes of a tool's output survive in a Python string."""

_ESCAPED = re.compile("[\ud800-\udc7f\udd00-\udfff]")
"""Lone surrogates that `surrogateescape` did not make (no single byte stands behind them)."""

HEAD_SHARE = 8
"""A capped rendering keeps a head of `1 / HEAD_SHARE` of its tail cap."""


def exact_bytes(text: str) -> tuple[bytes, str]:
    """The bytes `text` stands for, and the error handler that decodes them back to `text` exactly.

    A lone surrogate from `surrogateescape` decoding stands for one byte, written as that byte;
    any other lone surrogate can only be kept as its own encoding (`surrogatepass`)."""
    if not SURROGATES.search(text):
        return text.encode("utf-8"), "strict"
    scheme = "surrogatepass" if _ESCAPED.search(text) else "surrogateescape"
    return text.encode("utf-8", scheme), scheme


def from_exact(data: bytes, scheme: str) -> str:
    """The original text of bytes written by `exact_bytes` (or the bytes a tool returned, `scheme="bytes"`)."""
    if scheme == "bytes":
        return repr(data)  # what the tool's message held
    return data.decode("utf-8", scheme)


def readable(data: bytes) -> str:
    """`data` as text a model reads and any file tool opens: UTF-8, each undecodable byte as `\\xNN`.

    Binary data (it holds a NUL byte, which no text does) is written as Python writes bytes instead (each byte that
    is not printable ASCII escaped, newlines too): by the C codec for bytes literals, where decoding random bytes
    with an error handler takes a call per undecodable run, and into a string of one byte a character (random bytes
    read as UTF-8 hold a few four-byte characters, and Python then stores every character of the string in four)."""
    if b"\x00" in data:
        return codecs.escape_encode(data)[0].decode("ascii")
    return data.decode("utf-8", "backslashreplace")


def returned_bytes(text: str) -> bytes | None:
    """The bytes a tool returned, when `text` is exactly the `repr` langchain made of them.

    Decoded by the C codec that reads bytes literals (linear, no parse tree: a 20 MB `repr` costs its size), and taken
    only when the bytes give back `text` exactly, so a text that merely starts with `b'` is left as it is.
    """
    if len(text) < 3 or text[0] != "b" or text[1] not in "'\"" or text[-1] != text[1] or not text.isascii():
        return None
    body = text[2:-1].encode("ascii")
    try:
        value = codecs.escape_decode(body)[0]
    except (ValueError, UnicodeError):
        return None
    if text[1] == "'":  # the C codec writes what `repr` writes between single quotes, without a str of it
        return value if codecs.escape_encode(value)[0] == body else None
    return value if repr(value) == text else None


def tail_capped(text: str, cap: int) -> tuple[str, str | None, int, int]:
    """`(head, tail, bytes cut, lines cut)`: `text` cut to a head of `cap // HEAD_SHARE` bytes and a tail of `cap`
    bytes at line ends; `(text, None, 0, 0)` when it fits."""
    head_size = cap // HEAD_SHARE
    if len(text) * 4 <= cap + head_size:  # fits whatever its characters' sizes: no need to encode
        return text, None, 0, 0
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap + head_size:
        return text, None, 0, 0
    head_end = data.rfind(b"\n", 0, head_size) + 1
    tail_start = data.find(b"\n", len(data) - cap) + 1 or len(data) - cap
    cut, cut_lines = tail_start - head_end, data.count(b"\n", head_end, tail_start)
    head = data[:head_end].decode("utf-8", "surrogatepass")
    tail = data[tail_start:].decode("utf-8", "surrogatepass")
    return head, tail, cut, cut_lines


@dataclass(slots=True)
class Arrival:
    """Plans what a tool result becomes at arrival (see the module docstring); `policy` says what is rendered."""

    policy: ContextPolicy
    meter: TokenMeter

    def plan(
        self, message: ToolMessage, tool: str, path: str, reference: str, key: str | None = None
    ) -> tuple[str, bytes, ToolMessage, dict] | None:
        """`(raw path, raw bytes, the message as it enters, event)`, or `None` when it enters as it is. `key` is the
        call's key (`clip.names.issuing_key`), kept so that an eviction of the rendered text names the same call."""
        text = text_of(message)
        returned = returned_bytes(text) if text.startswith("b") else None
        surrogates = returned is None and SURROGATES.search(text) is not None
        cap = self.policy.render_cap(tool)
        if returned is None and not surrogates and (cap is None or not terminal_output(text)):
            return None
        raw_path = path + RAW_SUFFIX
        if returned is not None:
            data, scheme = returned, "bytes"
            # binary bytes show as Python writes them, which between single quotes is what arrived
            shown = text[2:-1] if text[1] == "'" and b"\x00" in data else readable(data)
        elif surrogates:
            data, scheme = exact_bytes(text)
            shown = readable(data)
        else:
            data, scheme = text.encode("utf-8"), "strict"
            shown = text
        del text
        recall_raw = f'recall(call_id="{reference}", part="raw")'
        notes: list[str] = []
        cut = cut_lines = 0
        binary = scheme != "strict" and b"\x00" in data  # shown by `readable` as Python writes bytes
        rendered = cap is not None and not binary and terminal_output(shown)
        if rendered and cap is not None:
            head, tail, cut, cut_lines = tail_capped(render(shown).text, cap)
            shown = head
            if tail is not None:
                shown += (
                    f"… [ctxwarden: {cut:,} bytes ({cut_lines:,} lines) of this output, as a terminal shows it, "
                    f"cut here; every byte of the raw output is in {raw_path}: {recall_raw}] …\n{tail}"
                )
            del head, tail
        if returned is not None:
            notes.append(
                f"this {tool} output is {len(data):,} bytes, not text: shown "
                + ("as Python writes bytes (\\xNN, \\n)" if binary else "with each byte that is not UTF-8 as \\xNN")
            )
        elif surrogates:
            notes.append(f"this {tool} output holds bytes that are not valid UTF-8, shown as \\xNN")
        raw_tokens, counted = self.meter.estimate_tokens(message)  # only reported: the original leaves the view
        about = "" if counted else "about "
        if rendered:
            notes.append(
                f"shown as a terminal shows it ({about}{raw_tokens:,} tokens raw: frames collapsed, colour codes "
                "dropped)"
            )
        if scheme == "strict":
            where = f'raw: read_file(file_path="{raw_path}") or {recall_raw}'
        else:
            where = f"{recall_raw} gives the exact original (its bytes are kept in {raw_path})"
        body = f"{shown}\n[ctxwarden: {'; '.join(notes)}; {where}.]"
        record = {
            **(message.response_metadata.get(METADATA_KEY) or {}),
            "raw_path": raw_path,
            "raw_encoding": scheme,
            "raw_sha256": content_hash(data),  # recall checks the raw file against it, as it checks an evicted file
            "rendered": rendered,
            "key": key,
        }
        arrived = with_shown_hash(
            message.model_copy(
                update={
                    "content": body
                    if isinstance(message.content, str)
                    else [{"type": "text", "text": body}, *_other_blocks(message)],
                    "response_metadata": {**message.response_metadata, METADATA_KEY: record},
                }
            )
        )
        tokens, _counted = self.meter.estimate_tokens(arrived)  # eviction counts it whole if it stays in view
        if scheme == "strict" and tokens >= raw_tokens:  # a few codes cost less than the note that would replace them
            return None
        event = {
            "tool": tool,
            "raw_path": raw_path,
            "raw_bytes": len(data),
            "raw_tokens": raw_tokens,
            **({} if counted else {"raw_tokens_estimated": True}),
            "tokens": tokens,
            "freed": max(0, raw_tokens - tokens),
            "rendered": rendered,
            "encoding": scheme,
            "cut_bytes": cut,
        }
        return raw_path, data, arrived, event


def _other_blocks(message: ToolMessage) -> list[Any]:
    if isinstance(message.content, str):
        return []
    return [b for b in message.content if isinstance(b, dict) and b.get("type") != "text"]


__all__ = [
    "RAW_SUFFIX",
    "SURROGATES",
    "Arrival",
    "exact_bytes",
    "from_exact",
    "readable",
    "returned_bytes",
    "tail_capped",
]
