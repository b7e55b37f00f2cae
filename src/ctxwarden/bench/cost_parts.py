"""Where a strategy's cost goes: the fixed prompt, the history read from the cache, what is new, what is read again.

Two strategies can cost the same for opposite reasons: one keeps a long view that the
provider reads from its cache, the other keeps a short one that it changes often, so the
provider reads the tail of it again at the full price. Each call's input is split by the
prefix it shares with the call before it (the same split the cost is computed from):

- `fixed`: the tool schemas and the system prompt; cached on every call but the first,
  and no strategy can do without them;
- `history`: the messages after them that are read from the cache;
- `new`: messages the call before did not send, read at the full price: what arrived
  since, and the placeholders and summaries a strategy wrote in place of older ones;
- `reread`: messages the call before sent too, read again at the full price because
  something before them changed (a clearing batch, a mask, a fold): the cache miss a
  change costs;
- `summarizer`: the summarizer's requests, billed by the prefix they share with a call.

`fixed` and `new` together are close to a floor: a strategy that kept no history at all
and never changed a message would still pay about them (less only by what it shrinks at
arrival), so they say how much of a cost target is within any strategy's reach.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxwarden.bench.prices import PRICE_MODELS, PriceModel
from ctxwarden.bench.quality import BASELINE

PARTS = ("fixed", "history", "new", "reread", "summarizer")
"""The parts, in the order the table shows them."""


@dataclass(slots=True)
class CostParts:
    """Input tokens of one replay by part, each part cached and uncached."""

    fixed_cached: int = 0
    fixed_uncached: int = 0
    history_cached: int = 0
    new: int = 0
    reread: int = 0
    summarizer_cached: int = 0
    summarizer_uncached: int = 0

    def add_call(self, previous: Sequence[str], keys: Sequence[str], sizes: Sequence[int], fixed: int) -> int:
        """Count one call: `keys` and `sizes` of its tool schemas then its messages, `previous` the keys of the call
        before, `fixed` how many leading entries are the fixed prompt. Returns the tokens of the shared prefix."""
        shared = 0
        for theirs, ours in zip(previous, keys, strict=False):
            if theirs != ours:
                break
            shared += 1
        sent_before = Counter(previous[shared:])  # each message sent before is read again once: a repeat arrives
        cached = 0
        for position, (key, size) in enumerate(zip(keys, sizes, strict=True)):
            if position < shared:
                cached += size
                if position < fixed:
                    self.fixed_cached += size
                else:
                    self.history_cached += size
            elif position < fixed:
                self.fixed_uncached += size
            elif sent_before[key] > 0:
                sent_before[key] -= 1
                self.reread += size
            else:
                self.new += size
        return cached

    def add_summarizer(self, tokens: int, cached: int) -> None:
        self.summarizer_cached += cached
        self.summarizer_uncached += tokens - cached

    def add(self, other: CostParts) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def priced(self, price: PriceModel) -> dict[str, float]:
        """Each part's cost under `price`; together they are the replay's cost under it."""
        return {
            "fixed": price.cost(self.fixed_cached, self.fixed_uncached),
            "history": price.cost(self.history_cached, 0),
            "new": price.cost(0, self.new),
            "reread": price.cost(0, self.reread),
            "summarizer": price.cost(self.summarizer_cached, self.summarizer_uncached),
        }


def fixed_entries(messages: Sequence[Any]) -> int:
    """How many leading entries of a call are its fixed prompt: the tool schemas, then its system messages."""
    count = 1
    for message in messages:
        if getattr(message, "type", None) != "system":
            break
        count += 1
    return count


def priced_parts(parts: CostParts) -> dict[str, dict[str, int]]:
    """The parts' costs under every price model, rounded, for the bench's JSON."""
    return {price.name: {k: round(v) for k, v in parts.priced(price).items()} for price in PRICE_MODELS}


def parts_markdown(results: Sequence[dict[str, Any]], price: str = PRICE_MODELS[0].name) -> str:
    """One row per strategy and window: each part of its cost under `price` as a share of the baseline's whole cost at
    that window (absolute costs where no baseline ran)."""
    base = {
        r["window"]: sum(r["cost_parts"][price].values())
        for r in results
        if r["strategy"] == BASELINE and "cost_parts" in r and sum(r["cost_parts"][price].values())
    }
    head = (
        "| strategy | window | fixed prompt | history, cached | new to the call | read again | summarizer | total |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = []
    for r in results:
        if "cost_parts" not in r:
            continue
        parts = r["cost_parts"][price]
        scale = base.get(r["window"])
        shown = [parts[name] for name in PARTS] + [sum(parts.values())]
        cells = " | ".join(f"{v / scale:.3f}×" if scale else f"{v:,}" for v in shown)
        rows.append(f"| {r['strategy']} | {r['window']:,} | {cells} |")
    return head + "\n".join(rows) + "\n"


__all__ = ["PARTS", "CostParts", "fixed_entries", "parts_markdown", "priced_parts"]
