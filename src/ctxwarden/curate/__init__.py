"""Curate: fork a new thread from chosen turns and fold summaries of an existing one."""

from ctxwarden.curate.fork import ForkError, Unit, list_units, seed_messages

__all__ = ["ForkError", "Unit", "list_units", "seed_messages"]
