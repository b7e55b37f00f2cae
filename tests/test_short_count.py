"""Short texts are counted in the interpreter, to tiktoken's count, without a call into tiktoken."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from ctxwarden.core.counters import TiktokenCounter
from ctxwarden.core.short_count import MERGE_BUDGET, SHORT_CHARS, ShortCounter, merged


class _Spy:
    """A tiktoken encoding that counts the calls into it (and hands over its ranks and pattern as it is asked)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.calls = inner, inner.name, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls += 1
        return self.inner.encode_ordinary(text)  # type: ignore[no-any-return]


def _texts(seed: int, count: int) -> list[str]:
    """Prose, code, JSON arguments, numbers, contractions, whitespace runs and non-Latin text, up to `SHORT_CHARS`."""
    rnd = random.Random(seed)
    words = ["the", "Fix", "don't", "I'LL", "naïve", "café", "12345", "3.14", "’s", "—", "\u00a0"]
    words += ["日本語", "テスト", "🎉"]
    alphabet = string.printable + "éüß日本語🎉\u200b\u00a0—’"
    texts = []
    for i in range(count):
        size = rnd.randint(0, SHORT_CHARS)
        kind = i % 4
        if kind == 0:
            text = "".join(rnd.choice(alphabet) for _ in range(size))
        elif kind == 1:
            text = " ".join(rnd.choice(words) for _ in range(size // 5))
        elif kind == 2:
            command = "".join(rnd.choice(string.ascii_letters + " /._-\n\t") for _ in range(size // 2))
            text = json.dumps({"command": command, "timeout": rnd.randint(0, 999)})
        else:
            text = "\n".join(
                f"    def step_{n}(self, url: str) -> int:\n        return {n} * 2  " for n in range(size // 60)
            )
        texts.append(text[:SHORT_CHARS])
    return texts


def test_short_texts_count_as_tiktoken_counts_them(encoding: Any) -> None:
    short = ShortCounter.of(encoding)
    assert short is not None
    counted = 0
    for text in _texts(seed=11, count=2_000):
        tokens = short(text)
        if tokens is not None:
            counted += 1
            assert tokens == len(encoding.encode_ordinary(text)), text
    assert counted > 1_000  # most are counted here (random characters are often too costly to merge)


def test_a_short_text_never_calls_into_tiktoken(encoding: Any) -> None:
    spy = _Spy(encoding)
    counter = TiktokenCounter(spy)
    arguments = json.dumps({"command": "pytest tests/test_parser.py -k 'empty and not slow'"})
    assert counter(arguments) == len(encoding.encode_ordinary(arguments))
    assert counter("") == 0
    assert spy.calls == 0
    long = "word " * SHORT_CHARS
    assert counter(long) == len(encoding.encode_ordinary(long))
    assert spy.calls == 1  # a long text is tiktoken's


@pytest.mark.parametrize(
    "text",
    [
        " ".join(["qzxwvkjhgfdsaplm"] * 40),  # long pieces outside the vocabulary: merging them would cost too much
        "abc \ud800 def",  # a lone surrogate, which tiktoken repairs before it encodes
        "x" * (SHORT_CHARS + 1),
    ],
    ids=["costly-merge", "lone-surrogate", "too-long"],
)
def test_texts_not_counted_here_go_to_tiktoken_with_the_same_result(encoding: Any, text: str) -> None:
    short = ShortCounter.of(encoding)
    assert short is not None
    assert short(text) is None
    spy = _Spy(encoding)
    assert TiktokenCounter(spy)(text) == len(encoding.encode_ordinary(text))
    assert spy.calls == 1


def test_an_encoding_without_its_ranks_is_counted_by_tiktoken(encoding: Any) -> None:
    class Plain:
        name = "plain"

        def encode_ordinary(self, text: str) -> list[int]:
            return encoding.encode_ordinary(text)  # type: ignore[no-any-return]

    assert ShortCounter.of(Plain()) is None
    assert TiktokenCounter(Plain())("hello world") == 2


def test_merging_joins_the_lowest_ranked_pair_first_and_the_leftmost_of_equals() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5}
    assert merged(b"abc", ranks) == 1  # bc (3) joins before ab (4), then a + bc is abc (5)
    assert merged(b"ab", ranks) == 1
    assert merged(b"ca", ranks) == 2
    assert merged(b"abc", {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4}) == 2  # a + bc has no rank
    assert merged(b"aa", {b"a": 0, b"aa": 1}) == 1
    assert merged(b"aaa", {b"a": 0, b"aa": 1}) == 2  # the leftmost pair joins: aa + a, and "aaa" has no rank
    assert MERGE_BUDGET >= 16**2  # a piece of 16 bytes, as long words are, is merged here
