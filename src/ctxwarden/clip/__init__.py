"""Clip: evict large results at arrival, clear old results and arguments from the view, recall them."""

from ctxwarden.clip.clear import CLIP_STATE_KEY, Boundary, ClearLayer, ClipState
from ctxwarden.clip.evict import RECALL_TOOL, Evictor
from ctxwarden.clip.names import result_path
from ctxwarden.clip.preview import Preview, preview
from ctxwarden.clip.recall import make_recall_tool, original_args, original_result

__all__ = [
    "CLIP_STATE_KEY",
    "RECALL_TOOL",
    "Boundary",
    "ClearLayer",
    "ClipState",
    "Evictor",
    "Preview",
    "make_recall_tool",
    "original_args",
    "original_result",
    "preview",
    "result_path",
]
