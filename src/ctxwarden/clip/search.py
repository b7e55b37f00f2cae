"""Searching everything that left the model's view: `recall(query=...)`.

`recall(call_id=...)` brings one call back, but only to an agent that remembers which
call it was. An agent usually remembers a detail instead: an error message, a path, a
function name. So recall also searches, line by line, everything this conversation has
held: every tool result (an evicted one from its file, whole), every call's arguments,
the user's and the agent's messages (folded turns included: the thread keeps them), the
thread's own offloaded files its messages do not hold (a subagent's evictions and history
files, the raw bytes of its rendered outputs; never another branch's), and, in a fork, its
parent's thread, read-only.

Each hit names its call id, tool, turn (the agent's n-th model call) and line, and what
became of it (cleared, clipped, evicted, folded). A hit the model still sees is marked
as in view, without its text, rather than repeated. Results come in pages of at most
`PAGE_TOKENS` tokens. Only the running thread and the threads it was forked from are
searched: the sources are built from its own state and its own folders, never from a
name the model gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, takewhile
from typing import Any

import re2  # type: ignore[import-untyped]
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.clip.evict import RECALL_TOOL
from ctxwarden.clip.names import changed_file
from ctxwarden.clip.placeholders import is_cleared, text_cleared
from ctxwarden.clip.render import RAW_SUFFIX
from ctxwarden.clip.search_files import Reader, record_of
from ctxwarden.clip.terminal import render as render_terminal
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import content_text, encode, text_of, value_text
from ctxwarden.core.view_made import is_view_message

PAGE_TOKENS = 2_000
"""Most tokens one page of search results takes."""

MAX_HITS = 2_000
"""Hits counted at most; past it the answer asks for a narrower query."""

LINE_CHARS = 240
"""A hit's line is shown up to this many characters, around the match."""


@dataclass(frozen=True, slots=True)
class Source:
    """One text the search reads, and what to say about a hit in it."""

    text: str
    what: str
    """`result`, `args`, `user`, `assistant` or `file`."""
    status: str = ""
    """What became of it: `cleared`, `clipped`, `evicted`, `folded`, `in view`, or `""` when unknown."""
    call_id: str | None = None
    tool: str | None = None
    turn: int | None = None
    thread: str | None = None
    """Set when the text belongs to another thread (the one this thread was forked from)."""
    path: str | None = None
    shown: frozenset[str] | None = None
    """The stripped lines of it the model sees now (`None`: none)."""
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    source: Source
    line: int
    text: str
    visible: bool


def lines_of(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    return frozenset(s for s in (line.strip() for line in text.splitlines()) if s)


def _args_text(args: Any) -> str:
    """A call's arguments as lines a person reads: `name: value`, a multi-line value (a script) on its own lines."""
    return "\n".join(f"{name}: {value_text(value)}" for name, value in (args or {}).items())


def _is_view(message: BaseMessage) -> bool:
    """A fold summary or gauge note made for a view: not searched (what it quotes is searched where it came from)."""
    return is_view_message(message)


def evicted_path(message: ToolMessage) -> str | None:
    record = record_of(message)
    return str(record["path"]) if isinstance(record, dict) and record.get("evicted") and record.get("path") else None


def message_sources(
    messages: Sequence[BaseMessage],
    view: Sequence[BaseMessage] | None,
    read: Reader,
    *,
    thread: str | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[Source]:
    """A source per message text, call's arguments and tool result (evicted ones read whole through `read`).

    `view` is what the model is shown now (`None`: not known, nothing is marked); messages whose id is in
    `skip` are left out (a fork's seed holds its parent's messages under the same ids).
    """
    shown = {m.id: m for m in view if m.id} if view is not None else None
    # a fold summary in view quotes lines of what it folded (its facts section): those lines are in view too
    quoted = lines_of("\n".join(content_text(m.content) for m in view or () if _is_view(m))) or frozenset()
    paths = [p for m in messages if isinstance(m, ToolMessage) and (p := evicted_path(m)) is not None]
    files = read(paths) if paths else {}
    turns: dict[str, int] = {}
    turn = 0
    found: list[Source] = []
    for message in messages:
        if isinstance(message, AIMessage):
            turn += 1
        if _is_view(message) or (message.id is not None and message.id in skip):
            continue
        if isinstance(message, ToolMessage) and message.name == RECALL_TOOL:
            continue  # recall's own answers repeat what it found
        seen = shown.get(message.id) if shown is not None and message.id else None
        one = Source("", "", thread=thread, message_id=message.id)
        if isinstance(message, ToolMessage):
            path = evicted_path(message)
            text = _original(message, files.get(path)) if path else text_of(message)
            status = _result_status(message, seen, shown is not None, path)
            found.append(
                replace(
                    one,
                    text=text,
                    what="result",
                    status=status,
                    call_id=message.tool_call_id,
                    tool=message.name,
                    turn=turns.get(message.tool_call_id),
                    path=path,
                    shown=_shown(seen, quoted),
                )
            )
        elif isinstance(message, AIMessage):
            text = content_text(message.content)
            if text.strip():
                status = "cleared" if seen is not None and text_cleared(seen) else _status(seen, shown)
                lines = _shown(seen, quoted)
                found.append(replace(one, text=text, what="assistant", status=status, turn=turn, shown=lines))
            shown_calls = {str(c.get("id")): c for c in seen.tool_calls} if isinstance(seen, AIMessage) else {}
            for call in message.tool_calls:
                call_id = str(call.get("id"))
                turns[call_id] = turn
                if call.get("name") == RECALL_TOOL:
                    continue
                args = _args_text(call.get("args"))
                visible = shown_calls.get(call_id)
                visible_args = _args_text(visible.get("args")) if visible is not None else None
                status = _status(seen, shown) if visible_args in (None, args) else "clipped"
                found.append(
                    replace(
                        one,
                        text=args,
                        what="args",
                        status=status,
                        call_id=call_id,
                        tool=call.get("name"),
                        turn=turn,
                        shown=lines_of(visible_args) if visible_args is not None else _shown(seen, quoted),
                    )
                )
        elif isinstance(message, HumanMessage):
            text = content_text(message.content)
            status, lines = _status(seen, shown), _shown(seen, quoted)
            found.append(replace(one, text=text, what="user", status=status, turn=turn + 1, shown=lines))
    return found


def _original(message: ToolMessage, text: str | None) -> str:
    """An evicted output's text: its file's, unless that file is unread or changed since (then the preview kept)."""
    record = message.response_metadata.get(METADATA_KEY) or {}
    return text if text is not None and not changed_file(record, encode(text)) else text_of(message)


def _shown(seen: BaseMessage | None, quoted: frozenset[str]) -> frozenset[str] | None:
    """The lines of a message the model sees: its own in view, else those a fold summary quotes."""
    if seen is None:
        return quoted
    return lines_of(text_of(seen) if isinstance(seen, ToolMessage) else content_text(seen.content))


def _status(seen: BaseMessage | None, shown: Mapping[Any, BaseMessage] | None) -> str:
    if shown is None:
        return ""
    return "in view" if seen is not None else "folded"


def _result_status(message: ToolMessage, seen: BaseMessage | None, known: bool, path: str | None) -> str:
    if not known:
        return "evicted" if path else ""
    if seen is None:
        return "folded"
    if is_cleared(seen):
        return "cleared"
    return "evicted" if path else "in view"


def file_sources(paths: Sequence[str], read: Reader, *, thread: str | None = None) -> list[Source]:
    texts = read(paths) if paths else {}
    return [Source(texts[p], "file", "", thread=thread, path=p) for p in paths if p in texts]


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is answered to the model, not logged to stderr


def matcher(query: str, regex: bool) -> Callable[[str], Any] | str:
    """A line matcher for `query`, or why it cannot be one.

    A regular expression runs on RE2, whose time is linear in the line: a backtracking engine takes time
    exponential in it for patterns such as `(a+)+$`, and the pattern comes from the model."""
    if not query.strip():
        return '[ctxwarden: recall(query=...) needs text to search for, e.g. recall(query="KeyError").]'
    if not regex:
        return re.compile(re.escape(query), re.IGNORECASE).search
    try:
        search: Callable[[str], Any] = re2.compile(query, options=_RE2_OPTIONS).search
        return search
    except re2.error as exc:
        try:
            re.compile(query)
        except re.error as invalid:
            return (
                f"[ctxwarden: {query!r} is not a valid regular expression ({invalid}). Fix it, or pass regex=False "
                "to search for the text as it is.]"
            )
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        return (
            f"[ctxwarden: {query!r} uses what a search in linear time cannot run ({why}): backreferences (\\1) and "
            "lookaround ((?=...), (?!...), (?<=...), (?<!...)) are not supported. Search for a plain part of it "
            "with regex=False, or write the pattern without them.]"
        )


def _lines(source: Source) -> Iterator[str]:
    """The lines of `source` as the agent's `read_file` numbers them (split at `\\n` only: `splitlines` also split at
    `\\r`, a form feed or U+2028, and the numbers a hit named were not the file's); those of a terminal output's raw
    bytes (`.raw`) as a terminal shows each, without escape codes, its progress frames one line."""
    raw = source.path is not None and source.path.endswith(RAW_SUFFIX)
    for line in source.text.split("\n"):
        yield render_terminal(line).text.replace("\n", " ") if raw else line.removesuffix("\r")


def find(sources: Sequence[Source], match: Callable[[str], Any]) -> tuple[list[Hit], bool]:
    """Every matching line, in order; a file line already found in a message is not repeated. Also: whether cut."""
    hits: list[Hit] = []
    found_lines: set[str] = set()
    for source in sources:
        for number, line in enumerate(_lines(source), start=1):
            found = match(line)
            if found is None:
                continue
            stripped = line.strip()
            if source.what == "file" and stripped in found_lines:
                continue
            found_lines.add(stripped)
            visible = source.shown is not None and stripped in source.shown
            hits.append(Hit(source, number, _around(line, found.start()), visible))
            if len(hits) >= MAX_HITS:
                return hits, True
    return hits, False


def _around(line: str, at: int) -> str:
    """`line`, stripped, or the `LINE_CHARS` of it around the match when it is longer."""
    if len(line.strip()) <= LINE_CHARS:
        return line.strip()
    start = max(0, min(at - LINE_CHARS // 3, len(line) - LINE_CHARS))
    end = start + LINE_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


def describe(hit: Hit) -> str:
    """One hit as a line of the answer."""
    s = hit.source
    where = f"parent thread {s.thread!r}: " if s.thread else ""
    if s.what == "file":
        label = f"{s.path}, line {hit.line}"
    elif s.what in ("result", "args"):
        label = f"call {s.call_id} ({s.tool or 'tool'}, turn {s.turn or '?'}) {s.what}, line {hit.line}"
    else:
        label = f"{s.what} message, turn {s.turn}, line {hit.line}"
    if hit.visible:
        return f"- {where}{label}: in your view now"
    status = f" [{s.status}]" if s.status and s.status != "in view" else ""
    return f"- {where}{label}{status}: {hit.text}"


def render(
    hits: Sequence[Hit],
    cut: bool,
    query: str,
    regex: bool,
    page: int,
    counter: Callable[[str], int],
    room: int | None = None,
    page_tokens: int = PAGE_TOKENS,
) -> str:
    """Page `page` of the answer: at most `page_tokens` tokens of hits (`PAGE_TOKENS`, or less on a window with less
    room), with where to find the rest; of a page longer than `room` tokens (what the other calls of the turn leave
    this answer), the lines that fit, saying so."""
    kind = "regex" if regex else "text"
    if not hits:
        return (
            f"[ctxwarden: no line of this conversation matches {kind} {query!r} (searched tool results, arguments, "
            "messages, evicted and folded content, and the thread this one was forked from).]"
        )
    pages: list[list[tuple[str, int]]] = [[]]
    used = 0
    for hit in hits:
        line = describe(hit)
        tokens = counter(line) + 1
        if pages[-1] and used + tokens > page_tokens:
            pages.append([])
            used = 0
        pages[-1].append((line, tokens))
        used += tokens
    page = max(1, page)
    visible = sum(h.visible for h in hits)
    one = len(hits) == 1 and not cut
    count = f"{len(hits):,}{'+' if cut else ''} {'line matches' if one else 'lines match'}"
    head = f"[ctxwarden: {count} {kind} {query!r}; {visible:,} in your view now"
    if page > len(pages):
        return f"{head}. There {'is' if len(pages) == 1 else 'are'} {len(pages)} page(s): page {page} is empty.]"
    regex_arg = ", regex=True" if regex else ""
    more = f"recall(query={query!r}{regex_arg}, page={page + 1}) for the next page. " if page < len(pages) else ""
    narrower = "More lines match than are counted: narrow the query. " if cut else ""
    tail = f'[ctxwarden: {more}{narrower}recall(call_id=...) returns a whole result (part="args": its arguments).]'
    lines = [line for line, _tokens in pages[page - 1]]
    running = accumulate(tokens for _line, tokens in pages[page - 1])
    fit = len(lines) if room is None else sum(1 for _total in takewhile(lambda total: total <= room, running))
    if fit < len(lines):
        tail = (
            f"[ctxwarden: the first {fit} of this page's {len(lines)} lines, as many as the other calls of this turn "
            f"leave room for; ask for page={page} with no other call beside it for all of them.]"
        )
    return "\n".join([f"{head}. Page {page} of {len(pages)}:]", *lines[:fit], tail])


__all__ = [
    "MAX_HITS",
    "PAGE_TOKENS",
    "Hit",
    "Source",
    "describe",
    "file_sources",
    "find",
    "lines_of",
    "matcher",
    "message_sources",
    "render",
]
