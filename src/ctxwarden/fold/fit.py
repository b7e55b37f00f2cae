"""A fold's summary sized to the room the fold leaves, so the call after it is inside the window.

The facts are capped at a share of the window (`fold_facts_share`) and the summary asked for in words from the window
(`fold_keep_share`), whatever the system prompt and the tool schemas take. Beside a deep agent's tools (2,700 tokens
of schemas) and a 2,700-token system prompt, an 8k window leaves 2,600 tokens; a summary of 1,900 (log lines in the
facts count 1.7 times their characters' share) and the newest step put 56 of 61 calls past the window, and the forced
round could not help: every fold was the one that overflowed. Now a fold asks for no more words than half the room it
leaves, and cuts its facts (the oldest lines first, as their cap does) until the call after it, with a gauge note,
is within the window. Neither binds while the summary fits; what the facts leave out is in the history file the
summary names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from ctxwarden.core.meter import TokenMeter
from ctxwarden.fold.facts import quoted, render
from ctxwarden.fold.plan import FoldInput, Gathered
from ctxwarden.fold.summarize import TOKENS_PER_WORD

NOTE_ALLOWANCE = 120
"""Tokens the call after a fold may carry besides its messages: a gauge note (`core.gauge_note`, 112 at most)."""

MIN_WORDS = 150
"""A summary is asked for this many words at least, however little room the fold leaves."""

_CUT_STEPS = 8
"""Times the facts' characters are cut, each to what the tokens over the room leave, before the floor is taken (the
user's latest message, the paths written and the latest failure, which `fold.facts.quoted` always keeps)."""


def summary_room(given: FoldInput, pinned: Sequence[BaseMessage], cut: int, meter: TokenMeter) -> int:
    """Tokens (as counted, before calibration) the summary message of a fold of `given.view[:cut]` may take: what the
    window leaves beside the system prompt, the tool schemas, the pinned task, the turns kept and a gauge note."""
    kept = meter.messages_tokens([*pinned, *given.view[cut:]])
    return int(given.window / max(given.factor, 1e-9)) - NOTE_ALLOWANCE - given.fixed_tokens - kept


def words_within(words: int, room: int) -> int:
    """`words`, or fewer: no more than half of `room` in prose (the facts take the other half), `MIN_WORDS` at least."""
    return max(MIN_WORDS, min(words, int(room / 2 / TOKENS_PER_WORD)))


def facts_within(gathered: Gathered, over: int, counter: Callable[[str], int]) -> Gathered:
    """`gathered` with its section `over` tokens shorter, or as short as its floor allows: older lines go first."""
    allowed = counter(gathered.quoted) - over
    chars = len(gathered.quoted)
    facts, text = gathered.facts, gathered.quoted
    for _step in range(_CUT_STEPS):
        tokens = counter(text)
        if tokens <= allowed or chars <= 1:
            break
        chars = max(1, int(chars * allowed / tokens) - 1 if allowed > 0 else 1)
        facts = quoted(gathered.facts, max_chars=chars)
        text = render(facts, max_chars=chars)
    return Gathered(facts, text)


__all__ = ["MIN_WORDS", "NOTE_ALLOWANCE", "facts_within", "summary_room", "words_within"]
