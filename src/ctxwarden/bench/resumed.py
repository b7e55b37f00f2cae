"""A long thread resumed by a real deep agent, in each state the per-call path can be in, timed call by call.

What a context manager costs per call depends on the state the thread is in: nothing to
do, clearing engaged with a boundary it reuses, a batch it keeps deferring as too small,
cost-first masking, a folded view, admitted system-prompt sections, a model switch on
every call. A figure taken in the roomy state alone hides the others, so each case here
builds `create_deep_agent(..., middleware=...)` with an in-memory checkpointer, seeds a
thread with a long tool-calling session, settles it into its state with one short run,
then resumes it from the checkpoint with a *fresh* agent (a new worker or a restart:
new middleware, new meter, messages loaded anew) that takes `steps` tool-calling steps.

Per model call two figures are kept:

- **hook**: the middleware's own time, its `wrap_model_call` wall time minus the time
  spent inside the handler it calls (the rest of the stack and the model);
- **step**: the model node's wall time minus the model's own time: every middleware of
  the deep agent, as in the replay benchmark's overhead column.

The first call of the resumed run (a cold start on a thread just loaded from the
checkpoint) is reported apart from the median and 95th percentile of the others.
"""

from __future__ import annotations

import gc
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import FilesystemBackend
from deepagents.middleware.summarization import create_summarization_middleware
from langchain.agents.middleware import ContextEditingMiddleware
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxwarden.bench.harness import StepTimer
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.fold.state import FOLD_STATE_KEY, FoldRecord, covered_up_to
from ctxwarden.replay.scripted import ScriptedChatModel
from ctxwarden.stack.build import context_middleware

SLOT = "SummarizationMiddleware"
"""deepagents' summarization slot, where every strategy's context management sits."""

CTXWARDEN_CASES = ("roomy", "clearing", "deferred", "cost-first", "folded", "admit", "switch", "uncarried")
STOCK_CASES = ("deepagents", "context-editing")


@dataclass(slots=True)
class Timings:
    """What one resumed run measured, call by call (milliseconds)."""

    case: str
    tokens: int
    hook_ms: list[float] = field(default_factory=list)
    hook_cpu_ms: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The first call apart; median and 95th percentile of the calls after it."""
        return {
            "case": self.case,
            "tokens": self.tokens,
            "calls": len(self.hook_ms),
            **_figures("hook", self.hook_ms),
            **_figures("hook_cpu", self.hook_cpu_ms),
            **_figures("step", self.step_ms),
        }


def _figures(name: str, values: list[float]) -> dict[str, float | None]:
    rest = values[1:] or values
    return {
        f"{name}_first_ms": round(values[0], 3) if values else None,
        f"{name}_median_ms": round(statistics.median(rest), 3) if rest else None,
        f"{name}_p95_ms": round(percentile(rest, 0.95), 3) if rest else None,
    }


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


# --- timing ---------------------------------------------------------------------------
class CollectorClock:
    """Milliseconds the garbage collector has run since the clock was made (a `gc.callbacks` entry)."""

    def __init__(self) -> None:
        self.ms = 0.0
        self._at = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._at = time.perf_counter()
        else:
            self.ms += (time.perf_counter() - self._at) * 1000


def time_hook(
    middleware: AgentMiddleware,
    wall: list[float],
    cpu: list[float] | None = None,
    collector: list[float] | None = None,
) -> None:
    """Record the hook's own time per call: its wall time minus the time inside the handler it calls.

    `cpu` gets the same in CPU time of the calling thread, which other processes on a busy
    machine do not inflate; `collector` the garbage collector's share of the hook's own time.
    """
    inner_hook = middleware.wrap_model_call
    clock = CollectorClock() if collector is not None else None

    def timed(request: ModelRequest[Any], handler: Callable[[Any], Any]) -> Any:
        spent = [0.0, 0.0, 0.0]

        def timed_handler(shaped: Any) -> Any:
            started = (time.perf_counter(), time.thread_time(), clock.ms if clock else 0.0)
            try:
                return handler(shaped)
            finally:
                spent[0] += time.perf_counter() - started[0]
                spent[1] += time.thread_time() - started[1]
                spent[2] += (clock.ms if clock else 0.0) - started[2]

        started = (time.perf_counter(), time.thread_time(), clock.ms if clock else 0.0)
        try:
            return inner_hook(request, timed_handler)
        finally:
            wall.append((time.perf_counter() - started[0] - spent[0]) * 1000)
            if cpu is not None:
                cpu.append((time.thread_time() - started[1] - spent[1]) * 1000)
            if collector is not None and clock is not None:
                collector.append(clock.ms - started[2] - spent[2])

    middleware.wrap_model_call = timed  # type: ignore[method-assign]


class TimedModel(ScriptedChatModel):
    """The scripted model, keeping how long each of its own calls took."""

    took_ms: list[float] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            self.took_ms.append((time.perf_counter() - started) * 1000)


def timed_model(replies: Iterator[AIMessage], window: int, name: str) -> TimedModel:
    return TimedModel(messages=replies, profile={"max_input_tokens": window}, name=name, took_ms=[])


# --- the session ------------------------------------------------------------------------
def _output(i: int, lines: int) -> str:
    rows = [
        f"src/app/module_{(i * 7 + j) % 97}.py:{j + 10}: value_{i}_{j} = compute(alpha_{j}, beta) # checked {i * j}"
        for j in range(lines)
    ]
    return "\n".join(rows)


def _script(i: int, lines: int) -> str:
    body = "\n".join(f"    assert check_{i}_{j}(data[{j}]) == expected_{j}, 'case {j} of {i}'" for j in range(lines))
    return f"cat > /tmp/check_{i}.py <<'EOF'\ndef test_{i}(data):\n{body}\nEOF\npython -m pytest /tmp/check_{i}.py"


def session(tokens: int, meter: TokenMeter, *, carried: bool = True) -> list[BaseMessage]:
    """A tool-calling session of about `tokens` tokens (~1,000 per step), as a checkpointed thread holds it.

    With `carried`, each message carries its token count the way ctxwarden's stack stamps the
    messages it handles; without, it is a thread written by another agent.
    """
    task = HumanMessage("Fix the failing tests in src/app and keep the suite green.", id="task")
    messages: list[BaseMessage] = [task]
    total, i = meter.message_tokens(task), 0
    while total < tokens:
        call_id = f"call_{i}"
        ai = AIMessage(
            "",
            id=f"ai_{i}",
            tool_calls=[{"name": "bash", "args": {"command": _script(i, 12)}, "id": call_id, "type": "tool_call"}],
        )
        result = ToolMessage(_output(i, 26), tool_call_id=call_id, name="bash", id=f"tool_{i}")
        for message in (ai, result):
            total += meter.message_tokens(message)
            messages.append(meter.carry(message) if carried else message)
        i += 1
    return messages


def steps_script(steps: int, prefix: str) -> list[AIMessage]:
    calls = [
        AIMessage(
            "",
            id=f"{prefix}-ai-{i}",
            tool_calls=[
                {"name": "bash", "args": {"command": f"pytest tests/test_{i}.py -k {prefix}"}, "id": f"{prefix}-{i}"}
            ],
        )
        for i in range(steps)
    ]
    return [*calls, AIMessage("Done: the suite passes.", id=f"{prefix}-final")]


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    return _output(len(command), 20)


# --- the cases ----------------------------------------------------------------------------
@dataclass(slots=True)
class Built:
    """One case's agent, its model, and where its hook's times go."""

    agent: Any
    model: TimedModel
    hook_ms: list[float]
    hook_cpu_ms: list[float]
    hook_gc_ms: list[float] = field(default_factory=list)
    """The garbage collector's share of each call's hook time (kept only when `build` is asked to)."""


def _admit_files(root: Path) -> dict[str, Any]:
    """Skills, a memory index and instruction files, as a project using all three has them."""
    for n in range(20):
        skill = root / "skills" / f"skill-{n}"
        skill.mkdir(parents=True, exist_ok=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{n}\ndescription: How to handle task family {n} in this repository, step by step.\n"
            f"---\n\n# Skill {n}\nDo the thing.\n",
            encoding="utf-8",
        )
    (root / "memory").mkdir(exist_ok=True)
    notes = "\n".join(f"- [Note {n}](/memory/note-{n}.md) — what was learned about module {n}" for n in range(60))
    (root / "memory" / "MEMORY.md").write_text(notes, encoding="utf-8")
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / "src").mkdir(exist_ok=True)
    rules = "\n".join(f"- Rule {n}: keep functions small and tested; run the suite before a commit." for n in range(40))
    (repo / "AGENTS.md").write_text(f"# Project rules\n{rules}\n", encoding="utf-8")
    (repo / "src" / "AGENTS.md").write_text("# src\n- Public functions have docstrings.\n", encoding="utf-8")
    return {"skills": ["/skills/"], "memory": "/memory/MEMORY.md", "instructions": repo / "src"}


def build(
    case: str,
    history_tokens: int,
    replies: list[AIMessage],
    saver: Any,
    folder: Path,
    meter: TokenMeter | None = None,
    *,
    collector: bool = False,
) -> Built:
    """A fresh deep agent for `case` on `saver` (new middleware and meter: a cold start on resume).

    `meter` replaces ctxwarden's own (for tests that watch what it counts); with `collector`, the garbage
    collector's share of each call's hook time is kept too.
    """
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    roomy = history_tokens * 5
    engaged = int(history_tokens / 0.7)
    # cost-first masks while clearing (from 25%) is far off: the history at a tenth of the window
    window = engaged if case in {"clearing", "deferred"} else roomy * 2 if case == "cost-first" else roomy
    script = iter(replies)
    model = timed_model(script, window, "main")
    hook_ms: list[float] = []
    hook_cpu_ms: list[float] = []
    hook_gc_ms: list[float] = []
    slot: AgentMiddleware
    extra: list[AgentMiddleware] = []
    if case == "deepagents":
        slot = create_summarization_middleware(model, backend)
    elif case == "context-editing":
        slot = _SlotContextEditing()
    else:
        policy = {
            # the deferred state alone (a prepared fold is measured by fold_latency); down to 40%, a batch comes later
            "deferred": ContextPolicy(clear_min_batch_share=0.5, clear_to=0.40, fold_prepare_ahead=0),
            "cost-first": ContextPolicy.cost_first(),
        }.get(case, ContextPolicy())
        kwargs: dict[str, Any] = _admit_files(folder) if case == "admit" else {}
        if case == "switch":
            other = timed_model(script, history_tokens * 4, "other")
            other.took_ms = model.took_ms
            calls = [0]

            def alternate(request: ModelRequest[Any]) -> Any:
                calls[0] += 1
                return other if calls[0] % 2 else model

            kwargs["models"] = alternate
        slot, *extra = context_middleware(policy=policy, backend=backend, meter=meter, **kwargs)
    time_hook(slot, hook_ms, hook_cpu_ms, hook_gc_ms if collector else None)
    agent = create_deep_agent(
        model, [bash], middleware=[slot, *extra], checkpointer=saver, backend=backend, system_prompt="You fix bugs."
    )
    return Built(agent, model, hook_ms, hook_cpu_ms, hook_gc_ms)


class _SlotContextEditing(ContextEditingMiddleware):
    """langchain's context editing with its defaults, in the summarization slot."""

    @property
    def name(self) -> str:
        return SLOT


def seed_values(case: str, history: list[BaseMessage]) -> dict[str, Any]:
    """The checkpointed values a case starts from: the session, and for `folded` a fold over its first half."""
    values: dict[str, Any] = {"messages": history}
    if case == "folded":
        upto = history[len(history) // 2 - (len(history) // 2) % 2].id
        summary = "## Session intent\nFix the failing tests.\n## Progress\n" + "- a step of the work so far\n" * 200
        covered = covered_up_to(history, str(upto))  # as a fold records it: the first call checks it
        record = FoldRecord(1, str(upto), summary, None, 0, 0, "fixed", False, covered=covered)
        values[FOLD_STATE_KEY] = {"records": [record.to_dict()], "hold_until": None, "requested": None}
    return values


def run_case(case: str, tokens: int, steps: int, history: list[BaseMessage], folder: Path) -> Timings:
    """Seed, settle with one short run, then resume with a fresh agent and time `steps` steps."""
    saver = InMemorySaver()
    config: dict[str, Any] = {"configurable": {"thread_id": f"{case}-{tokens}"}, "recursion_limit": 10_000}
    settle = build(case, tokens, steps_script(1, "settle"), saver, folder)
    settle.agent.update_state(config, seed_values(case, history), as_node="model")
    settle.agent.invoke({"messages": [HumanMessage("Run the first check.", id="settle-ask")]}, config)
    resumed = build(case, tokens, steps_script(steps, "step"), saver, folder)
    timer = StepTimer()
    resumed.agent.invoke(
        {"messages": [HumanMessage("Now run every check.", id="resume-ask")]}, {**config, "callbacks": [timer]}
    )
    step_ms = [max(0.0, s - m) for s, m in zip(timer.durations_ms, resumed.model.took_ms, strict=False)]
    return Timings(case, tokens, resumed.hook_ms, resumed.hook_cpu_ms, step_ms)


def run_all(
    sizes: tuple[int, ...],
    steps: int,
    cases: tuple[str, ...],
    log: Callable[[str], None] = print,
    runner: Runner | None = None,
) -> list[dict[str, Any]]:
    """Every case at every size, one row each (see `Timings.row`), logged as it completes.

    `runner` runs one case (default: `run_case` in this process; `bench.fresh.run_case_fresh` resumes it in a fresh
    one)."""
    meter = TokenMeter()
    rows = []
    run = runner or (lambda *args: run_case(*args).row())
    with tempfile.TemporaryDirectory(prefix="ctxwarden-overhead-") as tmp:
        for tokens in sizes:
            carried = session(tokens, meter)
            uncarried = session(tokens, meter, carried=False)
            for case in cases:
                history = uncarried if case in {"uncarried", *STOCK_CASES} else carried
                folder = Path(tmp) / f"{case}-{tokens}"
                folder.mkdir()
                row = run(case, tokens, steps, history, folder)
                collector = row.get("hook_first_gc_ms")
                log(
                    f"{tokens:>9,} {case:<16} hook first {row['hook_first_ms']:>8.2f}"
                    + (f" (collector {collector:.2f})" if collector is not None else "")
                    + f" median {row['hook_median_ms']:>7.3f} p95 {row['hook_p95_ms']:>7.3f} "
                    f"cpu {row['hook_cpu_median_ms']:>7.3f} | step median {row['step_median_ms']:>7.3f} "
                    f"p95 {row['step_p95_ms']:>7.3f}"
                )
                rows.append(row)
    return rows


Runner = Callable[[str, int, int, list[BaseMessage], Path], dict[str, Any]]
"""Runs one case (case, tokens, steps, the seeded history, its folder) and gives its row."""


__all__ = [
    "CTXWARDEN_CASES",
    "STOCK_CASES",
    "CollectorClock",
    "Runner",
    "Timings",
    "build",
    "percentile",
    "run_all",
    "run_case",
    "seed_values",
    "session",
    "steps_script",
    "time_hook",
]
