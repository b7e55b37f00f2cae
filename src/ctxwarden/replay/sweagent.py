"""Original SWE-agent `.traj` sessions, as the OpenAI message list the replay reads.

SWE-agent (the file-window scaffold: `open`, `goto`, `edit`, `search_dir`, ...) keeps two
records of a session: `history`, the messages as sent (system prompt, the demonstration
marked `is_demo`, the task, then turns), and `trajectory`, one entry per step with its
`thought`, `action` and the whole `observation`. The replay needs both: the fixed prompt
from `history` and the steps from `trajectory` (whose observations are not decorated with
the prompt's status lines). Each step becomes an assistant message (its thought, and one
tool call named after the command word, arguments `{"command": action}`) and the tool
message answering it, so the tool names are the agent's own commands.

The demonstration is fixed instruction that SWE-agent sends before the task. Deployments
put it either in the system prompt or in the first user message, and the two shapes
manage very differently (a first user message a third of a small window long is shown
in part from the first clearing batch on, `ctxwarden.core.task`), so `demo_in` chooses: `"system"` or
`"user"`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from ctxwarden.errors import TrajectoryFormatError

DemoPlace = Literal["system", "user"]
DEMO_PLACES: tuple[DemoPlace, ...] = ("system", "user")


def is_sweagent_traj(data: Any) -> bool:
    """Whether decoded JSON looks like an original SWE-agent `.traj` (a `history` and a `trajectory` list)."""
    return isinstance(data, dict) and isinstance(data.get("history"), list) and isinstance(data.get("trajectory"), list)


def sweagent_steps(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trajectory's steps that acted (a non-blank `action`): the ones a replay re-emits."""
    return [s for s in data.get("trajectory") or () if isinstance(s, dict) and str(s.get("action") or "").strip()]


def sweagent_messages(data: Mapping[str, Any], *, demo_in: DemoPlace = "system", source: str = "<traj>") -> list[dict]:
    """The OpenAI chat message list of one SWE-agent session, the demonstration placed by `demo_in`."""
    if demo_in not in DEMO_PLACES:
        raise TrajectoryFormatError(
            f"demo_in={demo_in!r} is not a place for the demonstration; use 'system' or 'user'."
        )
    history = data.get("history")
    if not isinstance(history, list):
        raise TrajectoryFormatError(f"{source}: has no 'history' list (an original SWE-agent .traj has one).")
    system = ""
    demos: list[str] = []
    users: list[str] = []
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            raise TrajectoryFormatError(f"{source}: history entry {index} is not an object.")
        role = message.get("role")
        if role == "system" and not system:
            system = _text(message.get("content"))
        elif role == "assistant" and not message.get("is_demo"):
            break  # the fixed prompt ends where the agent's first own step begins
        elif role == "user":
            (demos if message.get("is_demo") else users).append(_text(message.get("content")))
    if demo_in == "system":
        system = "\n\n".join([system, *demos])
    else:
        users = demos + users
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(users)},
    ]
    for index, step in enumerate(sweagent_steps(data)):
        action = str(step["action"]).rstrip("\n")
        call_id = f"call_{index:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": step.get("thought") or "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": command_name(action), "arguments": json.dumps({"command": action})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": step.get("observation") or ""})
    return messages


def command_name(action: str) -> str:
    """The command word an action starts with (`open`, `edit`, `search_dir`), else `bash` for shell syntax."""
    words = action.split()
    name = words[0] if words else "bash"
    return name if name.replace("_", "").isalnum() else "bash"


def demonstration_chars(data: Mapping[str, Any]) -> int:
    """Characters of the demonstration(s) the history marks `is_demo` before the agent's first step."""
    total = 0
    for message in data.get("history") or ():
        if isinstance(message, dict):
            if message.get("role") == "assistant" and not message.get("is_demo"):
                break
            if message.get("is_demo") and message.get("role") == "user":
                total += len(_text(message.get("content")))
    return total


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


__all__ = [
    "DEMO_PLACES",
    "DemoPlace",
    "command_name",
    "demonstration_chars",
    "is_sweagent_traj",
    "sweagent_messages",
    "sweagent_steps",
]
