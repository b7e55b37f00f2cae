"""Short texts counted in the interpreter with tiktoken's own ranks: the same count, and the GIL kept.

tiktoken lets go of the GIL on every call, however short the text. In a process whose
other threads are busy (LangGraph writing checkpoints, the trace writer, gists made
ahead), the calling thread then waits to get the interpreter back: a 14-token count took
1.5 ms beside one busy thread, against 5 µs here. A model call counts a few short texts
of its own (the reply's tool arguments, as the stamp carries them), so each was a chance
to hold the call up by a millisecond or more.

So a text of at most `SHORT_CHARS` characters is split by the encoding's own
pre-tokenizer pattern (with the `regex` module, which tiktoken itself requires, told to
keep the GIL) and each piece is merged as tiktoken merges it: a piece in the vocabulary
is one token, else the adjacent pair of lowest rank is joined first, the leftmost of
equals, until no pair has a rank. Merging is quadratic in a piece's length, so a text whose
pieces would cost more than `MERGE_BUDGET` (a run of letters with no break), or that is not
valid UTF-8, gives `None`: tiktoken counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import regex

SHORT_CHARS = 512
"""Texts up to this many characters are counted here: about 50 µs of words, code or JSON (tiktoken: 35 µs)."""

MERGE_BUDGET = 1_024
"""The squared lengths, in bytes, of the pieces one text may merge here (about 50 µs at most)."""


class ShortCounter:
    """Counts a short text exactly as the encoding it was made from does, without letting go of the GIL."""

    __slots__ = ("_pattern", "_ranks")

    def __init__(self, ranks: Mapping[bytes, int], pattern: str) -> None:
        self._ranks = ranks
        self._pattern = regex.compile(pattern)

    @classmethod
    def of(cls, encoding: Any) -> ShortCounter | None:
        """The counter for a tiktoken `Encoding`, or `None` when it does not expose its ranks and pattern."""
        ranks = getattr(encoding, "_mergeable_ranks", None)
        pattern = getattr(encoding, "_pat_str", None)
        if not isinstance(ranks, dict) or not isinstance(pattern, str):
            return None
        try:
            return cls(ranks, pattern)
        except regex.error:
            return None

    def __call__(self, text: str) -> int | None:
        """Tokens of `text`, or `None` when it is not one to count here (too long, too costly to merge, not UTF-8)."""
        if len(text) > SHORT_CHARS:
            return None
        ranks = self._ranks
        total = work = 0
        for piece in self._pattern.findall(text, concurrent=False):
            try:
                data = piece.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: tiktoken's own path repairs it
                return None
            if data in ranks:
                total += 1
                continue
            work += len(data) ** 2
            if work > MERGE_BUDGET:
                return None
            total += merged(data, ranks)
        return total


def merged(data: bytes, ranks: Mapping[bytes, int]) -> int:
    """How many tokens byte-pair merging leaves of `data`: lowest-ranked adjacent pair first, leftmost of equals."""
    parts = [data[i : i + 1] for i in range(len(data))]
    while len(parts) > 1:
        best, best_rank = -1, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank < 0 or rank < best_rank):
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return len(parts)


__all__ = ["MERGE_BUDGET", "SHORT_CHARS", "ShortCounter", "merged"]
