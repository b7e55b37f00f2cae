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
        conversation_history/<thread>/branch-<12 hex>.md   (parts of the history, see `history_part`)

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

A thread's folder (and a namespace's) must also stay apart where the filesystem ignores case,
as macOS's and Windows' do by default: there `Readme` and `readme` are one folder, so thread
`readme` would list and overwrite thread `Readme`'s files. `folder_name` therefore keeps a plain
id as its name only when no other id's name can differ from it only in case, and Windows reads it
as a file name: lowercase, not ending in a dot, not a device name (`con`, `nul`, `com1`, ...);
every other plain id gets a hashed name. So does an id ending in `.md`: the folder of thread
`notes.md` would be the history file of thread `notes`, and whichever came second could not
write its history. Such a thread's earlier files stay in the folder the earlier rule gave it,
reachable by the operator, never by a thread. A call's file inside a thread's folder needs no
such care: its name carries the call key, which no other call has.
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


class _NoThread(str):
    """The folder name of the runs without a thread id: a value no thread id read from a config can be."""


NO_THREAD: str = _NoThread("no-thread")
"""Where the offloaded files of runs without a thread id (no checkpointer) go. A thread a client names `no-thread`
gets a folder of its own (`folder_name` hashes it), never this one."""

SHARED_FOLDERS = frozenset({str(NO_THREAD), "media"})
"""Folder names no thread gets: the runs without a thread id's, and `/conversation_history/media/`, where deepagents'
own summarization keeps every thread's images by content hash (a thread named `media` took it for its own folder: it
listed another thread's files as its own, and deleting it deleted theirs)."""

MAX_COMPONENT = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS = re.compile(r"\.{2,}")
HASHED_SHAPE = re.compile(r".*-[0-9a-f]{12}", re.DOTALL)
"""The shape of a hashed name: a plain id of this shape is hashed too (UUIDs aside)."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UUID_STEM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}", re.IGNORECASE)
"""A stem that, with `-<12 hex>` after it, would read as a UUID, in any case (a folder compared ignoring case)."""


def safe_component(value: str) -> str:
    """A single path component for `value` that cannot leave its directory, and that no other value gets."""
    cleaned = _DOTS.sub(".", _UNSAFE.sub("_", value)).lstrip(".") or "_"
    if (
        cleaned == value
        and len(value) <= MAX_COMPONENT
        and (not HASHED_SHAPE.fullmatch(value) or _UUID.fullmatch(value))
    ):
        return value
    return _hashed(value, cleaned)


def folder_name(value: str) -> str:
    """`safe_component(value)`, made apart from every other value's name also where case is ignored.

    For thread and namespace folders (see the module docstring): a plain id that is not lowercase, ends in a dot
    or is a Windows device name is hashed, as an unsafe one is; so is one ending in `.md`, whose folder would be the
    history file of the thread named without it (`/conversation_history/notes.md`, the file of thread `notes`), one
    of the `SHARED_FOLDERS`, and one named as deepagents names its own history files (`DEEPAGENTS_HISTORY`)."""
    if isinstance(value, _NoThread):
        return str(value)
    name = safe_component(value)
    plain = value == value.lower() and not value.endswith((".", ".md")) and not _DEVICE.fullmatch(value)
    plain = plain and not DEEPAGENTS_HISTORY.fullmatch(value)
    if name != value or (plain and value not in SHARED_FOLDERS):  # a thread named `no-thread` or `media`: its own
        return name
    return _hashed(value, value)


DEEPAGENTS_HISTORY = re.compile(r"session_[0-9a-f]{32}")
"""How deepagents' own summarization names a history file (`/conversation_history/session_<id>.md`): a thread may
open such a file by its name, which only the thread that wrote it holds (`stack.isolation`). A thread of that id
(`"session_" + uuid4().hex`) had its own history file named so, which any thread could then read and edit."""

_DEVICE = re.compile(r"(?:con|prn|aux|nul|com\d|lpt\d)(?:\..*)?", re.IGNORECASE | re.DOTALL)
"""Names Windows reads as devices, whatever follows their first dot."""


def _hashed(value: str, cleaned: str) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = cleaned[: MAX_COMPONENT - 13]
    if _UUID_STEM.fullmatch(stem) or _DEVICE.fullmatch(stem):  # a UUID's shape, which plain ids keep; a device
        stem = f"_{stem}"
    return f"{stem}-{digest}"


def history_part(path: str, kind: str, text: str) -> str:
    """The file of the history file `path` that holds `text` as its part `kind`, in the thread's folder (which the
    thread may read): `/conversation_history/<thread>/<kind>-<12 hex of text's hash>.md`, a subagent's
    `<namespace>-<kind>-...`. Every part is named from the thread's own file, never from another part.

    Two kinds (`HISTORY_PART`). `branch`: LangGraph resumes a thread from any earlier checkpoint (time travel,
    Studio's fork), both branches stay in the checkpointer, each naming its own folds' file; a fold finding another
    whole fold of its number there writes its branch's history to a part. `from-fold-N`: a backend has no append, so
    each fold rewrites its file; past `fold.history.VOLUME_CHARS` fold N starts a part, which names the file before it.
    Named by the text's hash, a retry writes the same part and two branches never share one; no folder name has this
    shape (`folder_name` hashes every id of the `-<12 hex>` shape again)."""
    folder, _, name = path.rpartition("/")
    stem = name.removesuffix(".md")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    if folder == f"/{HISTORY_DIR}":  # the top-level agent's file: its parts go in the thread's folder
        return f"{folder}/{stem}/{kind}-{digest}.md"
    return f"{folder}/{stem}-{kind}-{digest}.md"


def is_history_part(path: str, base: str) -> bool:
    """Whether `path` is a part (`history_part`) of the history file `base`."""
    folder, _, name = base.rpartition("/")
    stem = name.removesuffix(".md")
    head = f"{folder}/{stem}/" if folder == f"/{HISTORY_DIR}" else f"{folder}/{stem}-"
    return path.startswith(head) and HISTORY_PART.fullmatch(path[len(head) :]) is not None


HISTORY_PART = re.compile(r"(?:branch|from-fold-\d+)-[0-9a-f]{12}\.md")
"""How the file of a part of a history file (`history_part`) is named after the file's own name."""


def is_component(name: str) -> bool:
    """Whether `name` can be a name `safe_component` gives (a folder found on a backend)."""
    return len(name) <= MAX_COMPONENT and _DOTS.sub(".", _UNSAFE.sub("_", name)).lstrip(".") == name != ""


__all__ = [
    "CHECKPOINTS_FILE",
    "DATABASES",
    "DEFAULT_STATE_DIR",
    "HASHED_SHAPE",
    "HISTORY_DIR",
    "HISTORY_PART",
    "LARGE_RESULTS_DIR",
    "MAX_COMPONENT",
    "SHARED_FOLDERS",
    "TRACE_FILE",
    "folder_name",
    "history_part",
    "is_component",
    "is_history_part",
    "safe_component",
]
