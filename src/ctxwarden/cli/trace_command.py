"""The `ctxwarden trace` command, and what every command reports a trace or a failure with.

Imported by the command line at start, so it imports nothing heavy at module level: each
function imports what it reads (see the package docstring).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from ctxwarden.core.text import printable
from ctxwarden.errors import CtxwardenError

KIND_ALIASES = {"fold": "context_compaction", "clear": "context_clear", "evict": "eviction"}
"""Short names `--kind` accepts for the lifecycle events (a fold is recorded as `context_compaction`)."""


def event_kinds() -> tuple[str, ...]:
    """Every event kind ctxwarden records, as `--kind` accepts them and the help lists them."""
    from ctxwarden.trace import KINDS

    return (*KINDS, "admit_problem")


def fail(command: str, message: object) -> int:
    sys.stderr.write(f"ctxwarden {command}: {message}\n")
    return 2


def damaged(path: Path, exc: BaseException) -> str:
    return (
        f"the trace at {path} is damaged and cannot be read ({exc}). Fix: move it aside; the next run starts a "
        "new one (the checkpoints are separate and unaffected)."
    )


def postgres_url(url: str | None) -> str | None:
    """`url` when it names Postgres; anything else is refused with the fix."""
    from ctxwarden.trace.postgres import URL_SCHEMES

    if url is not None and not url.startswith(URL_SCHEMES):
        raise CtxwardenError(f"--url {url!r} is not a postgresql:// URL. Fix: pass postgresql://USER@HOST:PORT/DB.")
    return url


def _kinds(asked: list[str] | None, seen: set[str]) -> tuple[set[str] | None, str | None]:
    """The event kinds `--kind` asks for (aliases resolved), or an error naming the kinds there are."""
    if not asked:
        return None, None
    known = {*event_kinds(), *seen}
    wanted = {KIND_ALIASES.get(kind, kind) for kind in asked}
    unknown = sorted(kind for kind in asked if KIND_ALIASES.get(kind, kind) not in known)
    if unknown:
        listing = ", ".join([*sorted(known), *(f"{a} (= {k})" for a, k in KIND_ALIASES.items())])
        return None, f"unknown event kind {', '.join(map(repr, unknown))}. Kinds: {listing}."
    return wanted, None


def trace_command(args: argparse.Namespace) -> int:
    from ctxwarden.core.layout import TRACE_FILE
    from ctxwarden.errors import TraceError
    from ctxwarden.trace import TraceStore

    try:
        url = postgres_url(args.url)
    except CtxwardenError as exc:
        return fail("trace", exc)
    path = args.state_dir / TRACE_FILE
    if url is None and not path.is_file():
        return fail("trace", f"no trace at {path}. Fix: pass the --state-dir the agent ran with.")
    if not args.verify and not args.thread:
        return fail("trace", "which thread? Fix: pass --thread ID (ctxwarden threads lists them), or --verify.")
    store = TraceStore(url or path)
    if args.verify:
        return _verify(store, path, as_json=args.json)
    try:
        known = store.threads()
        if args.thread not in known:
            listing = ", ".join(map(printable, known[:10])) + (" …" if len(known) > 10 else "") if known else "none"
            where = store.location
            return fail("trace", f"thread {args.thread!r} has no events in {where}. Known threads: {listing}.")
        events = store.events(thread_id=args.thread)
    except (TraceError, sqlite3.DatabaseError) as exc:
        return fail("trace", damaged(path, exc))
    finally:
        store.close()
    wanted, problem = _kinds(args.kind, {event.kind for event in events})
    if problem is not None:
        return fail("trace", problem)
    for event in events:
        if wanted is not None and event.kind not in wanted:
            continue
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
            where = f" [{printable(event.namespace)}]" if event.namespace else ""
            model = f" {printable(event.model)}" if event.model else ""
            payload = json.dumps(dict(event.payload), separators=(",", ":"))
            sys.stdout.write(f"{when} {event.kind}{model}{where} {payload}\n")
    return 0


def _verify(store: Any, path: Path, *, as_json: bool) -> int:
    """`trace --verify`: 0 and the head when the trace is sound, 1 and each problem when not, 2 when unreadable."""
    from ctxwarden.errors import TraceError

    try:
        problems = store.verify()
        head = None if problems else store.head()
    except (TraceError, sqlite3.DatabaseError) as exc:
        return fail("trace", damaged(path, exc))
    finally:
        store.close()
    if as_json:
        found = {"location": store.location, "ok": not problems, "problems": problems}
        if head is not None:
            found["head"] = {"seq": head.seq, "id": head.id, "hash": head.hash}
        sys.stdout.write(json.dumps(found) + "\n")
    elif head is not None:
        sys.stdout.write(
            f"the trace at {store.location} is intact: {head.seq:,} events chained; head #{head.seq} "
            f"{head.id or '(empty)'} {head.hash}\n"
        )
    else:
        listed = "".join(f"\n  - {problem}" for problem in problems)
        sys.stderr.write(f"ctxwarden trace: the trace at {store.location} fails verification:{listed}\n")
    return 1 if problems else 0


__all__ = ["KIND_ALIASES", "damaged", "event_kinds", "fail", "postgres_url", "trace_command"]
