"""The `ctxwarden` command line: the demo, and the /context report, trace and threads of a state dir.

Bad input never ends in a traceback: an unknown thread, a missing state dir, a damaged
trace or an unknown event kind prints what is wrong and how to fix it, and exits with 2;
a closed pipe (`ctxwarden trace ... | head -1`) ends quietly. Modules are imported inside
the commands so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxwarden.cli.trace_command import KIND_ALIASES, damaged, event_kinds, fail, postgres_url, trace_command
from ctxwarden.core.text import printable
from ctxwarden.errors import CtxwardenError, WindowTooSmallError


def _version() -> str:
    from ctxwarden import __version__

    return __version__


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens (e.g. 32000)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of tokens (e.g. 32000)")
    return value


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    from ctxwarden.core.layout import DEFAULT_STATE_DIR

    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        metavar="DIR",
        help=f"the agent's state dir, holding checkpoints.sqlite and trace.sqlite (default: {DEFAULT_STATE_DIR})",
    )


def _thread_option(parser: argparse.ArgumentParser, *, required: bool, help: str) -> None:
    parser.add_argument("--thread", dest="thread", required=required, metavar="ID", help=help)


def build_parser() -> argparse.ArgumentParser:
    from ctxwarden.demo.run import DEFAULT_WINDOW

    parser = argparse.ArgumentParser(
        prog="ctxwarden",
        description="Context-window management for LangGraph agents: a demo on a recorded session, and the "
        "/context report, trace and threads of an agent's state dir.",
    )
    parser.add_argument("--version", action="version", version=f"ctxwarden {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="replay a real recorded agent session through the context manager",
        description="Replay a recorded agent session through create_context_agent with a progress bar, then print "
        "what each call received, what the context manager did and the /context report; writes "
        "<state-dir>/usage.png. Needs the demo extra: pip install 'ctxwarden[demo]'.",
    )
    demo.add_argument(
        "--trajectory",
        type=Path,
        metavar="PATH",
        help="a mini-swe-agent .traj.json or an OpenAI message list (default: the shipped sqlfluff-1733 session)",
    )
    demo.add_argument(
        "--window",
        type=_positive_int,
        default=DEFAULT_WINDOW,
        metavar="TOKENS",
        help=f"context window in tokens (default: {DEFAULT_WINDOW}; try 16000 to see folds)",
    )
    _state_dir_option(demo)
    _thread_option(
        demo, required=False, help="a new thread to replay into (default: the first free demo-<session>-<n>)"
    )
    demo.add_argument("--thread-id", dest="thread", help=argparse.SUPPRESS)  # the demo's older spelling
    demo.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of the table")

    context = commands.add_parser(
        "context",
        help="the /context report of a checkpointed thread",
        description="What the thread's next model call will carry, by category, against its window, with the "
        "clear and fold thresholds and what they will do. Text when piped, a table in a terminal.",
    )
    _state_dir_option(context)
    _thread_option(context, required=True, help="the thread id (ctxwarden threads lists them)")
    context.add_argument("--json", action="store_true", help="print every figure as one JSON object")
    context.add_argument(
        "--url",
        help="a postgresql:// URL holding the checkpoints and the trace (not --state-dir), or a LangGraph server's "
        "http:// address: its thread's state is read over the server's API, the trace from --trace or --state-dir",
    )
    context.add_argument("--trace", metavar="PATH", help="the trace of a served thread: a trace.sqlite or a URL")

    threads = commands.add_parser(
        "threads",
        help="the threads of a state dir, with their size and gauge",
        description="Every checkpointed thread of a state dir with its model, calls, tokens used, window and gauge.",
    )
    _state_dir_option(threads)
    threads.add_argument("--json", action="store_true", help="one JSON object per thread, one per line")

    trace = commands.add_parser(
        "trace",
        help="the trace events of a thread, oldest first; or --verify the whole trace",
        description="The thread's trace events, oldest first: time, kind, model, namespace (for a subagent) and "
        f"payload. Kinds: {', '.join(event_kinds())}; "
        f"{', '.join(KIND_ALIASES)} name the lifecycle ones ({', '.join(KIND_ALIASES.values())}). "
        "With --verify, checks the whole trace instead (its hash chain, triggers and migrations) and exits with 1 "
        "when it was tampered with.",
    )
    _state_dir_option(trace)
    _thread_option(trace, required=False, help="the thread id (ctxwarden threads lists them); not with --verify")
    trace.add_argument(
        "--verify",
        action="store_true",
        help="check the whole trace: names the first row edited, replaced, deleted or moved (exit 1), or prints the "
        "head hash to keep elsewhere (exit 0)",
    )
    trace.add_argument(
        "--kind", action="append", metavar="KIND", help="only events of this kind (repeatable; e.g. fold, tool_call)"
    )
    trace.add_argument("--json", action="store_true", help="one JSON object per line")
    trace.add_argument("--url", help="a postgresql:// URL holding the trace (instead of --state-dir)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"demo": _demo, "context": _context, "trace": trace_command, "threads": _threads}
    try:
        return commands[args.command](args)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as other commands do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _closed_pipe() -> None:
    raise BrokenPipeError


def _context(args: argparse.Namespace) -> int:
    from ctxwarden.core.layout import TRACE_FILE
    from ctxwarden.errors import TraceError
    from ctxwarden.report import context_report
    from ctxwarden.trace import TraceStore

    path = args.state_dir / TRACE_FILE
    config: Any = {"configurable": {"thread_id": args.thread}}
    try:
        if _server_url(args.url):  # a LangGraph server's thread
            report = _served_report(args.url, config, args.trace or (path if path.is_file() else None))
        elif postgres_url(args.url) is None:
            report = context_report(args.state_dir, config, trace=TraceStore(path) if path.is_file() else None)
        else:
            report = _postgres_report(args.url, config)
    except (TraceError, sqlite3.DatabaseError) as exc:
        return fail("context", damaged(path, exc))
    except CtxwardenError as exc:
        return fail("context", exc)
    except Exception as exc:  # e.g. the database refused the connection
        return fail("context", f"{type(exc).__name__}: {exc}")
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
    else:
        _print_report(report)
    if not report.trace_found:
        sys.stderr.write(
            f"ctxwarden context: no trace at {path}, so what the thread spent and what the layers did are unknown. "
            "Fix: pass the --state-dir the agent ran with (for a served thread, --trace PATH).\n"
        )
    return 0


def _print_report(report: Any) -> None:
    """A table in a terminal when rich is installed, else the text form."""
    from ctxwarden.core.extras import available

    if sys.stdout.isatty() and available("rich"):
        from rich.console import Console

        Console().print(report)
    else:
        sys.stdout.write(report.to_text() + "\n")


def _threads(args: argparse.Namespace) -> int:
    from ctxwarden.core.layout import TRACE_FILE
    from ctxwarden.errors import TraceError, UnknownThreadError
    from ctxwarden.report import context_report
    from ctxwarden.thread.read import known_threads, open_state_dir
    from ctxwarden.trace import TraceStore

    try:
        saver = open_state_dir(args.state_dir)
    except UnknownThreadError as exc:
        return fail("threads", exc)
    path = args.state_dir / TRACE_FILE
    rows: list[dict[str, Any]] = []
    try:
        for thread in known_threads(saver):
            try:
                report = context_report(
                    saver,
                    {"configurable": {"thread_id": thread}},
                    trace=TraceStore(path) if path.is_file() else None,
                )
            except (TraceError, sqlite3.DatabaseError) as exc:
                return fail("threads", damaged(path, exc))
            except CtxwardenError as exc:  # a thread with no measured call yet
                rows.append({"thread_id": thread, "error": str(exc)})
                continue
            rows.append(
                {
                    "thread_id": thread,
                    "model": report.model,
                    "calls": report.calls,
                    "used": report.used,
                    "window": report.window,
                    "fraction": round(report.fraction, 4),
                    "gauge": report.gauge,
                }
            )
    finally:
        saver.conn.close()
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return 0
    if not rows:
        sys.stdout.write(f"no threads in {args.state_dir}\n")
        return 0
    shown = [printable(r["thread_id"]) for r in rows]  # an id is the client's: no escape code reaches the terminal
    width = max(map(len, shown))
    sys.stdout.write(f"{'thread':<{width}}  {'model':<20} {'calls':>6} {'used':>10} {'window':>10}  gauge\n")
    for r, thread in zip(rows, shown, strict=True):
        if "error" in r:
            sys.stdout.write(f"{thread:<{width}}  (not measured yet)\n")
            continue
        model = printable(r["model"])[:20]
        sys.stdout.write(
            f"{thread:<{width}}  {model:<20} {r['calls']:>6,} {r['used']:>10,} {r['window']:>10,}  "
            f"{r['gauge']} ({r['fraction']:.0%})\n"
        )
    return 0


def _server_url(url: str | None) -> bool:
    from ctxwarden.thread.remote import is_server_url

    return is_server_url(url)


def _served_report(url: str, config: Any, trace: Any) -> Any:
    from ctxwarden.report import context_report
    from ctxwarden.thread.remote import served_client

    with served_client(url) as client:
        return context_report(client, config, trace=trace)


def _postgres_report(url: str, config: Any) -> Any:
    from ctxwarden.report import context_report
    from ctxwarden.trace import TraceStore

    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as exc:
        raise CtxwardenError('reading Postgres needs its extra. Fix: pip install "ctxwarden[postgres]"') from exc
    trace = TraceStore(url)
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            return context_report(saver, config, trace=trace)
    finally:
        trace.close()


def _demo(args: argparse.Namespace) -> int:
    from ctxwarden.core.extras import require

    try:
        console = require("rich.console", "ctxwarden demo")
        require("matplotlib.figure", "ctxwarden demo")
    except CtxwardenError as exc:
        sys.stderr.write(f"ctxwarden demo: {exc}\n")
        return 1
    from ctxwarden.demo import render, run_demo

    out = console.Console()
    out.on_broken_pipe = _closed_pipe  # rich would exit with 1: end quietly, with 0, as every command does
    err = console.Console(stderr=True)
    try:
        result = run_demo(
            args.trajectory,
            window=args.window,
            state_dir=args.state_dir,
            thread_id=args.thread,
            console=err if err.is_terminal else None,
        )
    except WindowTooSmallError as exc:
        sys.stderr.write(
            f"ctxwarden demo: --window {exc.window:,} cannot hold the recorded agent's system prompt and tool schemas "
            f"({exc.fixed:,} tokens) before any message. Fix: pass --window {max(4 * exc.fixed, 8_000)} or more.\n"
        )
        return 2
    except (CtxwardenError, ValueError) as exc:
        sys.stderr.write(f"ctxwarden demo: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        render(result, out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
