"""Eviction at arrival: a tool result too large for the window goes to a file; the message keeps a preview.

The threshold is min(`evict_max_tokens`, `evict_window_share` of the window of the model
that issued the call), counted with the meter — not a fixed 20,000 tokens. Unlike
deepagents' eviction it applies to every tool, the built-in file tools included (they
cut themselves at 20,000 tokens, which alone can overflow a small window); it keeps a
structure-aware preview instead of a blind head and tail; and it writes the exact
original (bytes, via `upload_files`) to a per-thread, per-namespace, per-call path. A huge
output's token count, only reported once it is evicted, is estimated from samples of its text
(`TokenMeter.estimate_tokens`), unless the estimate is too close to the threshold to decide;
the preview that stays in view is counted exactly. A failed
write (a full disk, a refusing backend) keeps the original message whole, removes whatever
part of the file was written, and records the failure with its cause; the run goes on.

Before eviction, the arrival stage (`clip.render`) turns what is not yet text worth reading
(terminal output, bytes that are not UTF-8, a tool's `bytes`) into text, keeping the exact
original in a file of its own; eviction then weighs and previews what arrived. Should that
stage's write fail, output holding bytes that are not valid UTF-8 is still offloaded whatever
its size (a checkpoint cannot store those bytes exactly), shown as U+FFFD.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ctxwarden.clip.media_files import (
    MEDIA_SUFFIX,
    keep_in_view,
    media_bytes,
    media_note,
    media_path,
)
from ctxwarden.clip.names import (
    NO_ID,
    content_hash,
    issuing_key,
    recall_id,
    result_path,
    variant_path,
    with_shown_hash,
)
from ctxwarden.clip.preview import preview
from ctxwarden.clip.render import RAW_SUFFIX, SURROGATES, Arrival
from ctxwarden.clip.room import calls_of_reply, fixed_tokens, share
from ctxwarden.core.io import Steps, arun, method, run
from ctxwarden.core.layers import PendingEvent
from ctxwarden.core.media import media_of
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.runtime import step_context
from ctxwarden.core.stamp import METADATA_KEY, RECENT, last_stamped, unstamped
from ctxwarden.core.text import encode, text_of

_SURROGATES = SURROGATES

ESTIMATE_MARGIN = 2
"""A huge output's count is estimated from samples (`TokenMeter.estimate_tokens`: only its preview stays in view);
an estimate within this factor of the threshold is not trusted to decide, and the output is counted whole."""

RECALL_TOOL = "recall"
"""ctxwarden's own recall tool: its output is bounded, so it is never evicted."""


def _non_text_blocks(message: ToolMessage) -> list[Any]:
    if isinstance(message.content, str):
        return []
    return [b for b in message.content if isinstance(b, dict) and b.get("type") != "text"]


@dataclass(slots=True)
class Evictor:
    """Evicts oversized tool results to `backend` (a deepagents backend); `backend=None` disables it."""

    backend: Any
    policy: ContextPolicy
    meter: TokenMeter
    arrival: Arrival = field(init=False)

    def __post_init__(self) -> None:
        self.arrival = Arrival(self.policy, self.meter)

    def window(self, request: ToolCallRequest) -> int | None:
        """The window of the model that made this call (`None` when no call of the thread has said)."""
        if self.policy.window is not None:
            return self.policy.window
        messages = (request.state or {}).get("messages", []) if isinstance(request.state, dict) else []
        found = last_stamped(messages, limit=RECENT)
        return int(found[1]["window"]) if found else None

    def threshold(self, request: ToolCallRequest) -> int:
        """Tokens above which this call's result is evicted: from the window of the model that called it, and no more
        than its share of the room the reply that made it leaves (`clip.room`)."""
        window = self.window(request)
        if not window:
            return self.policy.evict_max_tokens
        return min(self.policy.evict_threshold(window), self.step_share(request, window))

    def step_share(self, request: ToolCallRequest, window: int) -> int:
        """Tokens this call's result may keep in view: its share of the window among its reply's calls, beside the
        system prompt and tool schemas."""
        messages = _messages(request)
        return share(window, calls_of_reply(messages, request.tool_call.get("id")), fixed_tokens(messages))

    def plan(
        self, request: ToolCallRequest, message: ToolMessage, taken: bool = False
    ) -> tuple[str, bytes, ToolMessage, dict, list[tuple[str, Mapping[str, Any]]]] | None:
        """What to write and what the message becomes, or `None` when the result stays as it is (`taken`: the call's
        file holds other bytes, so this output goes to its `variant_path`); last, the images and PDFs that leave the
        view, each with the path of its file (`clip.media_files`)."""
        if self.backend is None or message.name == RECALL_TOOL or request.tool_call.get("name") == RECALL_TOOL:
            return None
        threshold = self.threshold(request)
        tokens, counted = self.meter.estimate_tokens(message)
        if not counted and threshold // ESTIMATE_MARGIN <= tokens <= threshold * ESTIMATE_MARGIN:
            tokens, counted = self.meter.message_tokens(message), True  # too close to call on an estimate
        text = text_of(message)
        exact = not _SURROGATES.search(text)
        if tokens <= threshold and exact:
            return None
        thread, namespace, _run = step_context()
        given = message.tool_call_id or str(request.tool_call.get("id") or "")
        call_id = given or NO_ID  # named so; its key is looked up by the id it has (a call may be named "no-id")
        arrived = message.response_metadata.get(METADATA_KEY) or {}
        # a rendered output keeps the key (and the file) its arrival took from the original: both name the same call
        raw_path = arrived.get("raw_path")
        key = arrived["key"] if raw_path else issuing_key(_messages(request), request.tool_call, given, text)
        path = str(raw_path).removesuffix(RAW_SUFFIX) if raw_path else result_path(thread, namespace, call_id, key)
        data = encode(text)
        path = variant_path(path, data) if taken else path
        reference = recall_id(call_id, key)
        tool = message.name or request.tool_call.get("name") or "tool"
        readable = text if exact else _SURROGATES.sub("\ufffd", text)
        blocks = _non_text_blocks(message)
        moved: list[tuple[int, Mapping[str, Any]]] = []
        if tokens > threshold:
            window = self.window(request)
            blocks, moved = keep_in_view(blocks, self.step_share(request, window) if window else threshold)
        folder = path + MEDIA_SUFFIX
        if tokens <= threshold:  # small, but a checkpoint cannot store its undecodable bytes exactly
            shown_text = readable
            marker = (
                f"[ctxwarden: this {tool} output holds bytes that are not valid UTF-8, shown above as \ufffd; "
                f'its exact bytes are in {path} (read_file(file_path="{path}")).]'
            )
        else:
            shown = preview(readable, max_chars=max(400, min(4_000, threshold * 2)))
            shown_text = shown.text
            marker = (
                f"[ctxwarden: evicted {tool} output of {'' if counted else 'about '}{tokens:,} tokens "
                f"({shown.total_chars:,} chars, "
                f"{shown.total_lines:,} lines) to {path}; above: {shown.shown_lines:,} of its lines. "
                f'Page through it with read_file(file_path="{path}", offset=0, limit=200), '
                f'or get the exact text with {RECALL_TOOL}(call_id="{reference}").'
                + (media_note(folder, moved, len(media_of(message))) if moved else "")
                + "]"
            )
        body = f"{shown_text}\n{marker}"
        record = {
            **(message.response_metadata.get(METADATA_KEY) or {}),
            "evicted": True,
            "path": path,
            "key": key,
            "tokens": tokens,
            **({} if counted else {"tokens_estimated": True}),
            "chars": len(text),
            "exact_utf8": exact,
            "sha256": content_hash(data),  # recall checks the file against it: an edited file is never the original
            **({"media": [media_path(folder, n, block) for n, block in moved]} if moved else {}),
        }
        replaced = with_shown_hash(
            message.model_copy(
                update={
                    "content": [{"type": "text", "text": body}, *blocks] if blocks else body,
                    "response_metadata": {**message.response_metadata, METADATA_KEY: record},
                }
            )
        )
        event = {
            "tool": tool,
            "call_id": call_id,
            "path": path,
            "tokens": tokens,
            **({} if counted else {"tokens_estimated": True}),
            "preview_tokens": self.meter.message_tokens(replaced),
            "threshold": threshold,
            "reason": "size" if tokens > threshold else "not-utf8",
        }
        files = [(str(file), block) for file, (_n, block) in zip(record.get("media", []), moved, strict=True)]
        return path, data, replaced, event, files

    def evict(self, request: ToolCallRequest, result: ToolMessage | Command[Any]) -> tuple[Any, list[PendingEvent]]:
        return run(self._evicting(request, result))

    async def aevict(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> tuple[Any, list[PendingEvent]]:
        return await arun(self._evicting(request, result))

    def _evicting(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> Steps[tuple[Any, list[PendingEvent]]]:
        """The core of `evict`/`aevict`: write each oversized output, then settle every message in order."""
        if any(unstamped(m) is not m for m in _results(result)):  # a tool's result brings no record of ours
            result = _map_results(result, unstamped)
        events: list[PendingEvent] = []
        arrived: dict[int, ToolMessage] = {}
        settled: dict[int, tuple[ToolMessage, dict, str | None]] = {}
        for message in _results(result):  # one at a time: only one output's bytes are held at once
            current = message
            staged = self._arriving(request, message)
            if staged is not None and not (yield from self._free(staged[0], staged[1], cut_short=False)):
                staged = self._arriving(request, message, taken=staged[1])
            if staged is not None:
                raw_path, raw, shown, render_event = staged
                del staged
                error = yield from self._write(raw_path, raw)
                del raw
                events.append(
                    ("tool_render", {**render_event, "ok": error is None, **({"error": error} if error else {})}, None)
                )
                if error is None:  # else the message enters as it came: nothing of it is lost
                    arrived[id(message)] = current = shown
            planned = self.plan(request, current)
            if planned is not None and not (yield from self._free(planned[0], planned[1], cut_short=True)):
                planned = self.plan(request, current, taken=True)
            if planned is None:
                continue
            path, data, replaced, event, media = planned
            del planned
            error = yield from self._write(path, data)
            del data
            for media_file, block in media:  # one file's bytes held at a time
                error = error or (yield from self._write(media_file, media_bytes(block)))
            settled[id(message)] = (replaced, event, error)

        def one(message: ToolMessage) -> ToolMessage:
            current = arrived.get(id(message), message)
            if id(message) not in settled:
                return current
            replaced, event, error = settled[id(message)]
            return self._settle(current, replaced, event, error, events)

        return _map_results(result, one), events

    def _arriving(
        self, request: ToolCallRequest, message: ToolMessage, taken: bytes | None = None
    ) -> tuple[str, bytes, ToolMessage, dict] | None:
        """What the arrival stage (`clip.render`) makes of `message`; nothing without a backend to keep the raw.
        `taken`: the raw bytes, when the call's raw file holds others (the output then goes to its `variant_path`)."""
        if self.backend is None or message.name == RECALL_TOOL or request.tool_call.get("name") == RECALL_TOOL:
            return None
        thread, namespace, _run = step_context()
        given = message.tool_call_id or str(request.tool_call.get("id") or "")
        call_id = given or NO_ID
        key = issuing_key(_messages(request), request.tool_call, given, text_of(message))
        tool = message.name or request.tool_call.get("name") or "tool"
        path = result_path(thread, namespace, call_id, key)
        path = variant_path(path, taken) if taken is not None else path
        staged = self.arrival.plan(message, tool, path, recall_id(call_id, key), key)
        if staged is not None:
            staged[3]["call_id"] = call_id
        return staged

    def _free(self, path: str, data: bytes, *, cut_short: bool) -> Steps[bool]:
        """Whether `path` may take `data`: it holds nothing, or these very bytes (the step run again after a crash).

        Other bytes there are another run's output of the same call (see `clip.names.variant_path`), whose branch of
        the thread still names the file; even a prefix of `data` may be a whole output (a log that grew since). Only
        an empty file, where every whole one has bytes (`cut_short`: an evicted output is never empty), is a write a
        kill cut short. A backend that cannot say is written to as before."""
        try:
            (found,) = yield method(self.backend, "download_files", [path])
        except Exception:  # a backend that cannot read back: nothing to compare with
            return True
        content = getattr(found, "content", None)
        return content is None or content == data or (cut_short and content == b"")

    def _write(self, path: str, data: bytes) -> Steps[str | None]:
        """Write `data` to `path` on the backend: `None`, or what failed (a partial file is removed, best effort)."""
        try:
            error = _upload_error((yield method(self.backend, "upload_files", [(path, data)])))
        except Exception as exc:  # a backend that raises instead of reporting
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            # remove what the failed write left (a file cut short by a full disk); best effort: a backend
            # without delete, or failing again, leaves it, and the event says what failed
            with contextlib.suppress(Exception):
                yield method(self.backend, "delete", path)
        return error

    @staticmethod
    def _settle(
        original: ToolMessage, replaced: ToolMessage, event: dict, error: str | None, events: list[PendingEvent]
    ) -> ToolMessage:
        if error is not None:
            events.append(("eviction", {**event, "ok": False, "error": error}, None))
            return original  # nothing is lost: the whole result stays in the message
        events.append(("eviction", {**event, "ok": True}, None))
        return replaced


def _messages(request: ToolCallRequest) -> list[Any]:
    return list((request.state.get("messages") if isinstance(request.state, dict) else None) or [])


def _upload_error(responses: Sequence[Any]) -> str | None:
    if not responses:
        return "the backend returned no upload response"
    error = getattr(responses[0], "error", None)
    return None if error is None else str(error)


def _results(result: ToolMessage | Command[Any]) -> list[ToolMessage]:
    if isinstance(result, ToolMessage):
        return [result]
    update = result.update if isinstance(result, Command) else None
    if isinstance(update, dict):
        return [m for m in update.get("messages") or [] if isinstance(m, ToolMessage)]
    return []


def _map_results(result: ToolMessage | Command[Any], fn: Any) -> Any:
    if isinstance(result, ToolMessage):
        return fn(result)
    if isinstance(result, Command) and isinstance(result.update, dict) and result.update.get("messages"):
        messages = [fn(m) if isinstance(m, ToolMessage) else m for m in result.update["messages"]]
        return Command(goto=result.goto, graph=result.graph, update={**result.update, "messages": messages})
    return result


__all__ = ["RECALL_TOOL", "Evictor"]
