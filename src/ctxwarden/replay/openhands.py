"""OpenHands event histories, as the OpenAI message list the replay reads.

OpenHands records a session as events (its `event_to_dict` form, as in an evaluation's
`output.jsonl` `history` or a saved conversation's event list): actions
(`{"action": "run", "args": {...}, "source": "agent"}`) and the observations they cause
(`{"observation": "run", "cause": <action id>, "content": "..."}`). An action the model
chose carries `tool_call_metadata` naming the function it called (`execute_bash`,
`str_replace_editor`, `think`, `finish`, ...), its call id, and the model's response; the
replay keeps those names and the arguments the model sent, so the tool names are the
agent's own. Actions from one model response form one assistant message. The system
prompt is the `system` action; user `message` actions are user turns. Events the model
never saw as such (agent state changes, memory recalls, condensations) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwarden.errors import TrajectoryFormatError

_SKIPPED_ACTIONS = frozenset({"change_agent_state", "recall", "condensation", "condensation_request", "null"})
_BOOKKEEPING_ARGS = frozenset(
    {"thought", "blocking", "hidden", "confirmation_state", "security_risk", "is_confirmed", "impl_source"}
)


def is_openhands_events(data: Any) -> bool:
    """Whether decoded JSON is an OpenHands event list (or an object holding one as `history`)."""
    events = data.get("history") if isinstance(data, dict) else data
    return (
        isinstance(events, list)
        and bool(events)
        and all(isinstance(e, dict) for e in events)
        and any("action" in e or "observation" in e for e in events)
        and not any("role" in e for e in events)
    )


def openhands_messages(data: Any, *, source: str = "<events>") -> list[dict[str, Any]]:
    """The OpenAI chat message list of one OpenHands event history."""
    events: Sequence[Any] = (data.get("history") if isinstance(data, dict) else data) or []
    outputs: dict[Any, str] = {}  # by the causing action's id
    for event in events:
        if "observation" in event and event.get("cause") is not None:
            outputs[event["cause"]] = _text(event.get("content"))
    messages: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None  # the assistant message the next tool call of the same response joins
    response_id: Any = None
    for index, event in enumerate(events):
        kind = event.get("action")
        if kind is None or kind in _SKIPPED_ACTIONS:
            continue
        where = f"{source}: event {index}"
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if kind == "system":
            messages.insert(0, {"role": "system", "content": _text(args.get("content"))})
            current = None
            continue
        if kind == "message" and event.get("source") == "user":
            messages.append({"role": "user", "content": _text(args.get("content") or event.get("message"))})
            current = None
            continue
        if kind == "message":
            messages.append({"role": "assistant", "content": _text(args.get("content") or event.get("message"))})
            current = None
            continue
        name, call_id, arguments, this_response = _call(event, kind, args, where)
        if current is None or this_response is None or this_response != response_id:
            current = {"role": "assistant", "content": _text(args.get("thought")), "tool_calls": []}
            messages.append(current)
            response_id = this_response
        current["tool_calls"].append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        )
        outputs.setdefault(call_id, outputs.get(event.get("id"), ""))
    return _answer_calls(messages, outputs)


def _call(event: Mapping[str, Any], kind: str, args: Mapping[str, Any], where: str) -> tuple[str, str, Any, Any]:
    """The function name, call id, arguments and model response id of an action."""
    meta: dict[str, Any] = event.get("tool_call_metadata") or {}
    name = meta.get("function_name") or kind
    call_id = meta.get("tool_call_id") or f"event_{event.get('id')}"
    response: dict[str, Any] = meta.get("model_response") or {}
    arguments: Any = None
    for choice in response.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            if call.get("id") == call_id:
                raw = (call.get("function") or {}).get("arguments")
                try:
                    arguments = json.loads(raw) if isinstance(raw, str) else raw
                except json.JSONDecodeError as exc:
                    message = f"{where}: tool call {call_id!r} has arguments that are not JSON ({exc.msg})."
                    raise TrajectoryFormatError(message) from exc
    if not isinstance(arguments, dict):  # no model response kept: the action's own arguments
        arguments = {k: v for k, v in args.items() if k not in _BOOKKEEPING_ARGS and v not in (None, "", [])}
    return str(name), str(call_id), arguments, response.get("id")


def _answer_calls(messages: list[dict[str, Any]], outputs: Mapping[Any, str]) -> list[dict[str, Any]]:
    """Each assistant message followed by one tool message per call (empty when nothing answered it)."""
    answered: list[dict[str, Any]] = []
    for message in messages:
        answered.append(message)
        for call in message.get("tool_calls") or ():
            answered.append({"role": "tool", "tool_call_id": call["id"], "content": outputs.get(call["id"], "")})
    return answered


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content)


__all__ = ["is_openhands_events", "openhands_messages"]
