"""`ContextReport`: the /context report's figures, with their forecast, JSON form and renderings.

Printing a report, showing it in Jupyter or with rich goes through the hooks here
(`__str__`, `_repr_html_`, `__rich__`); they call the renderers, which read only the
figures (`ctxwarden.report.figures`), so nothing imports back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxwarden.report import forecast as forecasting
from ctxwarden.report.figures import ReportFigures
from ctxwarden.report.render import report_html, report_rich, report_text


@dataclass(frozen=True, slots=True)
class ContextReport(ReportFigures):
    """A thread's context against its window: usage by category, thresholds, forecast, spend."""

    def forecast(self) -> list[str]:
        """What the next clear and fold will do, in words (only what the policy will do)."""
        return forecasting.forecast(self)

    @property
    def warning(self) -> str | None:
        """Set when the fixed part of every call takes most of the window."""
        return forecasting.overhead_warning(self)

    def to_dict(self) -> dict[str, Any]:
        """Every figure, JSON-safe."""
        return {
            "thread_id": self.thread_id,
            "model": self.model,
            "window": self.window,
            "window_source": self.window_source,
            "used": self.used,
            "fraction": round(self.fraction, 4),
            "gauge": self.gauge,
            "categories": dict(self.rows()),
            "clear_at": self.clear_at,
            "clear_to": self.clear_to,
            "fold_at": self.fold_at,
            "next_clear_frees": self.next_clear_frees,
            "forecast": self.forecast(),
            "min_clear_batch": forecasting.min_batch(self),
            "out_of_reach": dict(self.out_of_reach),
            "warning": self.warning,
            "counter": self.counter,
            "calls": self.calls,
            "last_input_tokens": self.last_input_tokens,
            "added_since": self.added_since,
            "spend": {role: dict(values) for role, values in self.spend.items()} if self.trace_found else None,
            "lifecycle": {kind: dict(values) for kind, values in self.lifecycle.items()} if self.trace_found else None,
            "basis": self.basis,
            "trace_found": self.trace_found,
            "gauge_notes": [dict(note) for note in self.gauge_notes],
        }

    def to_text(self) -> str:
        """The plain-text form."""
        return report_text(self)

    def __str__(self) -> str:
        return self.to_text()

    def __rich__(self) -> Any:
        return report_rich(self)

    def _repr_html_(self) -> str:
        return report_html(self)


__all__ = ["ContextReport"]
