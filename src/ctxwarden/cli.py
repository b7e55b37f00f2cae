"""The `ctxwarden` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


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
