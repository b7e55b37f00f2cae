"""The figures of the /context report, as data: what the forecast and the renderers read.

`ContextReport` (in `ctxwarden.report.context`) is these figures plus the methods that
render and forecast them; the renderers and the forecast depend on the figures only, so
the imports run one way: figures ← forecast ← render ← context ← build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy

CATEGORIES = (
    "system prompt",
    "tool schemas",
    "skills index",
    "memory index",
    "instruction files",
    "summary",
    "user messages",
    "assistant messages",
    "tool results",
    "cleared placeholders",
)
"""What a call carries, in the order the report lists it (then `free` and `reserved`)."""

PLACEHOLDER_TOKENS = 40
"""About what a cleared result's placeholder costs; subtracted from what clearing frees."""


@dataclass(frozen=True, slots=True)
class ReportFigures:
    """The figures of a /context report: usage by category against the window, thresholds, spend.

    The forecast and the renderers read these; `ContextReport` adds the methods that
    call them, so the renderers need not import the class that calls them.
    """

    thread_id: str | None
    model: str
    window: int
    window_source: str
    used: int
    categories: Mapping[str, int]
    clear_at: int
    clear_to: int
    fold_at: int
    clearable: int
    calls: int
    last_input_tokens: int | None
    added_since: int
    spend: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    lifecycle: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    policy: ContextPolicy = DEFAULT_POLICY
    out_of_reach: Mapping[str, int] = field(default_factory=dict)
    """Tokens no clearing batch can remove, by what they are (see `ctxwarden.report.forecast`)."""
    counter: str = ""
    """What the meter counted with: `tiktoken:<encoding>`, or `approximate` (4 characters a token)."""
    basis: str = "last call"
    """`"last call"`: the last call's input tokens plus what was added since; `"current view"`: measured now,
    because the view changed after the last call (a fold done by `compact()`)."""
    trace_found: bool = True
    """Whether a trace was found: without one, `spend` and `lifecycle` are unknown, not zero."""
    gauge_notes: tuple[Mapping[str, Any], ...] = ()
    """The gauge notes the model received, oldest first: the call that carried each (`call`, counted from 1),
    its `gauge` and `fraction`, and the `note` itself (see `ctxwarden.core.gauge_note`)."""

    @property
    def fraction(self) -> float:
        """`used` as a share of the window."""
        return self.used / self.window

    @property
    def gauge(self) -> GaugeLevel:
        """ok / warn / critical, from the shared gauge function."""
        return gauge_level(self.fraction, self.policy)

    @property
    def free(self) -> int:
        """Tokens left before the fold threshold."""
        return max(0, self.fold_at - self.used)

    @property
    def reserved(self) -> int:
        """Headroom kept above the fold threshold (what is left of it)."""
        return min(self.window - self.fold_at, max(0, self.window - self.used))

    @property
    def next_clear_frees(self) -> int:
        """About how many tokens the next clearing batch frees (down to `clear_to`, at most what is clearable)."""
        return min(self.clearable, max(0, max(self.used, self.clear_at) - self.clear_to))

    def rows(self) -> list[tuple[str, int]]:
        """Every category with its tokens, then `free` and `reserved`: they add up to the window (or more)."""
        return [
            *((name, self.categories.get(name, 0)) for name in CATEGORIES),
            ("free", self.free),
            ("reserved", self.reserved),
        ]


__all__ = ["CATEGORIES", "PLACEHOLDER_TOKENS", "ReportFigures"]
