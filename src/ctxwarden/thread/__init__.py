"""Thread: everything about a thread's persisted state, in one place.

The state schema and the view rebuilt from it (`view`), opening checkpointers
(`checkpoints`), reading a thread's values (`read`), writing back without losing a key
(`write`) and folding a thread from outside a run (`compaction`). It sits above the
lifecycle layers, whose private state it joins into one schema, and below the stack,
the report and the session, which use it. The names of the state dir's files are in
`ctxwarden.core.layout`, low enough for every layer.
"""

from ctxwarden.thread.checkpoints import SqliteCheckpointer, checkpointer_of, open_checkpointer
from ctxwarden.thread.compaction import acompact, compact
from ctxwarden.thread.read import aread_values, known_threads, open_state_dir, read_messages, read_values, reader_graph
from ctxwarden.thread.view import ContextState, last_call_view, model_view
from ctxwarden.thread.write import awrite_state, seed_thread, write_state

__all__ = [
    "ContextState",
    "SqliteCheckpointer",
    "acompact",
    "aread_values",
    "awrite_state",
    "checkpointer_of",
    "compact",
    "known_threads",
    "last_call_view",
    "model_view",
    "open_checkpointer",
    "open_state_dir",
    "read_messages",
    "read_values",
    "reader_graph",
    "seed_thread",
    "write_state",
]
