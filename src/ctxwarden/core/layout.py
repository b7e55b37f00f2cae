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
bounded. The map from ids to names is injective, so two threads never share a folder:

- a *plain* id (already such a name) is its own name, unless it has the shape of a hashed
  name (`<anything>-<12 lowercase hex>`) and is not a UUID;
- every other id is named `<its cleaned form>-<12 hex of its SHA-256>`, and when that name
  would have a UUID's shape it starts with `_` instead.

So a plain name never has a hashed name's shape (UUIDs aside, which no hashed name has), and
two hashed names differ with their ids' hashes. Before, a plain id was always its own name,
so thread `team_alpha-825c310177ba` got the folder of thread `team/alpha`. The rule names
every folder the earlier rule made the same way (plain ids, UUIDs, every hashed id), except
the folder of a plain id of hashed shape: that folder may hold another thread's files, so
its thread moves to a hashed name and its earlier files stay where they are, reachable by the
operator (outside a run), never by a thread.
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
HASHED_SHAPE = re.compile(r".*-[0-9a-f]{12}", re.DOTALL)
"""The shape of a hashed name: a plain id of this shape is hashed too (UUIDs aside)."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UUID_STEM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}")


def safe_component(value: str) -> str:
    """A single path component for `value` that cannot leave its directory, and that no other value gets."""
    cleaned = _DOTS.sub(".", _UNSAFE.sub("_", value)).lstrip(".") or "_"
    if (
        cleaned == value
        and len(value) <= MAX_COMPONENT
        and (not HASHED_SHAPE.fullmatch(value) or _UUID.fullmatch(value))
    ):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = cleaned[: MAX_COMPONENT - 13]
    if _UUID_STEM.fullmatch(stem):  # `<stem>-<digest>` would have a UUID's shape, which plain ids keep
        stem = f"_{stem}"
    return f"{stem}-{digest}"


def is_component(name: str) -> bool:
    """Whether `name` can be a name `safe_component` gives (a folder found on a backend)."""
    return len(name) <= MAX_COMPONENT and _DOTS.sub(".", _UNSAFE.sub("_", name)).lstrip(".") == name != ""


__all__ = [
    "CHECKPOINTS_FILE",
    "DATABASES",
    "DEFAULT_STATE_DIR",
    "HASHED_SHAPE",
    "HISTORY_DIR",
    "LARGE_RESULTS_DIR",
    "MAX_COMPONENT",
    "TRACE_FILE",
    "is_component",
    "safe_component",
]
