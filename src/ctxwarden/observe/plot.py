"""Deprecated: moved to `ctxwarden.report.plot`; this alias warns and re-exports it."""

from ctxwarden.core.moved import warn_moved_module
from ctxwarden.report.plot import *  # noqa: F403

warn_moved_module(__name__, "ctxwarden.report.plot")
