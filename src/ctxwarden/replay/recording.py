"""Recorded agent sessions, loaded into one shape the replay model and tools can serve.

Four formats: mini-swe-agent 1.1 trajectory files (`trajectory_format:
"mini-swe-agent-1.1"`, see the shipped trajectory's credits), plain OpenAI
chat-completions message lists (a JSON list, or an object with a `messages` list),
original SWE-agent `.traj` files (`ctxwarden.replay.sweagent`) and OpenHands event
histories (`ctxwarden.replay.openhands`); the last two become message lists first.
A recording is split into turns, one per user message, each with the assistant
steps that answered it; tool outputs are kept by tool-call id, the full
`extra.raw_output` when the recording has it. Anything malformed fails here, with
the file and the place named, rather than halfway through a replay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata

from ctxwarden.errors import TrajectoryFormatError
from ctxwarden.replay.openhands import is_openhands_events, openhands_messages
from ctxwarden.replay.sweagent import DemoPlace, demonstration_chars, is_sweagent_traj, sweagent_messages

MINI_SWE_FORMAT = "mini-swe-agent-1.1"


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """A user message and every assistant step that answered it."""

    user: HumanMessage
    steps: tuple[AIMessage, ...]


@dataclass(frozen=True, slots=True)
class Recording:
    """A recorded session, ready to replay."""

    source: str
    """The file it came from (or a label)."""

    system_prompt: str | None
    turns: tuple[RecordedTurn, ...]
    outputs: Mapping[str, str]
    """Tool output by tool-call id."""

    final_output: str | None = None
    """What the session submitted at the end (mini-swe-agent's `exit` message)."""

    instance_id: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> tuple[AIMessage, ...]:
        """Every assistant step, in order, across turns."""
        return tuple(step for turn in self.turns for step in turn.steps)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools the recording calls, in first-use order."""
        names: dict[str, None] = {}
        for step in self.steps:
            for call in step.tool_calls:
                names.setdefault(call["name"], None)
        return tuple(names)

    def tool_output_chars(self) -> int:
        """Characters of all recorded tool output."""
        return sum(len(text) for text in self.outputs.values())


def load_recording(path: str | Path, *, demo_in: DemoPlace = "system") -> Recording:
    """Load a recorded session from `path` (any supported format); `demo_in` places a SWE-agent demonstration."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TrajectoryFormatError(f"{path}: cannot be read ({exc.strerror or exc}).") from exc
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"{path}: is not UTF-8 text ({exc.reason} at byte {exc.start}).") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrajectoryFormatError(
            f"{path}: is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from exc
    return parse_recording(data, source=str(path), demo_in=demo_in)


def parse_recording(data: Any, *, source: str = "<recording>", demo_in: DemoPlace = "system") -> Recording:
    """Build a `Recording` from already-decoded JSON (any supported format).

    `demo_in` says where an original SWE-agent session's demonstration goes: `"system"` (appended to the system
    prompt) or `"user"` (before the task in the first user message); `info["demonstration"]` records the choice.
    """
    if is_sweagent_traj(data):
        demo = {"demonstration": {"in": demo_in, "chars": demonstration_chars(data)}}
        converted = sweagent_messages(data, demo_in=demo_in, source=source)
        return _from_messages(converted, source=source, info=demo, instance_id=None)
    if is_openhands_events(data):
        return _from_messages(openhands_messages(data, source=source), source=source, info={}, instance_id=None)
    if isinstance(data, list):
        return _from_messages(data, source=source, info={}, instance_id=None)
    if not isinstance(data, dict):
        raise TrajectoryFormatError(
            f"{source}: expected a JSON object or a list of messages, found {type(data).__name__}."
        )
    fmt = data.get("trajectory_format")
    if fmt is not None and fmt != MINI_SWE_FORMAT:
        raise TrajectoryFormatError(
            f"{source}: trajectory_format {fmt!r} is not supported; expected {MINI_SWE_FORMAT!r} "
            f"or a plain OpenAI message list."
        )
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise TrajectoryFormatError(f"{source}: has no 'messages' list.")
    info_raw = data.get("info")
    info: dict[str, Any] = info_raw if isinstance(info_raw, dict) else {}
    instance_id = data.get("instance_id") if isinstance(data.get("instance_id"), str) else None
    return _from_messages(messages, source=source, info=info, instance_id=instance_id)


def _from_messages(
    messages: Sequence[Any], *, source: str, info: Mapping[str, Any], instance_id: str | None
) -> Recording:
    system_prompt: str | None = None
    turns: list[RecordedTurn] = []
    user: HumanMessage | None = None
    steps: list[AIMessage] = []
    outputs: dict[str, str] = {}
    pending: dict[str, int] = {}
    final_output: str | None = None

    for index, raw in enumerate(messages):
        where = f"{source}: message {index}"
        if not isinstance(raw, dict):
            raise TrajectoryFormatError(f"{where} is not an object (found {type(raw).__name__}).")
        role = raw.get("role")
        if role == "system":
            if user is not None:
                raise TrajectoryFormatError(f"{where}: a system message after the conversation started.")
            system_prompt = _text(raw.get("content"), where)
        elif role == "user":
            if user is not None:
                turns.append(RecordedTurn(user, tuple(steps)))
            user, steps = HumanMessage(_text(raw.get("content"), where)), []
        elif role == "assistant":
            if user is None:
                raise TrajectoryFormatError(f"{where}: an assistant message before any user message.")
            step = _assistant(raw, where, step_index=sum(len(t.steps) for t in turns) + len(steps))
            for call in step.tool_calls:
                if call["id"] in pending or call["id"] in outputs:
                    raise TrajectoryFormatError(f"{where}: tool-call id {call['id']!r} is used twice.")
                pending[str(call["id"])] = index
            steps.append(step)
        elif role == "tool":
            call_id = raw.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                raise TrajectoryFormatError(
                    f"{where}: tool result for {call_id!r}, which no earlier assistant message called."
                )
            del pending[call_id]
            outputs[call_id] = _tool_output(raw, where)
        elif role == "exit":
            final_output = _text(raw.get("content"), where)
        else:
            raise TrajectoryFormatError(
                f"{where}: unknown role {role!r}; expected system, user, assistant, tool or exit."
            )
    if user is None:
        raise TrajectoryFormatError(f"{source}: has no user message, so there is nothing to replay.")
    turns.append(RecordedTurn(user, tuple(steps)))
    _answer_final_calls(turns, pending, outputs, final_output, source)
    return Recording(source, system_prompt, tuple(turns), outputs, final_output, instance_id, dict(info))


def _answer_final_calls(
    turns: list[RecordedTurn],
    pending: dict[str, int],
    outputs: dict[str, str],
    final_output: str | None,
    source: str,
) -> None:
    """The closing call (e.g. a submit command) has no recorded result; the exit message is what it returned."""
    if not pending:
        return
    last_ids = {call["id"] for call in turns[-1].steps[-1].tool_calls} if turns[-1].steps else set()
    unanswered = set(pending) - last_ids
    if unanswered:
        first = min(unanswered, key=pending.__getitem__)
        raise TrajectoryFormatError(
            f"{source}: message {pending[first]} calls tool {first!r}, and no tool message answers it."
        )
    for call_id in pending:
        outputs[call_id] = final_output if final_output is not None else ""


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    raise TrajectoryFormatError(f"{where}: content is a {type(content).__name__}; expected text.")


def _assistant(raw: Mapping[str, Any], where: str, *, step_index: int) -> AIMessage:
    calls = []
    for n, call in enumerate(raw.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise TrajectoryFormatError(f"{where}: tool call {n} has no function name.")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise TrajectoryFormatError(f"{where}: tool call {n} has no id.")
        arguments = function.get("arguments") or "{}"
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(
                f"{where}: tool call {call_id!r} has arguments that are not JSON ({exc.msg})."
            ) from exc
        if not isinstance(args, dict):
            raise TrajectoryFormatError(f"{where}: tool call {call_id!r} has arguments that are not an object.")
        calls.append({"name": function["name"], "args": args, "id": call_id, "type": "tool_call"})
    return AIMessage(
        content=_text(raw.get("content"), where),
        tool_calls=calls,
        usage_metadata=_usage(raw),
        response_metadata={"replay": {"step": step_index}},
    )


def _usage(raw: Mapping[str, Any]) -> UsageMetadata | None:
    extra = raw.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else raw.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return UsageMetadata(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=prompt + completion,
        input_token_details=InputTokenDetails(cache_read=cached),
    )


def _tool_output(raw: Mapping[str, Any], where: str) -> str:
    extra = raw.get("extra")
    if isinstance(extra, dict) and isinstance(extra.get("raw_output"), str):
        return str(extra["raw_output"])
    return _text(raw.get("content"), where)


__all__ = ["MINI_SWE_FORMAT", "RecordedTurn", "Recording", "load_recording", "parse_recording"]
