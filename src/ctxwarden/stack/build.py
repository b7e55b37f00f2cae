"""The one-call stack: ctxwarden's middleware for any agent, or a whole deep agent with it.

`context_middleware()` is for callers who build their own agent; it returns one
middleware that composes with theirs in a plain list (`stack.compose`), and with no
argument it evicts into the agent's own file backend and records the trace under
`./.ctxwarden/`. `create_context_agent()` is the embedded default: a deepagents agent
with the stack in place, a real SQLite checkpointer and a filesystem backend, all under
one state directory. The agent's file tools see that directory minus the databases
(`ThreadIsolatedBackend` refuses them and never opens them), every declarative subagent
gets the stack too (deepagents would otherwise fill its summarization slot with its own
middleware), and the agent records what it was built with, so `compact()` and the
/context report find the same backend and trace. Arguments that cannot work fail here,
when the agent is built, not hours later at the first fold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_type_hints

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import AgentMiddleware
from langgraph.types import Checkpointer

from ctxwarden.admit.layer import AdmitLayer
from ctxwarden.admit.skills import skills_loader
from ctxwarden.clip.clear import ClearLayer
from ctxwarden.core.layers import ContextLayer, StateCheckedLayer, joined_schema
from ctxwarden.core.layout import CHECKPOINTS_FILE, DATABASES, DEFAULT_STATE_DIR, TRACE_FILE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.parts import AgentParts, attach_parts
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.errors import BuildArgumentError, CtxwardenError
from ctxwarden.fold.engine import DETERMINISTIC, Folder
from ctxwarden.fold.layer import FoldedView, FoldLayer
from ctxwarden.stack.compose import ContextStack, SkilledContextStack, with_skills_state
from ctxwarden.stack.discover import AgentBackend, FindBackendLayer
from ctxwarden.stack.isolation import ThreadIsolatedBackend, normalized
from ctxwarden.stack.middleware import SLOT_NAME, ContextWindowMiddleware
from ctxwarden.stack.pick import ModelPicker, model_from_context
from ctxwarden.stack.routes import refuse_isolation_under_route
from ctxwarden.stack.tool_names import refuse_reserved, refuse_reserved_in_subagents
from ctxwarden.thread.checkpoints import open_checkpointer
from ctxwarden.thread.view import ContextState
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore


def validate_arguments(*, policy: Any = None, summarizer: Any = None) -> None:
    """Refuse, at build time, a policy that is not a `ContextPolicy` and a summarizer that cannot summarize."""
    if policy is not None and not isinstance(policy, ContextPolicy):
        if isinstance(policy, Mapping):
            fields = ", ".join(f"{key}={value!r}" for key, value in policy.items())
            fix = f"policy=ContextPolicy({fields})"
        else:
            fix = "policy=ContextPolicy(...) with the fields to change"
        raise BuildArgumentError(
            f"policy={policy!r} is a {type(policy).__name__}, not a ContextPolicy. Fix: pass {fix}."
        )
    if isinstance(summarizer, str) and summarizer != DETERMINISTIC:
        raise BuildArgumentError(
            f"summarizer={summarizer!r} is not a summarizer ctxwarden knows. Fix: pass summarizer={DETERMINISTIC!r} "
            "to build summaries without a model, or a chat model (e.g. init_chat_model(...))."
        )
    if summarizer is not None and not isinstance(summarizer, str) and not hasattr(summarizer, "invoke"):
        raise BuildArgumentError(
            f"summarizer={summarizer!r} is a {type(summarizer).__name__}, which cannot be invoked. "
            f"Fix: pass a chat model, or summarizer={DETERMINISTIC!r}."
        )


def context_middleware(
    *,
    state_dir: str | Path = DEFAULT_STATE_DIR,
    policy: ContextPolicy | None = None,
    meter: TokenMeter | None = None,
    layers: Sequence[ContextLayer] = (),
    trace: bool | TraceRecorder | TraceStore | str | Path | None = True,
    backend: Any = None,
    summarizer: Any = None,
    skills: Sequence[str] = (),
    memory: str | None = None,
    instructions: str | Path | None = None,
    models: ModelPicker | Mapping[str, Any] | None = None,
) -> ContextStack:
    """The ctxwarden middleware, for `create_deep_agent(middleware=[...])` or `create_agent(middleware=[...])`.

    It is one middleware, so it composes in a plain list with the caller's own, before or
    after them: `middleware=[context_middleware(), Mine()]`. It takes deepagents'
    `SummarizationMiddleware` slot by name, so in a deep agent it runs ahead of the
    caller's own middleware wherever it stands in the list; with `langchain.agents.create_agent`
    the list's order is the run order, so put it first for the same effect (after a
    middleware, it measures and shapes what that middleware made of the request). It also
    reads as a one-item list, so `middleware=context_middleware()` works as it is.

    With no argument it needs nothing else: large tool results are evicted to the agent's
    own file backend (in a deep agent, the one deepagents' `read_file` reads, found on the
    first call; in an agent without deepagents' file tools, a folder under `state_dir`),
    and events are recorded in `<state_dir>/trace.sqlite`, which `context_report(agent,
    config)` finds by itself. `backend` overrides the backend; `trace` is a `trace.sqlite`
    path, a store or a recorder, or `False` to record nothing. `summarizer` is the chat
    model that writes fold summaries (default: the model being called), or
    `"deterministic"` to build them without a model. `layers` run after ctxwarden's own
    (admit, folded view, clearing, folding) on every model call; a layer that keeps state
    declares it in a `state_schema` (a `TypedDict`), which joins the agent's schema — a key
    it writes without declaring stops the call with an error naming the key and the fix.

    Admit: `skills` are skills folders on the backend, farthest first (a closer folder's
    skill shadows a farther one of the same name); `memory` is the backend path of a
    `MEMORY.md` index (e.g. `"/memory/MEMORY.md"`); `instructions` is the working
    directory whose `AGENTS.md` files, from the repository root down, are admitted.

    `models` lets a run pick its model from its context (`context={"model": "small"}`):
    a mapping of names to chat models, or a function of the request.
    """
    validate_arguments(policy=policy, summarizer=summarizer)
    policy = policy or DEFAULT_POLICY
    meter = meter or TokenMeter()
    if trace is True:
        trace = Path(state_dir) / TRACE_FILE
    recorder = trace if isinstance(trace, TraceRecorder) else TraceRecorder(trace or None)
    found: list[ContextLayer] = []
    if backend is None:
        backend = AgentBackend(state_dir)
        found.append(FindBackendLayer(backend))
    else:
        refuse_isolation_under_route(backend)
        trace_file = getattr(recorder.store, "path", None)
        if isinstance(trace_file, Path):
            check_unreachable(backend, trace_file, "trace")
    folder = Folder(policy, meter, backend, summarizer)
    admit = AdmitLayer(policy, meter, backend=backend, skills=skills, memory=memory, instructions=instructions)
    schema = joined_schema(ContextState, layers)  # a layer's declared state joins the agent's
    kept = get_type_hints(schema, include_extras=True)
    custom = [StateCheckedLayer(layer, kept) for layer in layers]
    lifecycle: list[ContextLayer] = [
        *found,
        admit,
        FoldedView(),
        ClearLayer(policy, meter),
        FoldLayer(folder),
        *custom,
    ]
    picker = model_from_context(models) if isinstance(models, Mapping) else models
    options: dict[str, Any] = {
        "policy": policy,
        "meter": meter,
        "layers": lifecycle,
        "recorder": recorder,
        "backend": backend,
        "pick_model": picker,
    }
    # with skills, deepagents' loader keeps them in state, chained inside; the admit layer renders the index
    core = SkilledContextStack(skills=skills_loader(backend, skills), **options) if skills else ContextStack(**options)
    if schema is not ContextState:  # ContextState plus the layers' keys (and the skills loader's)
        core.state_schema = with_skills_state(schema) if skills else schema  # type: ignore[assignment]
    return core


def create_context_agent(
    model: Any,
    tools: Sequence[Any] = (),
    *,
    state_dir: str | Path = DEFAULT_STATE_DIR,
    policy: ContextPolicy | None = None,
    meter: TokenMeter | None = None,
    layers: Sequence[ContextLayer] = (),
    trace: bool | TraceRecorder | TraceStore | str | Path = True,
    summarizer: Any = None,
    skills: Sequence[str] = (),
    memory: str | None = None,
    instructions: str | Path | None = None,
    models: ModelPicker | Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Checkpointer | None = None,
    backend: Any = None,
    **deep_agent_kwargs: Any,
) -> Any:
    """A deep agent with the ctxwarden stack, checkpointed under `state_dir`.

    `layers` are extra lifecycle stages run after ctxwarden's own on every model call.
    Defaults: a `SqliteSaver` at `<state_dir>/checkpoints.sqlite` (usable from sync and
    async code), the trace at `<state_dir>/trace.sqlite` (`trace=False` for none) and a
    `FilesystemBackend` confined to `state_dir`, on which a running thread sees only its
    own offloaded files (`ThreadIsolatedBackend`). Pass `checkpointer`
    or `backend` to use others (Postgres, a `StoreBackend`, ...); other keyword
    arguments go to `create_deep_agent`; every declarative subagent in `subagents=`
    runs with the stack too, under its own namespace (see `managed_subagents`).
    The agent records its backend, trace, policy, meter and summarizer
    (`ctxwarden.core.parts.parts_of(agent)`), which `compact()` and the /context report use.
    """
    validate_arguments(policy=policy, summarizer=summarizer)
    refuse_reserved(tools, "the tools given to create_context_agent")
    refuse_reserved_in_subagents(deep_agent_kwargs.get("subagents") or ())
    refuse_slot_taken(middleware)
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    if backend is not None:
        refuse_isolation_under_route(backend)
    if checkpointer is None:
        if backend is not None:
            check_unreachable(backend, state / CHECKPOINTS_FILE, "checkpoint database")
        checkpointer = open_checkpointer(state / CHECKPOINTS_FILE)
    if trace is True:
        trace = state / TRACE_FILE
    if backend is None:
        reserved = [*DATABASES, *_inside(state, trace)]
        backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=state, virtual_mode=True), reserved=reserved)
    meter = meter or TokenMeter()
    policy = policy or DEFAULT_POLICY
    stack = context_middleware(
        state_dir=state,
        policy=policy,
        meter=meter,
        layers=layers,
        trace=trace or None,
        backend=backend,
        summarizer=summarizer,
        skills=skills,
        memory=memory,
        instructions=instructions,
        models=models,
    )
    core = stack
    subagents = deep_agent_kwargs.pop("subagents", None)
    if subagents is not None:
        deep_agent_kwargs["subagents"] = managed_subagents(subagents, core)
    agent = create_deep_agent(
        model,
        list(tools),
        system_prompt=system_prompt,
        middleware=[stack, *middleware],
        checkpointer=checkpointer,
        backend=backend,
        **deep_agent_kwargs,
    )
    return attach_parts(agent, AgentParts(backend, core.recorder, policy, meter, summarizer))


def refuse_slot_taken(middleware: Sequence[Any]) -> None:
    """Raise `BuildArgumentError` for a middleware named as deepagents' summarization slot, which ctxwarden's takes:
    deepagents keeps one middleware of a name, the last, so one of the two was dropped without a word (with a
    `SummarizationMiddleware` of the user's after it, ctxwarden: no eviction, no recall, nothing traced)."""
    for given in middleware:
        if getattr(given, "name", None) == SLOT_NAME and not isinstance(given, ContextWindowMiddleware):
            raise BuildArgumentError(
                f"the middleware given to create_context_agent hold {type(given).__name__}, named {SLOT_NAME!r}: "
                "deepagents' summarization slot, which ctxwarden's middleware takes, and deepagents keeps only one "
                "middleware of a name. Fix: leave it out; ctxwarden folds the conversation itself "
                "(ContextPolicy(summarize_at=...)), or compact() on demand."
            )


def managed_subagents(subagents: Sequence[Any], core: AgentMiddleware) -> list[Any]:
    """`subagents` with ctxwarden's core middleware in each declarative spec's summarization slot.

    deepagents fills a declarative subagent's slot with its own summarization unless the
    spec's `middleware` holds one of the same name; compiled and async subagents are
    passed through (they bring their own graph). A spec that already has a middleware in
    the slot keeps it. The subagent's events and files carry its own namespace.
    """
    managed: list[Any] = []
    for spec in subagents:
        declarative = isinstance(spec, Mapping) and "runnable" not in spec and "graph_id" not in spec
        own = list(spec.get("middleware") or []) if declarative else []
        if declarative and not any(getattr(m, "name", None) == SLOT_NAME for m in own):
            spec = {**spec, "middleware": [core, *own]}
        managed.append(spec)
    return managed


def _inside(root: Path, trace: object) -> list[str]:
    """The backend path of the trace file when it lies under `root` (so the backend refuses it too)."""
    if not isinstance(trace, str | Path):
        return []
    try:
        return [normalized(Path(trace).resolve().relative_to(root.resolve()).as_posix())]
    except ValueError:
        return []


def check_unreachable(backend: Any, database: Path, what: str) -> None:
    """Refuse a database that the agent's own file tools could open (see `ThreadIsolatedBackend`)."""
    root = getattr(backend, "cwd", None)
    if not isinstance(root, Path):
        return
    try:
        inside = normalized(database.resolve().relative_to(root.resolve()).as_posix())
    except ValueError:
        return
    if isinstance(backend, ThreadIsolatedBackend) and backend.refusal(inside) is not None:
        return
    raise CtxwardenError(
        f"the {what} {database} is inside the folder the agent's file tools reach ({root}): a grep or read_file by "
        "the model would open the database and, with a second process on it, corrupt it. Fix: keep it outside that "
        "folder, or wrap the backend in ThreadIsolatedBackend(backend, reserved=[...]) naming it."
    )


__all__ = [
    "check_unreachable",
    "context_middleware",
    "create_context_agent",
    "managed_subagents",
    "validate_arguments",
]
