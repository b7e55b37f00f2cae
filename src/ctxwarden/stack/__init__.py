"""The one-call stack: the per-call core middleware and the builders that place it."""

from ctxwarden.core.layers import CallBudget, ContextLayer, LayerEdit
from ctxwarden.stack.build import context_middleware, create_context_agent, managed_subagents
from ctxwarden.stack.deletion import DeletedThread, adelete_thread, delete_thread
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.stack.middleware import ContextWindowMiddleware
from ctxwarden.stack.store_isolation import ThreadIsolatedStoreBackend
from ctxwarden.thread.checkpoints import SqliteCheckpointer, open_checkpointer

__all__ = [
    "CallBudget",
    "ContextLayer",
    "ContextWindowMiddleware",
    "DeletedThread",
    "LayerEdit",
    "SqliteCheckpointer",
    "ThreadIsolatedBackend",
    "ThreadIsolatedStoreBackend",
    "adelete_thread",
    "context_middleware",
    "create_context_agent",
    "delete_thread",
    "managed_subagents",
    "open_checkpointer",
]
