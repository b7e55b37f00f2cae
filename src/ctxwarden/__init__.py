"""ctxwarden: keeps a LangGraph agent's context window working over long sessions.

The public API is re-exported here; the modules behind it are private and may move.
"""

from ctxwarden.core import (
    DEFAULT_POLICY,
    ApproximateCounter,
    ContextPolicy,
    GaugeLevel,
    Measurement,
    TiktokenCounter,
    TokenMeter,
    Window,
    gauge_level,
    resolve_window,
)
from ctxwarden.curate import Unit
from ctxwarden.errors import (
    BuildArgumentError,
    CheckpointWriteError,
    ContextStillTooLargeError,
    CtxwardenError,
    ForkError,
    LayerStateError,
    MissingExtraError,
    NothingMeasuredError,
    PolicyError,
    ReplayMismatchError,
    SummarizerError,
    SummarizerTimeoutError,
    ThreadSourceError,
    TraceError,
    TrajectoryFormatError,
    UnknownThreadError,
    WindowTooSmallError,
    WindowUnknownError,
)
from ctxwarden.fold import DETERMINISTIC, FoldRecord
from ctxwarden.replay import Recording, ReplayChatModel, load_recording, replay_tools
from ctxwarden.report import ContextReport, acontext_report, context_report, usage_plot
from ctxwarden.session import Session
from ctxwarden.stack import (
    CallBudget,
    ContextLayer,
    ContextWindowMiddleware,
    LayerEdit,
    ThreadIsolatedBackend,
    ThreadIsolatedStoreBackend,
    context_middleware,
    create_context_agent,
    managed_subagents,
)
from ctxwarden.thread import acompact, compact, open_checkpointer
from ctxwarden.trace import TraceEvent, TraceRecorder, TraceStore

__version__ = "0.1.0.dev0"

__all__ = [
    "DEFAULT_POLICY",
    "DETERMINISTIC",
    "ApproximateCounter",
    "BuildArgumentError",
    "CallBudget",
    "CheckpointWriteError",
    "ContextLayer",
    "ContextPolicy",
    "ContextReport",
    "ContextStillTooLargeError",
    "ContextWindowMiddleware",
    "CtxwardenError",
    "FoldRecord",
    "ForkError",
    "GaugeLevel",
    "LayerEdit",
    "LayerStateError",
    "Measurement",
    "MissingExtraError",
    "NothingMeasuredError",
    "PolicyError",
    "Recording",
    "ReplayChatModel",
    "ReplayMismatchError",
    "Session",
    "SummarizerError",
    "SummarizerTimeoutError",
    "ThreadIsolatedBackend",
    "ThreadIsolatedStoreBackend",
    "ThreadSourceError",
    "TiktokenCounter",
    "TokenMeter",
    "TraceError",
    "TraceEvent",
    "TraceRecorder",
    "TraceStore",
    "TrajectoryFormatError",
    "Unit",
    "UnknownThreadError",
    "Window",
    "WindowTooSmallError",
    "WindowUnknownError",
    "__version__",
    "acompact",
    "acontext_report",
    "compact",
    "context_middleware",
    "context_report",
    "create_context_agent",
    "gauge_level",
    "load_recording",
    "managed_subagents",
    "open_checkpointer",
    "replay_tools",
    "resolve_window",
    "usage_plot",
]
