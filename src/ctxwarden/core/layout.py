"""Where a thread's things live: the state dir's files, the backend's folders, and ids made safe as folder names.

The names are read by many layers — the stack opens the databases, clip evicts into one
folder and fold writes history into another, the thread readers open a state dir, the
backend wrapper hides the databases from the agent's file tools — so they are written once,
here, low enough that every layer can import them.

    <state dir>/                    (default `.ctxwarden`)
        checkpoints.sqlite          the thread's checkpoints (the embedded default)
        trace.sqlite                the append-only trace
        large_tool_results/<thread>[/<namespace>]/<call id>[-<call key>]
        conversation_history/<thread>.md   (a subagent's: <thread>/<namespace>.md)

A component keeps only `[A-Za-z0-9._-]`, never starts with a dot or holds `..`, and is
bounded; whenever that changed the id, a hash of the original is appended, so two
different ids never share a file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

DEFAULT_STATE_DIR = Path(".ctxwarden")
"""Where the embedded default keeps checkpoints, the trace and offloaded files."""

CHECKPOINTS_FILE = "checkpoints.sqlite"
"""The SQLite checkpoint database in a state dir."""

TRACE_FILE = "trace.sqlite"
"""The SQLite trace in a state dir."""

DATABASES = (f"/{CHECKPOINTS_FILE}", f"/{TRACE_FILE}")
"""The embedded default's databases, as paths of a backend rooted at the state dir."""

LARGE_RESULTS_DIR = "large_tool_results"
"""Top-level folder of evicted tool results."""

HISTORY_DIR = "conversation_history"
"""Top-level folder of the history files folds write (ctxwarden's and deepagents' own)."""

MAX_COMPONENT = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS = re.compile(r"\.{2,}")


def safe_component(value: str) -> str:
    """A single path component for `value` that cannot leave its directory."""
    cleaned = _DOTS.sub(".", _UNSAFE.sub("_", value)).lstrip(".") or "_"
    if cleaned == value and len(value) <= MAX_COMPONENT:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned[: MAX_COMPONENT - 13]}-{digest}"


__all__ = [
    "CHECKPOINTS_FILE",
    "DATABASES",
    "DEFAULT_STATE_DIR",
    "HISTORY_DIR",
    "LARGE_RESULTS_DIR",
    "MAX_COMPONENT",
    "TRACE_FILE",
    "safe_component",
]
