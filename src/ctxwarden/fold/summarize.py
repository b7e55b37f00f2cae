"""Summaries with fixed sections: from a summarizer model, or built deterministically from the turns.

Every summary has the same sections, so a fold never drops what the next turn needs
and the next fold can extend it: the summarizer gets the previous summary plus the
turns since. The model summarizer is retried once; when it fails (or none is
available) the deterministic summarizer builds the same sections from the messages
themselves, and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxwarden.core.io import Call, Steps, arun, run
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import error_line, one_line, text_of
from ctxwarden.core.window import model_name
from ctxwarden.errors import SummarizerError, SummarizerTimeoutError
from ctxwarden.fold.state import is_summary
from ctxwarden.fold.transcript import transcript

SECTIONS = (
    "Session intent",
    "User constraints and preferences",
    "Key decisions",
    "Artifacts",
    "Errors seen",
    "Current state",
    "Next steps",
)

SECTIONS_GUIDE = """Use exactly these markdown sections, in this order:

## Session intent
What the user wants overall, in one or two sentences.
## User constraints and preferences
Every constraint, preference or instruction the user gave, quoted verbatim.
## Key decisions
Decisions taken and why, including approaches ruled out.
## Artifacts
Real file paths, commands, functions and other symbols involved, exactly as written.
## Errors seen
Errors and failures met, and whether each is fixed, open or worked around.
## Current state
Where the work stands now.
## Next steps
What the agent was about to do next.

Keep it under {budget} words."""
"""The summary's sections, asked of the summarizer by the transcript prompt and by the in-place request alike."""

PROMPT = (
    "You are compacting the working memory of an AI agent. Write a summary that lets the agent continue the task "
    "without the conversation below. "
    + SECTIONS_GUIDE
    + """ Extend the previous summary rather than restarting it: keep what still holds.
{focus}
<previous_summary>
{previous}
</previous_summary>

<conversation>
{conversation}
</conversation>"""
)

FOLD_REQUEST_SOURCE = "ctxwarden_fold_request"
"""`additional_kwargs["lc_source"]` of the message that asks a model for a fold's summary (in place or transcript)."""

PATH = re.compile(
    r"(?<![\w/.-])((?:/|\./|\.\./)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|md|txt|json|toml|yaml|yml|cfg|ini|sql|js|ts|rs|go|c|h|cpp|java|sh))\b"
)
LINE_CAP = 240
QUOTE_INDENT = "  "
"""An entry's quoted line of output is indented under it: a whole line of the original, never cut or reworded."""
SAID_LABEL = "said:"
NEXT_LABEL = "said last:"
"""Labels of the agent's own lines, quoted under Key decisions and under Next steps."""


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary and how it was made."""

    text: str
    summarizer: str
    fallback: bool
    error: str | None = None
    usage: dict[str, int] | None = None


def prompt_for(
    previous: str | None,
    messages: Sequence[BaseMessage],
    *,
    budget_words: int,
    focus: str | None,
    max_chars_per_message: int,
) -> str:
    """The single user message the summarizer model receives."""
    return PROMPT.format(
        budget=budget_words,
        focus=f"Focus especially on: {focus}\n" if focus else "",
        previous=previous or "(none: this is the first fold)",
        conversation=transcript(messages, max_chars_per_message=max_chars_per_message),
    )


def summarizing(
    model: Any, prompt: str | Sequence[BaseMessage], *, retries: int, timeout: float | None = None
) -> Steps[Summary]:
    """Ask `model` with `prompt` (a transcript prompt, or the messages of an in-place request), retrying `retries`
    times, each try bounded by `timeout` seconds; raises the last error.

    The sans-I/O core of `model_summary` and `amodel_summary` (see `ctxwarden.core.io`).
    """
    messages = [asking(prompt)] if isinstance(prompt, str) else list(prompt)
    error: Exception | None = None
    for _attempt in range(retries + 1):
        try:
            reply = yield Call(
                lambda: _call_with_timeout(lambda: model.invoke(messages), timeout),
                lambda: _await_with_timeout(lambda: model.ainvoke(messages), timeout),
            )
            return _from_reply(model, reply)
        except Exception as exc:  # any provider failure falls back, after the retries
            error = exc
    assert error is not None
    raise error


def asking(prompt: str) -> HumanMessage:
    """The user message that asks for a summary with `prompt`, marked as a fold's request (`is_fold_request`)."""
    return HumanMessage(prompt, additional_kwargs={"lc_source": FOLD_REQUEST_SOURCE})


def is_fold_request(messages: Sequence[BaseMessage]) -> bool:
    """Whether `messages` ask for a fold's summary (so a replayed or scripted model can tell them from the agent's)."""
    last = messages[-1] if messages else None
    return last is not None and last.additional_kwargs.get("lc_source") == FOLD_REQUEST_SOURCE


def model_summary(
    model: Any, prompt: str | Sequence[BaseMessage], *, retries: int, timeout: float | None = None
) -> Summary:
    """Ask `model`, retrying `retries` times, each try bounded by `timeout` seconds; raises the last error."""
    return run(summarizing(model, prompt, retries=retries, timeout=timeout))


async def amodel_summary(
    model: Any, prompt: str | Sequence[BaseMessage], *, retries: int, timeout: float | None = None
) -> Summary:
    return await arun(summarizing(model, prompt, retries=retries, timeout=timeout))


async def _await_with_timeout(call: Callable[[], Awaitable[Any]], timeout: float | None) -> Any:
    """`await call()`, cancelled after `timeout` seconds.

    Only the expiry of `timeout` is reported as the summarizer's timeout: a `TimeoutError` the
    model raises itself (its client's own) is passed on as it is, as on the sync path.
    """
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await call()
    except TimeoutError:
        if scope.expired():
            raise SummarizerTimeoutError(_timed_out(timeout)) from None
        raise


def _call_with_timeout(call: Callable[[], Any], timeout: float | None) -> Any:
    """`call()`, given up after `timeout` seconds.

    A blocking call cannot be cancelled, so it runs in a daemon thread (with the
    caller's context) that is abandoned when time is up; the fold goes on without it.
    """
    if timeout is None:
        return call()
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["reply"] = context.run(call)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="ctxwarden-summarizer", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise SummarizerTimeoutError(_timed_out(timeout))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


def _timed_out(timeout: float | None) -> str:
    return (
        f"the summarizer did not answer within {timeout:g} s (ContextPolicy.summarizer_timeout). "
        "Fix: raise summarizer_timeout, or pass a faster summarizer."
    )


def _from_reply(model: Any, reply: Any) -> Summary:
    text = (
        reply.content
        if isinstance(reply.content, str)
        else "\n".join(str(b.get("text", "")) for b in reply.content if isinstance(b, dict))
    )
    if not text.strip():
        raise SummarizerError(
            f"the summarizer {model_name(model)!r} returned an empty summary. Fix: check the model answers plain text "
            "to the fold prompt, or pass summarizer='deterministic'."
        )
    usage = dict(reply.usage_metadata) if getattr(reply, "usage_metadata", None) else None
    return Summary(text.strip(), model_name(model), fallback=False, usage=usage)


LINE_STEPS = (12, 8, 5, 3)
"""Lines a section of the deterministic summary keeps at most, tried in turn until it fits the words a model is asked
for (`bounded_summary`)."""


TOKENS_PER_WORD = 4 / 3
"""English prose, as tokenizers count it: what `words` words asked of a model come to."""


def bounded_summary(
    previous: str | None, messages: Sequence[BaseMessage], words: int, counter: Callable[[str], int]
) -> str:
    """`deterministic_summary` within the tokens of `words` words, the length a summarizer model is asked for: fewer
    lines a section until it fits (those left out are in the history file). Counted in tokens, not words: quoted
    logs and paths hold three tokens a word. At twelve lines a section whatever the window, an 8k window's summary
    outweighed what its fold freed, and every call after it was past the window."""
    for lines in LINE_STEPS:
        text = deterministic_summary(previous, messages, max_lines=lines)
        if counter(text) <= words * TOKENS_PER_WORD:
            break
    return text


def deterministic_summary(previous: str | None, messages: Sequence[BaseMessage], *, max_lines: int = 12) -> str:
    """The same sections, built from the turns themselves (no model): it cannot fail."""
    sections: OrderedDict[str, list[str]] = OrderedDict((name, []) for name in SECTIONS)
    for name, lines in _parse(previous).items():
        sections[name].extend(lines)
    users = [m for m in messages if isinstance(m, HumanMessage) and not is_summary(m)]
    if users and not sections["Session intent"]:
        sections["Session intent"].append(one_line(_plain(users[0].content), LINE_CAP))
    for message in users:
        sections["User constraints and preferences"].append(f'"{one_line(_plain(message.content), 600)}"')
    outcomes = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    said = [m for m in messages if isinstance(m, AIMessage) and _plain(m.content).strip()]
    if said:  # the next step of the summary extended here was taken before these turns: it is a decision now
        sections["Key decisions"].extend(entry.replace(NEXT_LABEL, SAID_LABEL, 1) for entry in sections["Next steps"])
    for reply in said[-5:-1]:  # the last reply is the next step
        sections["Key decisions"].append(_said(SAID_LABEL, reply.content, 2))
    artifacts: OrderedDict[str, None] = OrderedDict()
    labels: dict[str, str] = {}  # call id -> what was called, for the errors its result shows
    last_call: str | None = None
    for item in messages:
        if isinstance(item, AIMessage):
            for call in item.tool_calls:
                args = call.get("args") or {}
                command = str(args.get("command") or args.get("file_path") or args.get("path") or "")
                called = command or ", ".join(f"{key}={value!r}" for key, value in args.items())
                label = f"{call.get('name')}({one_line(called, 160)})"
                labels[str(call.get("id"))] = label
                result = outcomes.get(str(call.get("id")))
                back = _came_back(result)
                artifacts[_call_entry(str(call.get("name")), label, command, back, result)] = None
                last_call = f"{label} -> {back}"
                for path in PATH.findall(str(args)):
                    artifacts[f"file {path}"] = None
        if isinstance(item, ToolMessage):
            error = error_line(text_of(item))
            if error:
                label = labels.get(item.tool_call_id, f"call {item.tool_call_id}")
                sections["Errors seen"].append(_quoting(f"{label} failed:", error))
    sections["Artifacts"].extend(artifacts)
    if last_call is not None:
        sections["Current state"] = [f"last call: {last_call}"]
    elif messages:
        sections["Current state"] = [f"last action: {one_line(_plain(messages[-1].content), LINE_CAP)}"]
    if said:
        sections["Next steps"] = [_said(NEXT_LABEL, said[-1].content, 3)]
    out = []
    for name, lines in sections.items():
        unique = list(OrderedDict.fromkeys(line for line in lines if line))
        shown = unique[:2] + unique[-(max_lines - 2) :] if len(unique) > max_lines else unique
        body = "\n".join(f"- {line}" for line in shown) if shown else "- (none recorded)"
        if len(unique) > max_lines:
            body += f"\n- … {len(unique) - max_lines} more in the history file"
        out.append(f"## {name}\n{body}")
    return "\n".join(out)


def _call_entry(name: str, label: str, command: str, back: str, result: ToolMessage | None) -> str:
    """A call and what came `back`: the first line of its input (a command, a path) and of its output, each whole on
    its own line (an input longer than a quotable line is named by `label`, inline and cut, as prose)."""
    first = _first_line(text_of(result)) if result is not None else ""
    opening = _first_line(command)
    if opening and len(opening) <= LINE_CAP:
        quoted = [opening, first] if first and len(first) <= LINE_CAP else [opening]
        what = "input and first line" if len(quoted) == 2 else "input"
        return f"{name} -> {back}, {what}:" + "".join(f"\n{QUOTE_INDENT}{line}" for line in quoted)
    return _quoting(f"{label} -> {back}, first line:", first) if first else f"{label} -> {back}"


def _came_back(result: ToolMessage | None) -> str:
    if result is None:
        return "no result"
    text = text_of(result)
    if not _first_line(text):
        return "empty"
    record = result.response_metadata.get(METADATA_KEY)
    evicted = record.get("chars") if isinstance(record, dict) and record.get("evicted") else None
    size = f"{evicted:,} chars, evicted" if isinstance(evicted, int) else f"{len(text):,} chars"  # not the preview's
    return "error" if result.status == "error" else size


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _said(label: str, content: Any, most: int) -> str:
    """What the agent said: up to `most` of its lines, each whole on its own line under `label`; a reply without a line
    short enough to quote is kept as one line, cut (prose, as a summarizer model would write)."""
    text = _plain(content)
    lines = [line.strip() for line in text.splitlines() if line.strip() and len(line.strip()) <= LINE_CAP][:most]
    if not lines:
        return one_line(text, LINE_CAP)
    return label + "".join(f"\n{QUOTE_INDENT}{line}" for line in lines)


def _quoting(label: str, line: str) -> str:
    """`label`, then `line` whole on its own indented line; a line too long to quote is left to `recall`."""
    line = line.strip()
    if not line or len(line) > LINE_CAP:
        return label.rstrip(":")
    return f"{label}\n{QUOTE_INDENT}{line}"


def _parse(summary: str | None) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if not summary:
        return found
    current: str | None = None
    for line in summary.splitlines():
        heading = line.strip().lstrip("#").strip()
        if line.startswith("## ") and heading in SECTIONS:
            current = heading
            found.setdefault(current, [])
        elif (
            current
            and line.startswith("- ")
            and line[2:].strip() not in {"(none recorded)"}
            and not line.startswith("- … ")
        ):
            found[current].append(line[2:].strip())
        elif current and line.startswith(QUOTE_INDENT) and line.strip() and found[current]:
            found[current][-1] += f"\n{line}"  # the quoted line of the entry above
    return found


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


__all__ = [
    "FOLD_REQUEST_SOURCE",
    "PROMPT",
    "SECTIONS",
    "SECTIONS_GUIDE",
    "Summary",
    "amodel_summary",
    "asking",
    "deterministic_summary",
    "is_fold_request",
    "model_summary",
    "prompt_for",
    "summarizing",
]
