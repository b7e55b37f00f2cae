"""Fold: recoverable, cumulative, structured summaries at 85% of the window, and the agent's compact tool.

Folding a checkpointed thread from outside a run (`compact`, `acompact`) lives with the
thread's persisted state, in `ctxwarden.thread`; the old names here still work, with a
`DeprecationWarning`.
"""

from ctxwarden.core.moved import moved_names
from ctxwarden.fold.engine import DETERMINISTIC, Folder, FoldInput, FoldOutcome
from ctxwarden.fold.history import history_path
from ctxwarden.fold.layer import FoldedView, FoldLayer
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, FoldState, folded_view, is_summary
from ctxwarden.fold.summarize import SECTIONS, deterministic_summary
from ctxwarden.fold.tool import COMPACT_TOOL, make_compact_tool

__getattr__ = moved_names(
    __name__, {"compact": "ctxwarden.thread.compaction", "acompact": "ctxwarden.thread.compaction"}
)

__all__ = [
    "COMPACT_TOOL",
    "DETERMINISTIC",
    "FOLD_STATE_KEY",
    "SECTIONS",
    "FoldInput",
    "FoldLayer",
    "FoldOutcome",
    "FoldRecord",
    "FoldState",
    "FoldedView",
    "Folder",
    "Folds",
    "deterministic_summary",
    "folded_view",
    "history_path",
    "is_summary",
    "make_compact_tool",
]
