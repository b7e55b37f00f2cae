"""The trace's hash chain: each row holds a hash of its content and of the row before it.

Triggers refuse UPDATE, DELETE and REPLACE, but whoever can open the database can drop a
trigger, rewrite a row and put the trigger back. The chain makes that visible: row n holds
`prev_hash` (row n-1's hash) and `hash = sha256(prev_hash, n, its columns)`, so an edited,
replaced, deleted or moved row no longer matches, and `verify()` names the first one.

The chain follows `seq`, the position a row was appended at, not the sortable id: an id is
taken when the event happens and a background writer may store it after a later one, so
id order is not append order. `seq` is given inside the append's write transaction (SQLite
`BEGIN IMMEDIATE`, Postgres a row lock on the head), where the previous hash is read, so
every writer of every process extends one chain.

The head record (`events_head`: the last seq, id and hash) is advanced by a trigger in the
same transaction as each insert. It is what shows a deleted last row, which no later row
links to. What the chain cannot show: a whole chain recomputed from some row on with the head
rewritten to match, or rows appended with their hashes computed by hand (the hash has no
key). The head hash that `ctxwarden trace --verify` prints, kept elsewhere, catches the first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxwarden.errors import TraceError

GENESIS = "0" * 64
"""The `prev_hash` of the first row."""

CHAIN_COLUMNS = ("seq", "prev_hash", "hash")


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The last row appended: its position (0 for an empty trace), id and hash."""

    seq: int
    id: str
    hash: str


def link_hash(prev_hash: str, seq: int, row: Sequence[Any]) -> str:
    """The hash of a row at `seq` after `prev_hash`, over its columns as stored (`COLUMNS` order, payload as text)."""
    id_, ts, thread, namespace, run, kind, model, payload = row
    body = json.dumps([seq, id_, float(ts), thread, namespace, run, kind, model, payload], separators=(",", ":"))
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def chained(head: ChainHead, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """`rows` (in `COLUMNS` order) with their seq, prev_hash and hash appended, following `head`."""
    out: list[tuple[Any, ...]] = []
    seq, prev = head.seq, head.hash
    for row in rows:
        seq += 1
        digest = link_hash(prev, seq, row)
        out.append((*row, seq, prev, digest))
        prev = digest
    return out


def new_rows(rows: Sequence[Sequence[Any]], stored: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """The rows of a batch still to insert: an event already stored as it is (a retried append) is skipped.

    An id already stored with other content, or twice in the batch with other content,
    is a `TraceError` naming the id: the trace is append-only, an event is never replaced.
    """
    seen: dict[Any, tuple[Any, ...]] = {row[0]: _same(row) for row in stored}
    fresh = []
    for row in rows:
        known = seen.get(row[0])
        if known is None:
            seen[row[0]] = _same(row)
            fresh.append(row)
        elif known != _same(row):
            raise TraceError(
                f"trace event id {row[0]!r} is already stored with other content, and the trace is append-only. "
                "Fix: give each event its own id (leave TraceEvent.id empty and one is made)."
            )
    return fresh


def _same(row: Sequence[Any]) -> tuple[Any, ...]:
    """A row's columns as compared for a repeated id (ts as a float)."""
    return (row[0], float(row[1]), *row[2:])


def _at(seq: int, id_: str) -> str:
    return f"row {id_!r} (#{seq})"


def first_break(rows: Iterable[Sequence[Any]], head: ChainHead | None) -> str | None:
    """The first place the chain is broken, as a sentence naming the row and what happened; None when it is whole.

    `rows` are (seq, prev_hash, hash, *COLUMNS) in seq order, every row that has a seq;
    `head` is the head record (None when it is missing).
    """
    last = ChainHead(0, "", GENESIS)
    for seq, prev_hash, stored, *row in rows:
        id_ = row[0]
        if seq == last.seq:
            return f"{_at(seq, id_)} repeats the position of row {last.id!r}: a row was inserted around the chain"
        if seq > last.seq + 1:
            missing = f"#{last.seq + 1}" if seq == last.seq + 2 else f"#{last.seq + 1} to #{seq - 1}"
            after = f"after {_at(last.seq, last.id)}" if last.seq else "at the start"
            return f"rows {missing} are missing {after}, before {_at(seq, id_)}: deleted"
        if stored is None or link_hash(str(prev_hash), seq, row) != stored:
            return f"{_at(seq, id_)} does not match its hash: its content was edited, replaced or moved"
        if prev_hash != last.hash:
            return f"{_at(last.seq, last.id)} was rewritten: {_at(seq, id_)}, appended after it, links to another hash"
        last = ChainHead(seq, id_, stored)
    if head is None:
        return "the head record (events_head) is missing: it was deleted"
    if head.seq > last.seq:
        tail = _at(head.seq, head.id) if head.seq == last.seq + 1 else f"rows #{last.seq + 1} to #{head.seq}"
        end = f"after {_at(last.seq, last.id)}" if last.seq else "(the trace holds none)"
        return f"{tail}, the last appended, {'is' if head.seq == last.seq + 1 else 'are'} missing {end}: deleted"
    if head.seq < last.seq:
        return f"{_at(last.seq, last.id)} is past the head record (#{head.seq}): appended around the chain"
    if head.hash != last.hash or head.id != last.id:
        return f"{_at(last.seq, last.id)}, the last row, was rewritten: the head record holds another hash"
    return None


__all__ = ["CHAIN_COLUMNS", "GENESIS", "ChainHead", "chained", "first_break", "link_hash", "new_rows"]
