"""Fold: recoverable, cumulative, structured summaries at 85% of the window, and `/compact` on demand."""

from ctxwarden.fold.compact import COMPACT_TOOL, acompact, compact, make_compact_tool
from ctxwarden.fold.engine import DETERMINISTIC, Folder, FoldInput, FoldOutcome
from ctxwarden.fold.history import history_path
from ctxwarden.fold.layer import FoldedView, FoldLayer
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, Folds, FoldState, folded_view, is_summary
from ctxwarden.fold.summarize import SECTIONS, deterministic_summary

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
    "acompact",
    "compact",
    "deterministic_summary",
    "folded_view",
    "history_path",
    "is_summary",
    "make_compact_tool",
]
