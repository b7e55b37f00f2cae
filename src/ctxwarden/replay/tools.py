"""Tools that return what a recorded session's tools returned, by tool-call id.

One tool per tool name the recording uses, with an argument schema inferred from
the recorded calls, so the agent binds and calls it like the original. The output
is the recorded one (the full `extra.raw_output` where the recording kept it); a
call id the recording never made raises `ReplayMismatchError` naming it.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field, create_model

from ctxwarden.errors import ReplayMismatchError
from ctxwarden.replay.recording import Recording


def replay_tools(recording: Recording) -> list[BaseTool]:
    """A replay tool for every tool name `recording` calls."""
    return [_replay_tool(recording, name) for name in recording.tool_names]


def _replay_tool(recording: Recording, name: str) -> BaseTool:
    calls = [call for step in recording.steps for call in step.tool_calls if call["name"] == name]
    outputs = recording.outputs
    expected = {call["id"]: call["args"] for call in calls}

    def run(tool_call_id: str, **_args: Any) -> str:
        if tool_call_id not in expected:
            raise ReplayMismatchError(
                f"{recording.source}: tool {name!r} was called with id {tool_call_id!r}, "
                f"which the recording never issued."
            )
        return outputs[tool_call_id]

    return StructuredTool.from_function(
        func=run,
        name=name,
        description=f"Replays the recorded output of the {name!r} tool from {recording.source}.",
        args_schema=_args_schema(name, [call["args"] for call in calls]),
    )


def _args_schema(name: str, recorded_args: list[dict[str, Any]]) -> type[BaseModel]:
    keys: dict[str, int] = {}
    for args in recorded_args:
        for key in args:
            keys[key] = keys.get(key, 0) + 1
    fields: dict[str, Any] = {
        key: (Any, ...) if count == len(recorded_args) else (Any, None) for key, count in keys.items()
    }
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], Field())
    return create_model(f"{name.title().replace('_', '')}ReplayArgs", **fields)


__all__ = ["replay_tools"]
