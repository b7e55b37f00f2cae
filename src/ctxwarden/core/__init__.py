"""The window, the meter, the policy and the gauge: what every layer decides from."""

from ctxwarden.core.gauge import GaugeLevel, gauge_level
from ctxwarden.core.meter import ApproximateCounter, Measurement, TextCounter, TiktokenCounter, TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.core.window import Window, model_name, resolve_window

__all__ = [
    "DEFAULT_POLICY",
    "ApproximateCounter",
    "ContextPolicy",
    "GaugeLevel",
    "Measurement",
    "TextCounter",
    "TiktokenCounter",
    "TokenMeter",
    "Window",
    "gauge_level",
    "model_name",
    "resolve_window",
]
