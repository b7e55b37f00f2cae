"""A thread's totals from the trace's rows: the spend per role and the lifecycle per kind, as every store sums them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def spend_of(rows: Iterable[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """`spend()` from rows of (role, calls, input, output, cached input); an event without a role counts as `main`."""
    return {
        str(role or "main"): {
            "calls": int(calls),
            "input_tokens": int(inp or 0),
            "output_tokens": int(out or 0),
            "cached_input_tokens": int(cached or 0),
        }
        for role, calls, inp, out, cached in rows
    }


def lifecycle_of(rows: Iterable[Sequence[Any]]) -> dict[str, dict[str, int]]:
    """`lifecycle()` from rows of (kind, count, tokens, freed)."""
    return {
        str(kind): {"count": int(n), "tokens": int(tokens or 0), "freed": int(freed or 0)}
        for kind, n, tokens, freed in rows
    }


__all__ = ["lifecycle_of", "spend_of"]
