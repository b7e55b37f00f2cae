"""The text a model reads in a message, and how long text is cut: in one place for every layer that looks at it.

Clip, fold, the report and the benchmark all read message text and cut long lines; they
share these helpers rather than borrow them from one another, so no layer imports a
sibling just to read a message.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from langchain_core.messages import BaseMessage

TOKEN_DEFINITION = r"[A-Za-z_][A-Za-z0-9_]{5,}|\b\d{3,}\b|[\w.-]+/[\w./-]+"
"""Distinctive tokens — identifiers of 6+ characters, numbers of 3+ digits, paths — the details an agent reuses."""

TOKEN = re.compile(r"(?=[\w./-]{3})(?:[A-Za-z_][A-Za-z0-9_]{5,}+|\b\d{3,}+\b|[\w.-]++/[\w./-]+)")
"""`TOKEN_DEFINITION`, the same matches found about 1.5 times faster: a position without three word, dot, slash or
dash characters ahead starts no token, and a run the pattern has read is never read again from its middle (the
possessive `+`, as no shorter run could be followed by what the longer one was not)."""

FAILURE = re.compile(
    r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$"
    r"|^E\s{2,}\S"
    r"|\b(?:error|fatal)(?:\[\w+\])?:"
    r"|^FAILED\b|^FAIL:|^ERROR:?\s"
    r"|: command not found$|: No such file or directory$",
)
"""A line that says something failed: an exception line, pytest's `E`, a compiler's `error:`, a failed test."""

_FAILURE_START = re.compile(
    r"\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?$|E\s{2,}\S|FAILED\b|FAIL:|ERROR:?\s"
)
_FAILURE_WORD = re.compile(r"\b(?:error|fatal)(?:\[\w+\])?:")
_FAILURE_ENDS = (": command not found", ": No such file or directory")
"""`FAILURE` in parts: those at a line's start, read there only; the word anywhere; the ends (an unanchored search
tries every alternative at every character, several microseconds a line)."""

_FAILURE_HINT = re.compile(
    r"Error|Exception|Exit|Interrupt|Warning|E\s\s|error|fatal|FAIL|ERROR|command not found|No such"
)
"""What every line `FAILURE` matches holds: a text holding none has no failure line."""


def is_failure(line: str) -> bool:
    """Whether `FAILURE` matches `line`, each of its parts read only where it can match."""
    if _FAILURE_START.match(line) is not None:
        return True
    if ("error" in line or "fatal" in line) and _FAILURE_WORD.search(line) is not None:
        return True
    return line.removesuffix("\n").endswith(_FAILURE_ENDS)  # `$` matches before a last line break too


def content_text(content: str | list[Any]) -> str:
    """Text of a message's content; text blocks are joined with newlines, other blocks left out."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def message_text(message: BaseMessage) -> str:
    """What a model reads in a message: its content, then its tool calls' argument values."""
    parts = [content_text(message.content)]
    for call in getattr(message, "tool_calls", None) or ():
        parts.extend(value_text(value) for value in (call.get("args") or {}).values())
    return "\n".join(parts)


def text_of(message: BaseMessage) -> str:
    """The text of a message's content (a tool result, a reply); text blocks joined, other blocks left out."""
    return content_text(message.content)


def value_text(value: Any) -> str:
    """An argument value as the model reads it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def encode(text: str) -> bytes:
    """The exact bytes of a text (lone surrogates from undecodable output survive the round trip)."""
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    """The text of bytes written by `encode`."""
    return data.decode("utf-8", "surrogatepass")


_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where `str.splitlines` ends a line (`\\r\\n` is one break)."""

_OTHER_BREAK = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

CHUNK_CHARS = 1 << 16
"""`TextLines` splits a text into lines this many characters (and the rest of a line) at a time."""


class TextLines(Sequence[str]):
    """`text.splitlines()`, without holding every line at once.

    A list of a text's lines costs about 60 bytes a line on top of the text: 20 MB of short lines
    would need ten times their size. This sequence keeps where each chunk of about `CHUNK_CHARS`
    characters begins and how many lines it holds (found by counting line breaks, in C), and splits
    only the chunk a line is read from, keeping the last two split: reading lines in order (or
    going back and forth between a first and a last line) splits each chunk once, and memory stays
    a few chunks above the text, whatever its number of lines.
    """

    __slots__ = ("_cached", "_chunk_chars", "_firsts", "_starts", "text", "total")

    def __init__(self, text: str, chunk_chars: int = CHUNK_CHARS) -> None:
        self.text = text
        self._chunk_chars = chunk_chars
        self._starts: list[int] = []  # where each chunk begins in `text`
        self._firsts: list[int] = []  # the index of each chunk's first line
        self._cached: dict[int, list[str]] = {}  # the two chunks split last (a preview goes back and forth)
        position = total = 0
        while position < len(text):
            found = _LINE_BREAK.search(text, min(len(text), position + chunk_chars))
            end = len(text) if found is None else found.end()
            if end < len(text) and text[end - 1] == "\r" and text[end] == "\n":
                end += 1
            self._starts.append(position)
            self._firsts.append(total)
            if _OTHER_BREAK.search(text, position, end) is None:  # only `\n`: counted, not split
                total += text.count("\n", position, end) + (text[end - 1] != "\n")
            else:
                total += len(text[position:end].splitlines())
            position = end
        self.total = total

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.total)
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            out: list[str] = []
            while start < stop:
                chunk = bisect.bisect_right(self._firsts, start) - 1
                lines = self._chunk(chunk)
                first = self._firsts[chunk]
                out.extend(lines[start - first : stop - first])
                start = first + len(lines)
            return out
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(f"line {index} of a text of {self.total} lines")
        chunk = bisect.bisect_right(self._firsts, index) - 1
        return self._chunk(chunk)[index - self._firsts[chunk]]

    def __iter__(self) -> Iterator[str]:
        for chunk in range(len(self._starts)):
            yield from self._chunk(chunk)

    def run_end(self, start: int, continues: Callable[[str], bool]) -> int:
        """The index of the first line from `start` that `continues` is false of (`len(self)` if none, `start` past
        it), read a chunk at a time: a run of tens of thousands of lines would otherwise be looked up line by line."""
        index = start
        while index < self.total:
            chunk = bisect.bisect_right(self._firsts, index) - 1
            lines, first = self._chunk(chunk), self._firsts[chunk]
            for offset in range(index - first, len(lines)):
                if not continues(lines[offset]):
                    return first + offset
            index = first + len(lines)
        return index

    def _chunk(self, chunk: int) -> list[str]:
        lines = self._cached.get(chunk)
        if lines is None:
            end = self._starts[chunk + 1] if chunk + 1 < len(self._starts) else len(self.text)
            lines = self.text[self._starts[chunk] : end].splitlines()
            if len(self._cached) >= 2:
                del self._cached[next(iter(self._cached))]
            self._cached[chunk] = lines
        return lines


def error_line(text: str) -> str | None:
    """The line that best says why an output failed (the last failure line), stripped; `None` if it did not.

    One definition for every layer: a fold's facts quote this line for a failing command, and a
    cleared result's gist keeps it, so the line that says why a command failed stays in view.
    """
    if _FAILURE_HINT.search(text) is None:  # most outputs: one scan, not a search a line
        return None
    found = None
    for line in text.splitlines():
        if is_failure(line):
            found = line
    return found.strip() if found is not None and found.strip() else None


def one_line(text: str, limit: int) -> str:
    """`text` on one line (white space folded), cut to `limit` characters with a closing `…`."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printable(value: str) -> str:
    """`value` safe to print on a terminal: each character that is not printable (escape codes, carriage returns and
    line feeds, bidirectional overrides) written as its escape, `\\x1b`, `\\n`, `\\u202e`.

    Thread ids are chosen by clients and printed to the operator's terminal by the CLI and the report: raw, an id
    could retitle the window, clear the screen, or add a line that reads as another thread's row."""
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)


def cut_middle(text: str, max_chars: int) -> str:
    """`text` cut in the middle to about `max_chars` characters, saying how many were cut."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n… [{len(text) - max_chars:,} chars cut] …\n{text[-half:]}"


__all__ = [
    "CHUNK_CHARS",
    "FAILURE",
    "TOKEN",
    "TOKEN_DEFINITION",
    "TextLines",
    "content_text",
    "cut_middle",
    "decode",
    "encode",
    "error_line",
    "is_failure",
    "message_text",
    "one_line",
    "printable",
    "text_of",
    "value_text",
]
