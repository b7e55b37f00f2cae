"""The demo: a real recorded session replayed through `create_context_agent`.

It shows, on a session nobody on this project wrote, what the context manager did
and what each model call received. The recording's actions are fixed, so the
numbers depend on the context management alone. Input tokens per call are what the
replayed model reports having received (`usage="received"`), measured independently
of ctxwarden's own meter.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import resources
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.clip.recoverability import check_outputs
from ctxwarden.core.extras import require
from ctxwarden.core.gauge import gauge_level
from ctxwarden.core.layout import DEFAULT_STATE_DIR, TRACE_FILE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import METADATA_KEY, is_evicted
from ctxwarden.errors import BuildArgumentError
from ctxwarden.fold.engine import DETERMINISTIC
from ctxwarden.replay.driver import replay_into
from ctxwarden.replay.model import ReplayChatModel
from ctxwarden.replay.recording import Recording, load_recording
from ctxwarden.replay.tools import replay_tools
from ctxwarden.report import ContextReport, build_report
from ctxwarden.report.counts import trace_counts
from ctxwarden.report.plot import usage_plot
from ctxwarden.stack.build import create_context_agent
from ctxwarden.thread.view import last_call_view
from ctxwarden.trace.store import TraceStore

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_WINDOW = 32_000
DEFAULT_TRAJECTORY = "sqlfluff__sqlfluff-1733.traj.json"
PLOT_FILE = "usage.png"
TRAJECTORY_CREDIT = (
    "Recorded by mini-swe-agent (github.com/SWE-agent/mini-swe-agent, MIT), deepseek-chat on SWE-bench Lite."
)


@dataclass(slots=True)
class DemoResult:
    """What one demo run measured."""

    trajectory: str
    thread_id: str
    state_dir: str
    window: int
    calls: int
    input_tokens_total: int
    input_tokens_peak: int
    peak_fraction: float
    overflows: int
    evictions: int
    clears: int
    folds: int
    seconds: float
    per_call_input_tokens: list[int] = field(default_factory=list)
    recoverable_fraction: float = 1.0
    fallback_folds: int = 0
    counter: str = ""
    """What ctxwarden's meter counted with (`tiktoken:...`, or `approximate`)."""
    plot: str | None = None
    context: dict[str, Any] = field(default_factory=dict)

    report: ContextReport | None = field(default=None, repr=False)

    @property
    def gauge(self) -> str:
        """Gauge reading at the peak call."""
        return gauge_level(self.peak_fraction)

    def to_json(self) -> str:
        """One JSON object with every figure."""
        figures = {k: v for k, v in asdict(self).items() if k != "report"}
        return json.dumps(figures | {"gauge": self.gauge})


def default_trajectory() -> Path:
    """The trajectory shipped with the package."""
    return Path(str(resources.files("ctxwarden.demo") / "data" / DEFAULT_TRAJECTORY))


def run_demo(
    trajectory: str | Path | None = None,
    *,
    window: int = DEFAULT_WINDOW,
    state_dir: str | Path = DEFAULT_STATE_DIR,
    thread_id: str | None = None,
    console: Console | None = None,
) -> DemoResult:
    """Replay `trajectory` (default: the shipped one) at `window` tokens and measure every call.

    A progress bar goes to `console` when one is given. Needs matplotlib for the usage plot
    (`pip install 'ctxwarden[demo]'`).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise BuildArgumentError(
            f"window={window!r} must be a positive number of tokens. Fix: pass e.g. --window 32000."
        )
    require("matplotlib.figure", "the demo's usage plot")
    recording = load_recording(trajectory or default_trajectory())
    # stable reply ids (the demo replays into a new thread only, so they are unique there): the same run, the same bytes
    model = ReplayChatModel(
        recording=recording, usage="received", reply_ids="replay", profile={"max_input_tokens": window}
    )
    agent = create_context_agent(
        model,
        replay_tools(recording),
        state_dir=state_dir,
        system_prompt=recording.system_prompt,
        summarizer=DETERMINISTIC,  # the replayed model can only replay: summaries are built from the turns
    )
    thread_id = _new_thread(agent.checkpointer, recording, thread_id, state_dir)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    started = time.perf_counter()
    try:
        with _progress(console, recording) as advance:
            messages = replay_into(agent, recording, config, on_call=lambda _message: advance())
        values = agent.get_state(config).values
    finally:
        agent.checkpointer.conn.close()
    result = summarize(messages, recording, thread_id, Path(state_dir), window, time.perf_counter() - started)
    view = last_call_view(messages, values)
    backend = FilesystemBackend(root_dir=Path(state_dir), virtual_mode=True)
    result.recoverable_fraction = round(check_outputs(view, messages, recording.outputs, backend).fraction, 6)
    trace = TraceStore(Path(state_dir) / TRACE_FILE)
    try:
        spend, lifecycle = trace_counts(trace, thread_id, values)
        report = build_report(messages, thread_id=thread_id, spend=spend, values=values, lifecycle=lifecycle)
        folds = [e for e in trace.events(thread_id=thread_id, kind="context_compaction") if e.payload.get("ok")]
        result.fallback_folds = sum(1 for e in folds if e.payload.get("fallback"))
    finally:
        trace.close()
    plot_path = Path(state_dir) / PLOT_FILE
    usage_plot(messages, path=plot_path, title=f"{recording.instance_id or 'replay'} at a {window:,}-token window")
    result.plot, result.context = str(plot_path), report.to_dict()
    result.report = report
    result.counter = TokenMeter().counter_name
    return result


def _new_thread(checkpointer: Any, recording: Recording, given: str | None, state_dir: str | Path) -> str:
    """The thread to replay into: `given`, which must not exist yet, or the first free `demo-<session>-<n>`.

    Numbered, not random, so every run of the demo on a fresh state dir is the same run: the
    thread id is part of every evicted result's path the model reads, and so of its counts.
    """

    def exists(thread: str) -> bool:
        return checkpointer.get_tuple({"configurable": {"thread_id": thread}}) is not None

    if given is not None:
        if exists(given):
            raise BuildArgumentError(
                f"thread {given!r} already holds a conversation in {state_dir}; the demo replays a whole session "
                "into a new thread. Fix: pass a new --thread, or leave it out for a numbered one."
            )
        return given
    prefix = f"demo-{recording.instance_id or 'session'}"
    return next(f"{prefix}-{n}" for n in count(1) if not exists(f"{prefix}-{n}"))


def summarize(
    messages: list[BaseMessage],
    recording: Recording,
    thread_id: str,
    state_dir: Path,
    window: int,
    seconds: float,
) -> DemoResult:
    """Figures of a replayed thread, from its checkpointed messages."""
    calls = [m for m in messages if isinstance(m, AIMessage)]
    per_call = [m.usage_metadata["input_tokens"] if m.usage_metadata else 0 for m in calls]
    events = [kind for m in calls for kind in m.response_metadata.get(METADATA_KEY, {}).get("events", ())]
    evictions = sum(1 for m in messages if is_evicted(m))
    peak = max(per_call, default=0)
    return DemoResult(
        trajectory=recording.source,
        thread_id=thread_id,
        state_dir=str(state_dir),
        window=window,
        calls=len(calls),
        input_tokens_total=sum(per_call),
        input_tokens_peak=peak,
        peak_fraction=round(peak / window, 4),
        overflows=sum(1 for tokens in per_call if tokens > window),
        evictions=evictions,
        clears=events.count("context_clear"),
        folds=events.count("context_compaction"),
        seconds=round(seconds, 3),
        per_call_input_tokens=per_call,
    )


def is_shipped(trajectory: str | Path) -> bool:
    """Whether `trajectory` is the recording shipped with the package (the one the credit line is for)."""
    return Path(trajectory).resolve() == default_trajectory().resolve()


def next_steps(result: DemoResult) -> list[str]:
    """What to try after this run: folds if there were none, then the thread's report and trace.

    Each is a command a shell runs as printed: the `ctxwarden` this run was started as (its path when that is
    not the one on PATH, as after an install into a virtual environment that was never activated), and every
    argument quoted for the shell.
    """
    command = cli_command()
    state = f"--state-dir {shlex.quote(result.state_dir)} --thread {shlex.quote(result.thread_id)}"
    steps = []
    if result.folds == 0:
        steps.append(f"{command} demo --window {max(1, result.window // 2)}   # a smaller window: it folds too")
    steps.append(f"{command} context {state}   # the /context report")
    steps.append(f"{command} trace {state} --kind clear --kind fold   # what the layers did, when")
    return steps


def cli_command(argv0: str | None = None) -> str:
    """How to run the `ctxwarden` command from here: `ctxwarden` when that name on PATH is the one running (or
    the one beside this Python), else the script's path (relative to the working directory when inside it),
    else `python -m ctxwarden` with this interpreter."""
    running = Path(argv0 if argv0 is not None else sys.argv[0])
    beside = Path(sys.executable).parent / "ctxwarden"
    script = running if running.name == "ctxwarden" and running.is_file() else beside
    on_path = shutil.which("ctxwarden")
    if on_path is not None and script.is_file() and Path(on_path).resolve() == script.resolve():
        return "ctxwarden"
    if script.is_file():
        return shlex.quote(_from_here(script))
    return f"{shlex.quote(_from_here(Path(sys.executable)))} -m ctxwarden"


def _from_here(path: Path) -> str:
    """`path` relative to the working directory when it lies inside it (`.venv/bin/ctxwarden`), else absolute."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(absolute)


def render(result: DemoResult, console: Console) -> None:
    """The end-of-run table, for a person (needs rich: `pip install 'ctxwarden[demo]'`)."""
    Table = require("rich.table", "the demo's table").Table
    table = Table(title=f"ctxwarden demo · window {result.window:,} tokens", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("trajectory", Path(result.trajectory).name)
    table.add_row("model calls", f"{result.calls:,}")
    table.add_row("input tokens, total", f"{result.input_tokens_total:,}")
    table.add_row(
        "input tokens, peak",
        f"{result.input_tokens_peak:,} ({result.peak_fraction:.0%} of the window, {result.gauge})",
    )
    table.add_row("calls over the window", f"{result.overflows:,} of {result.calls:,}")
    fallback = f" ({result.fallback_folds} by fallback)" if result.fallback_folds else ""
    table.add_row(
        "evictions / clearing batches / folds", f"{result.evictions} / {result.clears} / {result.folds}{fallback}"
    )
    table.add_row("original output still reachable", f"{result.recoverable_fraction:.1%}")
    table.add_row("tokens counted with", result.counter or TokenMeter().counter_name)
    table.add_row("input tokens per call", _sparkline(result.per_call_input_tokens, result.window))
    table.add_row("thread", f"{result.thread_id} in {result.state_dir}")
    if result.plot:
        table.add_row("usage plot", result.plot)
    console.print(table)
    if result.report is not None:
        console.print()
        console.print(result.report)
    console.print()
    console.print("[bold]Next[/bold]")
    for step in next_steps(result):  # never wrapped: a command cut across lines cannot be copied
        console.print(f"  {step}", highlight=False, markup=False, soft_wrap=True)
    if is_shipped(result.trajectory):
        console.print(f"[dim]{TRAJECTORY_CREDIT}[/dim]")


def _sparkline(values: list[int], window: int, width: int = 36) -> str:
    """One character per bucket of calls, its height the bucket's peak share of the window."""
    if not values:
        return ""
    bars = "▁▂▃▄▅▆▇█"
    size = max(1, -(-len(values) // width))
    buckets = [max(values[i : i + size]) for i in range(0, len(values), size)]
    line = "".join(bars[min(len(bars) - 1, int(v / window * (len(bars) - 1)))] for v in buckets)
    return f"{line} (█ ≥ window)"


@contextmanager
def _progress(console: Console | None, recording: Recording) -> Iterator[Any]:
    if console is None:
        yield lambda: None
        return
    progress_module = require("rich.progress", "the demo's progress bar")
    Progress, TextColumn = progress_module.Progress, progress_module.TextColumn
    BarColumn, MofNCompleteColumn = progress_module.BarColumn, progress_module.MofNCompleteColumn
    TimeElapsedColumn = progress_module.TimeElapsedColumn
    columns = (
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("model calls"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("replay", total=len(recording.steps) + 1)
        yield lambda: progress.advance(task)


__all__ = [
    "DEFAULT_WINDOW",
    "TRAJECTORY_CREDIT",
    "DemoResult",
    "cli_command",
    "default_trajectory",
    "is_shipped",
    "next_steps",
    "render",
    "run_demo",
]
