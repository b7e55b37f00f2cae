"""Deprecated: moved to `ctxwarden.trace.store`; this alias warns and re-exports it."""

from ctxwarden.core.moved import warn_moved_module
from ctxwarden.trace.store import *  # noqa: F403

warn_moved_module(__name__, "ctxwarden.trace.store")
