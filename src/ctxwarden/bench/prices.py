"""Price models for cached and uncached input: which strategy is cheaper depends on them.

A view that is larger but better cached wins when a cached read is cheap and can lose when
it is not, or when writing the cache costs extra. Every cost the bench reports is computed
from the same two counts per call and per summarizer request (tokens of the prefix shared
with an earlier call, and the rest), under each model here:

- `base`: cached read 0.1, uncached 1.0 (OpenAI-style automatic caching);
- `anthropic`: cache read 0.1, cache write 1.25 (every uncached token is written, as with a
  breakpoint at the end of each request; summarizer requests the same way);
- `cached-0.25`: cached read 0.25, uncached 1.0 (providers whose cached discount is smaller).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PriceModel:
    """Relative price of an input token read from the cache and of one that is not."""

    name: str
    cached: float
    """Price of a cached input token (relative to an uncached one at list price)."""
    uncached: float
    """Price of an input token past the cached prefix (a cache write where writing costs extra)."""

    def cost(self, cached_tokens: float, uncached_tokens: float) -> float:
        return self.cached * cached_tokens + self.uncached * uncached_tokens


PRICE_MODELS: tuple[PriceModel, ...] = (
    PriceModel("base", 0.1, 1.0),
    PriceModel("anthropic", 0.1, 1.25),
    PriceModel("cached-0.25", 0.25, 1.0),
)
"""Every price model the bench reports; the first is the one `cache_cost` uses."""

__all__ = ["PRICE_MODELS", "PriceModel"]
