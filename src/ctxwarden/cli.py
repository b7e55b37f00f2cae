"""The `ctxwarden` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from ctxwarden.errors import CtxwardenError


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens (e.g. 32000)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of tokens (e.g. 32000)")
    return value


def build_parser() -> argparse.ArgumentParser:
    from ctxwarden.demo import DEFAULT_WINDOW
    from ctxwarden.stack.build import DEFAULT_STATE_DIR

    parser = argparse.ArgumentParser(prog="ctxwarden", description="Context-window management for LangGraph agents.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="replay a real recorded agent session through the context manager",
        description="Replay a recorded agent session through create_context_agent and report what each call received.",
    )
    demo.add_argument(
        "--trajectory",
        type=Path,
        help="a mini-swe-agent .traj.json or an OpenAI message list (default: the shipped sqlfluff-1733 session)",
    )
    demo.add_argument(
        "--window",
        type=_positive_int,
        default=DEFAULT_WINDOW,
        help=f"context window in tokens (default: {DEFAULT_WINDOW:,})",
    )
    demo.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"where checkpoints and offloaded files go (default: {DEFAULT_STATE_DIR})",
    )
    demo.add_argument("--thread-id", help="thread to replay into (default: a new one)")
    demo.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of the table")

    context = commands.add_parser("context", help="the /context report of a checkpointed thread")
    context.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="the agent's state dir")
    context.add_argument("--thread", required=True, help="thread id")
    context.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    context.add_argument("--url", help="a postgresql:// URL holding the checkpoints and the trace (not --state-dir)")

    threads = commands.add_parser("threads", help="the threads of a state dir, with their size and gauge")
    threads.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="the agent's state dir")
    threads.add_argument("--json", action="store_true", help="one JSON object per thread, one per line")

    trace = commands.add_parser("trace", help="the trace events of a thread, oldest first")
    trace.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="the agent's state dir")
    trace.add_argument("--thread", required=True, help="thread id")
    trace.add_argument("--kind", action="append", help="only events of this kind (repeatable)")
    trace.add_argument("--json", action="store_true", help="one JSON object per line")
    trace.add_argument("--url", help="a postgresql:// URL holding the trace (instead of --state-dir)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    if args.command == "context":
        return _context(args)
    if args.command == "trace":
        return _trace(args)
    if args.command == "threads":
        return _threads(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _fail(command: str, message: object) -> int:
    sys.stderr.write(f"ctxwarden {command}: {message}\n")
    return 2


def _postgres_url(url: str | None) -> str | None:
    """`url` when it names Postgres; anything else is refused with the fix."""
    from ctxwarden.observe.pg_trace import URL_SCHEMES

    if url is not None and not url.startswith(URL_SCHEMES):
        raise CtxwardenError(f"--url {url!r} is not a postgresql:// URL. Fix: pass postgresql://USER@HOST:PORT/DB.")
    return url


def _context(args: argparse.Namespace) -> int:
    from ctxwarden.observe import TraceStore, UnknownThreadError, context_report

    config: Any = {"configurable": {"thread_id": args.thread}}
    try:
        if _postgres_url(args.url) is None:
            report = context_report(args.state_dir, config)
        else:
            try:
                from langgraph.checkpoint.postgres import PostgresSaver
            except ImportError:
                return _fail("context", 'reading Postgres needs its extra. Fix: pip install "ctxwarden[postgres]"')
            trace = TraceStore(args.url)
            try:
                with PostgresSaver.from_conn_string(args.url) as saver:
                    report = context_report(saver, config, trace=trace)
            finally:
                trace.close()
    except (UnknownThreadError, CtxwardenError) as exc:
        return _fail("context", exc)
    except Exception as exc:  # e.g. the database refused the connection
        return _fail("context", f"{type(exc).__name__}: {exc}")
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
        return 0
    out = Console()
    if out.is_terminal:
        out.print(report)
    else:
        sys.stdout.write(report.to_text() + "\n")
    return 0


def _threads(args: argparse.Namespace) -> int:
    from ctxwarden.observe import UnknownThreadError, context_report
    from ctxwarden.observe.thread import known_threads, open_state_dir

    try:
        saver = open_state_dir(args.state_dir)
    except UnknownThreadError as exc:
        return _fail("threads", exc)
    rows: list[dict[str, Any]] = []
    try:
        for thread in known_threads(saver):
            try:
                report = context_report(
                    saver, {"configurable": {"thread_id": thread}}, trace=_trace_path(args.state_dir)
                )
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
        saver.conn.close()  # type: ignore[attr-defined]
    if args.json:
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return 0
    if not rows:
        sys.stdout.write(f"no threads in {args.state_dir}\n")
        return 0
    width = max(len(r["thread_id"]) for r in rows)
    sys.stdout.write(f"{'thread':<{width}}  {'model':<20} {'calls':>6} {'used':>10} {'window':>10}  gauge\n")
    for r in rows:
        if "error" in r:
            sys.stdout.write(f"{r['thread_id']:<{width}}  (not measured yet)\n")
            continue
        sys.stdout.write(
            f"{r['thread_id']:<{width}}  {r['model'][:20]:<20} {r['calls']:>6,} {r['used']:>10,} {r['window']:>10,}  "
            f"{r['gauge']} ({r['fraction']:.0%})\n"
        )
    return 0


def _trace_path(state_dir: Path) -> Path | None:
    from ctxwarden.observe import TRACE_FILE

    path = state_dir / TRACE_FILE
    return path if path.is_file() else None


def _trace(args: argparse.Namespace) -> int:
    from ctxwarden.observe import TRACE_FILE, TraceError, TraceStore

    try:
        url = _postgres_url(args.url)
    except CtxwardenError as exc:
        return _fail("trace", exc)
    path = args.state_dir / TRACE_FILE
    if url is None and not path.is_file():
        return _fail("trace", f"no trace at {path}. Fix: pass the --state-dir the agent ran with.")
    store = TraceStore(url or path)
    try:
        known = store.threads()
        if args.thread not in known:
            listing = ", ".join(known[:10]) + (" …" if len(known) > 10 else "") if known else "none"
            where = store.location
            return _fail("trace", f"thread {args.thread!r} has no events in {where}. Known threads: {listing}.")
        events = store.events(thread_id=args.thread, kind=args.kind)
    except TraceError as exc:
        return _fail("trace", exc)
    finally:
        store.close()
    for event in events:
        if args.json:
            row = {
                "id": event.id,
                "ts": event.ts,
                "thread_id": event.thread_id,
                "namespace": event.namespace,
                "run_id": event.run_id,
                "kind": event.kind,
                "model": event.model,
                "payload": dict(event.payload),
            }
            sys.stdout.write(json.dumps(row) + "\n")
        else:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.ts))
            where = f" [{event.namespace}]" if event.namespace else ""
            model = f" {event.model}" if event.model else ""
            payload = json.dumps(dict(event.payload), separators=(",", ":"))
            sys.stdout.write(f"{when} {event.kind}{model}{where} {payload}\n")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ctxwarden.demo import render, run_demo

    out = Console()
    err = Console(stderr=True)
    try:
        result = run_demo(
            args.trajectory,
            window=args.window,
            state_dir=args.state_dir,
            thread_id=args.thread_id,
            console=err if err.is_terminal else None,
        )
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
