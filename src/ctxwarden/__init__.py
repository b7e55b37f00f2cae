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
from ctxwarden.curate import ForkError, Unit
from ctxwarden.errors import (
    BuildArgumentError,
    ContextStillTooLargeError,
    CtxwardenError,
    MissingExtraError,
    PolicyError,
    ReplayMismatchError,
    TrajectoryFormatError,
    WindowUnknownError,
)
from ctxwarden.fold import DETERMINISTIC, FoldRecord
from ctxwarden.observe import (
    ContextReport,
    TraceEvent,
    TraceRecorder,
    TraceStore,
    UnknownThreadError,
    acontext_report,
    context_report,
)
from ctxwarden.observe.plot import usage_plot
from ctxwarden.replay import Recording, ReplayChatModel, load_recording, replay_tools
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

__version__ = "0.1.0.dev0"

__all__ = [
    "DEFAULT_POLICY",
    "DETERMINISTIC",
    "ApproximateCounter",
    "BuildArgumentError",
    "CallBudget",
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
    "Measurement",
    "MissingExtraError",
    "PolicyError",
    "Recording",
    "ReplayChatModel",
    "ReplayMismatchError",
    "Session",
    "ThreadIsolatedBackend",
    "ThreadIsolatedStoreBackend",
    "TiktokenCounter",
    "TokenMeter",
    "TraceEvent",
    "TraceRecorder",
    "TraceStore",
    "TrajectoryFormatError",
    "Unit",
    "UnknownThreadError",
    "Window",
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
