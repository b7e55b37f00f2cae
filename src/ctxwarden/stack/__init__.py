"""The one-call stack: the per-call core middleware and the builders that place it."""

from ctxwarden.core.layers import CallBudget, ContextLayer, LayerEdit
from ctxwarden.stack.build import context_middleware, create_context_agent, managed_subagents
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.stack.middleware import ContextWindowMiddleware
from ctxwarden.stack.store_isolation import ThreadIsolatedStoreBackend
from ctxwarden.thread.checkpoints import SqliteCheckpointer, open_checkpointer

__all__ = [
    "CallBudget",
    "ContextLayer",
    "ContextWindowMiddleware",
    "LayerEdit",
    "SqliteCheckpointer",
    "ThreadIsolatedBackend",
    "ThreadIsolatedStoreBackend",
    "context_middleware",
    "create_context_agent",
    "managed_subagents",
    "open_checkpointer",
]
