"""Curate: fork a new thread from chosen turns and fold summaries of an existing one."""

from ctxwarden.curate.fork import Unit, list_units, seed_messages
from ctxwarden.errors import ForkError

__all__ = ["ForkError", "Unit", "list_units", "seed_messages"]
