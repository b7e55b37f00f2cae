"""The gauge: one reading of how full a window is, shared by every surface.

The demo table, the middleware's per-call record and (later) the /context report
all call `gauge_level`, so a thread never reads `warn` in one place and `ok` in
another.
"""

from __future__ import annotations

from typing import Literal

from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy

GaugeLevel = Literal["ok", "warn", "critical"]


def gauge_level(fraction: float, policy: ContextPolicy = DEFAULT_POLICY) -> GaugeLevel:
    """`ok` below `policy.warn_at`, `warn` from it, `critical` from `policy.critical_at`."""
    if fraction >= policy.critical_at:
        return "critical"
    if fraction >= policy.warn_at:
        return "warn"
    return "ok"


__all__ = ["GaugeLevel", "gauge_level"]
