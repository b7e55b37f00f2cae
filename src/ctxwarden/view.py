"""Deprecated: moved to `ctxwarden.thread.view`; this alias warns and re-exports it."""

from ctxwarden.core.moved import warn_moved_module
from ctxwarden.thread.view import *  # noqa: F403

warn_moved_module(__name__, "ctxwarden.thread.view")
