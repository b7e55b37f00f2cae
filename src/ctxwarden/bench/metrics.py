"""Figures from a replay: tokens, cache-aware cost, visible share, overhead and recoverability.

Every figure is computed from what the model actually received (captured by the
replayed model), counted with one meter for every strategy, never from a strategy's
own bookkeeping:

- input tokens: messages (role, content, tool-call names and arguments) plus tool schemas;
- cache-aware cost: the prefix a call shares with the previous one at 0.1, the rest at
  1.0 (and under the other price models of `ctxwarden.bench.prices`, from the same cached
  and uncached token counts); and each summarizer request likewise, by the longest prefix it shares with a call
  made before it (the one it continues, whose answer it waited for), so a request that
  begins with a call's tools, system prompt and messages is billed mostly at 0.1, and a
  transcript prompt at 1.0;
- visible share: per call, the share of the raw conversation so far (as recorded, with
  full outputs) that the call receives verbatim;
- recoverability: the share of original tool-output and tool-argument bytes that are in
  the last call's view or reachable from it — through a `recall` id, or a file it names.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxwarden.bench.cost_parts import CostParts, fixed_entries
from ctxwarden.bench.harness import Replayed, SeenCall
from ctxwarden.bench.recall import RecallCounts, recall_counts
from ctxwarden.clip.names import shown_id
from ctxwarden.clip.placeholders import RECALL_REFERENCE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.text import encode, text_of
from ctxwarden.replay.recording import Recording

PATH = re.compile(r"/(?:large_tool_results|conversation_history)/[\w./-]+")


@dataclass(slots=True)
class RunFigures:
    """The figures of one replay."""

    strategy: str
    window: int
    trajectory: str
    calls: int = 0
    overflows: int = 0
    input_tokens: int = 0
    cache_cost_calls: float = 0.0
    summarizer_input_tokens: int = 0
    summarizer_cost: float = 0.0
    cached_tokens: int = 0
    """Input tokens (calls and summarizer requests) read from the cache: the shared prefixes."""
    uncached_tokens: int = 0
    """Input tokens (calls and summarizer requests) past the shared prefix: written to the cache."""
    folds: int = 0
    peak_fraction: float = 0.0
    visible_shares: list[float] = field(default_factory=list)
    overheads_ms: list[float] = field(default_factory=list)
    per_call_tokens: list[int] = field(default_factory=list)
    original_bytes: int = 0
    reachable_bytes: int = 0
    recall: RecallCounts = field(default_factory=RecallCounts)
    parts: CostParts = field(default_factory=CostParts)
    """The same input tokens by where they go (`ctxwarden.bench.cost_parts`)."""
    error: str | None = None

    @property
    def cache_cost(self) -> float:
        return self.cache_cost_calls + self.summarizer_cost


def figures(run: Replayed, meter: TokenMeter) -> RunFigures:
    out = RunFigures(run.strategy, run.window, run.recording.source, error=run.error)
    previous: list[str] = []
    raw = _raw_sequence(run.recording)
    for index, call in enumerate(run.calls):
        keys = [_tools_key(call.tools), *(_key(m) for m in call.messages)]
        sizes = [_schema_tokens(call.tools, meter), *(meter.message_tokens(m) for m in call.messages)]
        total = sum(sizes)
        shared = out.parts.add_call(previous, keys, sizes, fixed_entries(call.messages))
        out.cache_cost_calls += 0.1 * shared + (total - shared)
        out.cached_tokens += shared
        out.uncached_tokens += total - shared
        previous = keys
        out.calls += 1
        out.input_tokens += total
        out.per_call_tokens.append(total)
        out.overflows += total > run.window
        out.peak_fraction = max(out.peak_fraction, total / run.window)
        out.visible_shares.append(_visible_share(raw, call.step, call.messages, meter))
        if index < len(run.step_ms):
            out.overheads_ms.append(max(0.0, run.step_ms[index] - call.model_ms))
    out.summarizer_input_tokens, shared = _summarizer_bill(run, meter)
    out.parts.add_summarizer(out.summarizer_input_tokens, shared)
    out.summarizer_cost = 0.1 * shared + (out.summarizer_input_tokens - shared)
    out.cached_tokens += shared
    out.uncached_tokens += out.summarizer_input_tokens - shared
    out.folds = len(run.summarizer_calls) or _ctxwarden_folds(run)
    out.recall = recall_counts(run.recording, ((c.step, c.messages) for c in run.calls), run.folds_at)
    if run.calls and run.error is None:
        out.original_bytes, out.reachable_bytes = _recoverable(run, run.calls[-1].messages)
    return out


def _summarizer_bill(run: Replayed, meter: TokenMeter) -> tuple[int, int]:
    """The summarizer's input tokens, and of them the cached ones: per request, the longest prefix it shares with a
    call made before it."""
    tokens, cached = 0, 0
    keys_of: dict[int, str] = {}  # by message object: the calls share most of theirs

    def key(message: BaseMessage) -> str:
        found = keys_of.get(id(message))
        if found is None:
            found = keys_of[id(message)] = _key(message)
        return found

    for asked in run.asked:
        sizes = [_schema_tokens(asked.tools, meter), *(meter.message_tokens(m) for m in asked.messages)]
        keys = [_tools_key(asked.tools), *(key(m) for m in asked.messages)]
        made = len(run.calls) if asked.after_calls is None else int(asked.after_calls)
        shared = max((_shared(call, keys, sizes, key) for call in run.calls[:made]), default=0)
        tokens += sum(sizes)
        cached += shared
    return tokens, cached


def _shared(call: SeenCall, keys: Sequence[str], sizes: Sequence[int], key: Callable[[BaseMessage], str]) -> int:
    """Tokens of the prefix of `keys` (sized `sizes`) that `call` began with."""
    if not keys or _tools_key(call.tools) != keys[0]:
        return 0
    shared = sizes[0]
    for message, theirs, size in zip(call.messages, keys[1:], sizes[1:], strict=False):
        if key(message) != theirs:
            break
        shared += size
    return shared


def _key(message: BaseMessage) -> str:
    calls = getattr(message, "tool_calls", None) or []
    return json.dumps(
        [
            message.type,
            message.content,
            [[c.get("name"), c.get("args")] for c in calls],
            getattr(message, "tool_call_id", None),
        ],
        sort_keys=True,
        default=str,
    )


def _tools_key(tools: Sequence[Any]) -> str:
    return json.dumps(tools, sort_keys=True, default=str)


def _schema_tokens(tools: Sequence[Any], meter: TokenMeter) -> int:
    return meter.tools_tokens(tools)


# --- visible share ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Raw:
    step: int
    """The raw message exists for calls made after this many steps."""
    key: tuple[Any, ...]
    message: BaseMessage


_RAW: dict[int, tuple[Recording, tuple[_Raw, ...]]] = {}


def _raw_sequence(recording: Recording) -> tuple[_Raw, ...]:
    """The recorded conversation with full outputs, each message tagged with when it exists."""
    hit = _RAW.get(id(recording))
    if hit is not None and hit[0] is recording:
        return hit[1]
    items: list[_Raw] = []
    if recording.system_prompt:
        items.append(_Raw(0, ("system", recording.system_prompt), SystemMessage(recording.system_prompt)))
    step = 0
    for turn in recording.turns:
        items.append(_Raw(step, ("human", turn.user.content), turn.user))
        for ai in turn.steps:
            step += 1
            items.append(_Raw(step, _ai_key(ai), ai))
            for call in ai.tool_calls:
                output = recording.outputs.get(str(call["id"]), "")
                tool = ToolMessage(output, tool_call_id=str(call["id"]))
                items.append(_Raw(step, ("tool", str(call["id"]), output), tool))
    _RAW[id(recording)] = (recording, tuple(items))
    return _RAW[id(recording)][1]


def _ai_key(message: AIMessage) -> tuple[Any, ...]:
    calls = json.dumps([[c.get("id"), c.get("args")] for c in message.tool_calls], sort_keys=True)
    return ("ai", message.content if isinstance(message.content, str) else json.dumps(message.content), calls)


def _view_keys(messages: Sequence[BaseMessage]) -> set[tuple[Any, ...]]:
    keys: set[tuple[Any, ...]] = set()
    for m in messages:
        if isinstance(m, HumanMessage):
            keys.add(("human", m.content))
        elif isinstance(m, AIMessage):
            keys.add(_ai_key(m))
        elif isinstance(m, ToolMessage):
            keys.add(("tool", m.tool_call_id, text_of(m)))
        elif isinstance(m, SystemMessage):
            keys.add(("system", m.text))
    return keys


def _visible_share(raw: Sequence[_Raw], step: int, view: Sequence[BaseMessage], meter: TokenMeter) -> float:
    so_far = [r for r in raw if r.step <= step]
    keys = _view_keys(view)
    system = next((m.text for m in view if isinstance(m, SystemMessage)), "")
    total = shown = 0
    for item in so_far:
        tokens = meter.message_tokens(item.message)
        total += tokens
        if item.key in keys or (item.key[0] == "system" and item.key[1] in system):
            shown += tokens
    return shown / total if total else 1.0


# --- recoverability --------------------------------------------------------------
def _recoverable(run: Replayed, view: Sequence[BaseMessage]) -> tuple[int, int]:
    text = "\n".join(_plain(m) for m in view)
    files = _referenced_files(run, text)
    recalled = {m.group("id") for m in RECALL_REFERENCE.finditer(text)}
    shown_outputs = {m.tool_call_id: text_of(m) for m in view if isinstance(m, ToolMessage)}
    shown_args = {str(c["id"]): c.get("args") for m in view if isinstance(m, AIMessage) for c in m.tool_calls}
    total = reachable = 0
    for step in run.recording.steps:
        for call in step.tool_calls:
            call_id = str(call["id"])
            output = run.recording.outputs.get(call_id, "")
            args = json.dumps(call.get("args", {}), ensure_ascii=False)
            in_view = {
                "result": shown_outputs.get(call_id) == output,
                "args": shown_args.get(call_id) == call.get("args"),
            }
            for part, original in (("result", output), ("args", args)):
                size = len(encode(original))
                total += size
                named = call.get("args") if part == "args" else None
                # in view verbatim; or a recall id the view shows (the thread keeps every original); or a file it names
                named_back = bool(recalled & {call_id, shown_id(call_id)})
                if in_view[part] or named_back or any(_contains(body, original, named) for body in files):
                    reachable += size
    return total, reachable


def _contains(body: str, original: str, args: Any) -> bool:
    if original and original in body:
        return True
    if isinstance(args, dict) and args:
        return all(str(v) in body for v in args.values())
    return False


def _referenced_files(run: Replayed, text: str) -> list[str]:
    """Files the view names, and the files those name (a history file names evicted results)."""
    bodies: list[str] = []
    seen: set[str] = set()
    pending = set(PATH.findall(text))
    for _depth in range(2):
        found: set[str] = set()
        for path in sorted(pending - seen):
            seen.add(path)
            target = run.folder / path.lstrip("/").rstrip(".,;:)'\"]")
            if target.is_file():
                body = target.read_bytes().decode("utf-8", "surrogateescape")
                bodies.append(body)
                found |= set(PATH.findall(body))
        pending = found
    return bodies


def _plain(message: BaseMessage) -> str:
    """The text a model reads in a message: its content and its tool calls' argument values."""
    parts = [message.content if isinstance(message.content, str) else json.dumps(message.content)]
    for call in getattr(message, "tool_calls", None) or []:
        parts.extend(str(value) for value in (call.get("args") or {}).values())
    return "\n".join(parts)


def _ctxwarden_folds(run: Replayed) -> int:
    return sum(
        1
        for m in run.final_messages
        if isinstance(m, AIMessage)
        and "context_compaction" in (m.response_metadata.get("ctxwarden") or {}).get("events", ())
    )


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


__all__ = ["RunFigures", "figures", "median", "percentile"]
