"""`recall`: the way back for anything clearing or eviction took out of the model's view.

Every placeholder names a call id; `recall(call_id)` returns that call's original result — read from the
checkpointed thread, or, for a result evicted at arrival, from its file, byte for byte, with its images and PDFs
after the first page's text — `recall(call_id, part="args")` returns the call's original arguments, `recall(call_id,
part="raw")` the output as the tool returned it (before it was rendered as a terminal shows it, or made readable),
and `recall(call_id, part="text")` the text of the message that made it (left out of the view once all of that
message's results are), and `recall(part="task")` the thread's first user message whole (clearing and folds may show
it in part, `ctxwarden.core.task`), and `recall(call_id=<id>, part="message")` a later user message a forced round
showed in part (`ctxwarden.core.pasted`). Output is paged (`page`, `limit`) so a recall never floods the window it is
meant to spare; `page` pages a search's hits the same way, one argument for both.

`recall(query=...)` searches instead: every line of everything this conversation held
that matches, with what became of it (see `ctxwarden.clip.search`). What it searches is
given by a scope: by default the thread's own messages and offloaded files; the stack
adds what the model sees now (to mark hits still in view) and a fork's parent.

A placeholder names a long call id by its last characters (`recall(call_id="…Sr5FeHu")`,
`ctxwarden.clip.names.shown_id`); recall finds the one call ending with them. A reused call
id is told apart by its call key (`recall(call_id="call_0#1a2b3c4d")`, as the eviction
marker writes it); a bare id shared by several results, or an end shared by several ids,
gets the list to choose from, never one of them at random. When an evicted file cannot be
read (another worker's disk, a missing copy), recall says which file and why instead of
handing back the preview as if it were the original.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt import InjectedState

from ctxwarden.clip.evict import RECALL_TOOL
from ctxwarden.clip.media_files import with_media
from ctxwarden.clip.names import call_key, changed_file, recall_id, record_of
from ctxwarden.clip.references import answers, choose, has_key, resolve
from ctxwarden.clip.render import from_exact
from ctxwarden.clip.room import answer_share, page_chars, page_room
from ctxwarden.clip.search import PAGE_TOKENS, Source, file_sources, find, matcher, message_sources, render
from ctxwarden.clip.search_files import own_files, reader
from ctxwarden.core.identity import identified
from ctxwarden.core.media import media_of
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.pasted import message_text_by_id
from ctxwarden.core.runtime import step_context
from ctxwarden.core.shown_schema import ShownSchemaTool, bare_schema
from ctxwarden.core.text import decode, text_of

DEFAULT_LIMIT = 8_000
MAX_LIMIT = 50_000
MAX_PAGES = 100_000
"""Pages a text is cut into at most: a tiny `limit` on a huge output is raised to `len(text) / MAX_PAGES`, so a page
is found in bounded time and memory (a `limit` of 1 on 50 MB made 50 million pages, all held at once)."""

DESCRIPTION = (
    "call_id: a call's original result (part='args': its arguments, 'text': what you wrote with it). "
    "query: search what left your context (regex=True: a regular expression). page=2: next page."
)
"""Every call carries this schema, so it is kept short: each token of it is paid on every model call."""

SHOWN_SCHEMA = bare_schema(call_id="string", query="string", regex="boolean", page="integer", part="string")
"""What the model is shown of the arguments: the description and the placeholders say the rest. `part` also takes
"raw" (a rendered output's bytes), "task" and "message" (the task, or a later user message, shown in part), which the
notes naming them say; `limit` (characters a page, `DEFAULT_LIMIT`) is accepted but not shown."""

Scope = Callable[[Mapping[str, Any]], Sequence[Source]]
"""What `recall(query=...)` searches, from the running thread's state."""


def own_scope(backend: Any) -> Scope:
    """The thread's own messages and offloaded files (nothing is marked as in view: the view is not known here)."""
    read = reader(backend)

    def sources(state: Mapping[str, Any]) -> list[Source]:
        found = message_sources(identified(state.get("messages", [])), None, read)
        covered = [s.path for s in found if s.path]
        messages = state.get("messages", [])
        return found + file_sources(own_files(backend, step_context()[0], covered, messages), read)

    return sources


def result_media(messages: list[BaseMessage], reference: str) -> tuple[list[Any], list[str]]:
    """The images and PDFs of the result `reference` names, as its message holds them (clearing leaves them out of
    view), and the files of those its eviction moved out of it (`clip.media_files`)."""
    resolved = resolve(messages, reference)
    message = None if isinstance(resolved, str) else choose(answers(messages, resolved[0]), *resolved)[0]
    if message is None:
        return [], []
    filed = (record_of(message) or {}).get("media")
    return media_of(message), [str(p) for p in filed] if isinstance(filed, list) else []


def lookup_result(
    messages: list[BaseMessage], reference: str, backend: Any, *, raw: bool = False
) -> tuple[str | None, str | None]:
    """`(the exact original result, None)`, or `(None, why it cannot be given)`.

    `reference` is a call id, or `call id#call key`. An evicted result is read from its
    file; when that file cannot be read the answer says which file and why, and never
    passes the preview off as the original. `raw=True` gives what the tool returned before
    the arrival stage rendered it as a terminal shows it (`clip.render`); an output that was only made readable
    (bytes that are not UTF-8, a tool's `bytes`) comes back as the original either way, `bytes` as their `repr`.
    """
    resolved = resolve(messages, reference)
    if isinstance(resolved, str):
        return None, resolved
    call_id, key = resolved
    message, why = choose(answers(messages, call_id), call_id, key)
    if message is None:
        return None, why
    record = record_of(message) or {}  # nothing, once the thread's text of it was changed: that text is the original
    if record.get("raw_path") and (raw or not record.get("rendered")):  # made readable only: the original is the raw
        path = str(record["raw_path"])
        scheme = str(record.get("raw_encoding") or "strict")
    elif not record.get("evicted"):
        return text_of(message), None
    else:
        path, scheme = str(record.get("path")), "surrogatepass"
    if backend is None:
        return None, _unreachable(reference, path, "this agent has no backend to read it from")
    try:
        (response,) = backend.download_files([path])
    except Exception as exc:  # a backend that raises instead of reporting
        return None, _unreachable(reference, path, f"{type(exc).__name__}: {exc}")
    if response.error is not None or response.content is None:
        return None, _unreachable(reference, path, str(response.error or "the backend returned no content"))
    if changed_file(record, response.content, raw=path == record.get("raw_path")):
        return None, _unreachable(
            reference,
            path,
            "it was changed after ctxwarden evicted it (its content no longer matches the hash kept then), "
            "so it is no longer the original",
        )
    return (decode(response.content) if scheme == "surrogatepass" else from_exact(response.content, scheme)), None


def _unreachable(reference: str, path: str, why: str) -> str:
    return (
        f"[ctxwarden: the original result of call {reference!r} was evicted to {path}, and that file cannot be read "
        f"here: {why}. The conversation holds only a preview of it, which is not the original; nothing more of it "
        "is available to this thread.]"
    )


def original_result(messages: list[BaseMessage], call_id: str, backend: Any) -> str | None:
    """The exact original result of `call_id` (or `call id#key`), or `None` when it is unknown or unreachable."""
    return lookup_result(messages, call_id, backend)[0]


def original_args(messages: list[BaseMessage], reference: str) -> str | None:
    """The original arguments of the call `reference` names (a call id, or `call id#key`), as JSON."""
    found = _calling(messages, reference)
    return json.dumps(found[1].get("args", {}), ensure_ascii=False, indent=1) if found else None


def original_text(messages: list[BaseMessage], reference: str) -> str | None:
    """The text of the message that made the call `reference` names (a call id, or `call id#key`)."""
    found = _calling(messages, reference)
    return text_of(found[0]) if found else None


def _calling(messages: list[BaseMessage], reference: str) -> tuple[AIMessage, Any] | None:
    """The message that made the call `reference` names, and that call (`None` when a bare id names several)."""
    resolved = resolve(messages, reference)
    if isinstance(resolved, str):
        return None
    call_id, key = resolved
    found = [
        (message, call)
        for message in messages
        if isinstance(message, AIMessage)
        for i, call in enumerate(message.tool_calls)
        if call.get("id") == call_id and (key is None or call_key(message.id, i) == key)
    ]
    if not found and key is not None and has_key(messages, call_id, key):  # twins keyed by their output
        return _calling(messages, call_id)
    if key is None and len(found) > 1:  # a reused id names several calls: none of them silently (`sharing_calls`)
        return None
    return found[0] if found else None


def sharing_calls(messages: list[BaseMessage], reference: str, part: str) -> str | None:
    """The answer to `part` of a bare call id that several calls of the thread have: the name of each."""
    resolved = resolve(messages, reference)
    if isinstance(resolved, str) or resolved[1] is not None:
        return None
    found = [
        (call_key(message.id, i), call)
        for message in messages
        if isinstance(message, AIMessage)
        for i, call in enumerate(message.tool_calls)
        if call.get("id") == resolved[0]
    ]
    if len(found) < 2:
        return None
    named = "; ".join(
        f'recall(call_id="{recall_id(resolved[0], key)}", part="{part}") for {call.get("name")}'
        f"({json.dumps(call.get('args', {}), ensure_ascii=False)[:60]})"
        for key, call in found
    )
    shared = f"{len(found)} tool calls in this thread share call id {resolved[0]!r}"
    return f"[ctxwarden: {shared}. Name the one you mean: {named}.]"


def page(text: str, number: int, limit: int, room: int | None = None) -> str:
    """Page `number` (from 1) of `text` in pages of at most `limit` characters, with a note saying where the rest is.

    Pages end on line boundaries; a line longer than a page is split, and the note says the page ends inside it. A
    page that would end less than half full before such a line is filled with its start instead: the arguments of a
    call that wrote a file, as JSON, are one short line and the whole file on the next. A page longer than `room`
    characters (what the other calls of the turn leave this answer) shows its start, and says so: the pages stay the
    same whoever asks, so the page after it is still the rest of the text.
    """
    limit = max(1, min(limit, MAX_LIMIT), min(MAX_LIMIT, -(-len(text) // MAX_PAGES)))
    number = max(1, number)
    count, found = 0, None
    for count, bounds in enumerate(_pages(text, limit), start=1):  # up to the page asked for, no further
        if count == number:
            found = bounds
            break
    if found is None:
        return f"[ctxwarden: page {number} is empty: {len(text):,} characters make {count} page(s).]"
    offset, end = found
    if room is not None and end - offset > room:
        return _page_start(text, number, offset, end, room)
    if number == 1 and end == len(text):
        return text
    cut = (
        " (it ends inside a line longer than a page: the line goes on)"
        if end < len(text) and text[end - 1] != "\n"
        else ""
    )
    more = f"; page={number + 1} for the rest" if end < len(text) else ""
    return f"{text[offset:end]}\n[ctxwarden: characters {offset:,}-{end:,} of {len(text):,}{cut}{more}]"


def _page_start(text: str, number: int, offset: int, end: int, room: int) -> str:
    newline = text.rfind("\n", offset, offset + room)
    shown = newline + 1 if newline >= offset + room // 2 else offset + room  # whole lines, unless that leaves half
    span = f"characters {offset:,}-{shown:,} of {len(text):,}"
    return (
        f"{text[offset:shown]}\n[ctxwarden: {span}: the start of page {number} ({offset:,}-{end:,}), as much as the "
        f"other calls of this turn leave room for; ask for page={number} with no other call beside it for all of it.]"
    )


def page_bounds(text: str, limit: int) -> list[tuple[int, int]]:
    """`(start, end)` of each page: whole lines, at most `limit` characters, a longer line split at the limit."""
    return list(_pages(text, limit))


def _pages(text: str, limit: int) -> Iterator[tuple[int, int]]:
    start = 0
    while True:
        end = min(len(text), start + limit)
        if end < len(text):
            newline = text.rfind("\n", start, end)
            half_full = 2 * (newline + 1 - start) >= limit
            if newline >= start and (half_full or "\n" in text[newline + 1 : newline + 1 + limit]):
                end = newline + 1  # whole lines, unless that leaves the page half empty before a line past a page
        yield start, end
        start = end
        if start >= len(text):
            return


def search(
    state: Mapping[str, Any],
    scope: Scope,
    query: str,
    regex: bool,
    page: int,
    meter: TokenMeter,
    room: int | None = None,
) -> str:
    """One page of `recall(query=...)`'s answer (of at most `room` tokens, when the call has only that; pages no
    larger than the window's room for a step, `clip.room.page_room`)."""
    match = matcher(query, regex)
    if isinstance(match, str):
        return match
    hits, cut = find(scope(state), match)
    alone = page_room(state.get("messages", []))
    page_tokens = PAGE_TOKENS if alone is None else min(PAGE_TOKENS, alone)  # a page holds one line at least
    return render(hits, cut, query, regex, page, meter.counter, room, page_tokens)


def make_recall_tool(backend: Any, *, scope: Scope | None = None, meter: TokenMeter | None = None) -> BaseTool:
    """The `recall` tool, reading evicted files from `backend`; `scope` says what `recall(query=...)` searches."""
    searched = scope or own_scope(backend)
    counting = meter or TokenMeter()

    def recall(
        state: Annotated[dict[str, Any], InjectedState],
        call_id: str = "",
        query: str = "",
        regex: bool = False,
        page: int = 1,
        part: Literal["result", "raw", "args", "text", "task", "message"] = "result",
        limit: int = DEFAULT_LIMIT,
    ) -> str | list[Any]:
        room = answer_share(state.get("messages", []))  # parallel calls share the room their reply leaves

        def paged(text: str) -> str:
            pages = min(limit, page_chars(text, limit, page_room(state.get("messages", [])), counting.counter))
            fits = page_chars(text, pages, room, counting.counter)
            return page_of(text, page, pages, fits if fits < pages else None)

        if part == "task":  # the task shown in part: the thread's first user message, whole
            task = next((m for m in state.get("messages", []) if isinstance(m, HumanMessage)), None)
            return paged(text_of(task)) if task is not None else "[ctxwarden: this thread has no task.]"
        if part == "message":  # a later user message a forced round showed in part, by its id (`core.pasted`)
            text = message_text_by_id(identified(state.get("messages", [])), call_id)
            return paged(text) if text is not None else f"[ctxwarden: this thread has no user message {call_id!r}.]"
        if not call_id:
            if not query:
                return '[ctxwarden: pass call_id="..." (from a placeholder) or query="..." (text to search for).]'
            return search(state, searched, query, regex, page, counting, room)
        messages = identified(state.get("messages", []))
        resolved = resolve(messages, call_id)
        if isinstance(resolved, str):
            return resolved
        call_id = recall_id(*resolved)
        if part in ("args", "text"):
            text = original_args(messages, call_id) if part == "args" else original_text(messages, call_id)
            if text is None:
                shared = sharing_calls(messages, call_id, part)
                return (
                    shared
                    or f"[ctxwarden: this thread has no tool call with call id {call_id!r}; check the placeholder.]"
                )
            return paged(text)
        found, why = lookup_result(messages, call_id, backend, raw=part == "raw")
        if found is None:
            return str(why)
        shown = paged(found)
        media, filed = result_media(messages, call_id) if page == 1 else ([], [])
        return with_media(shown, media, None if room is None else room - counting.counter(shown), filed)

    return ShownSchemaTool.from_function(func=recall, name=RECALL_TOOL, description=DESCRIPTION, shown=SHOWN_SCHEMA)


page_of = page
"""`page`, under a name the tool's own `page` argument does not hide."""


__all__ = [
    "DEFAULT_LIMIT",
    "Scope",
    "lookup_result",
    "make_recall_tool",
    "original_args",
    "original_result",
    "original_text",
    "own_scope",
    "page",
    "page_bounds",
    "search",
]
