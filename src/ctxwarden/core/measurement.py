"""What one model call would receive, in tokens: the meter's answer, and what every layer decides on.

Its parts are kept apart because layers act on them apart: a layer that edits the messages cannot shrink what is
`fixed` (the system prompt, the tool schemas and the gauge notes the call carries), and the calibration `factor`
turns the raw count into the provider's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one call would receive, in tokens."""

    system: int
    """System prompt (with every section middlewares added to it)."""

    tools: int
    """Tool schemas."""

    messages: int
    """Conversation messages."""

    factor: float
    """Calibration applied to the raw count (provider tokens per counted token)."""

    notes: int = 0
    """Gauge notes of earlier calls the call will carry: placed after every layer, so not in `messages` yet."""

    @property
    def fixed(self) -> int:
        """What no edit of the messages removes: the system prompt, the tool schemas and the notes carried."""
        return self.system + self.tools + self.notes

    @property
    def estimate(self) -> int:
        """The raw count, before calibration."""
        return self.fixed + self.messages

    @property
    def total(self) -> int:
        """The calibrated count: the meter's best guess of the provider's input tokens."""
        return round(self.estimate * self.factor)


__all__ = ["Measurement"]
