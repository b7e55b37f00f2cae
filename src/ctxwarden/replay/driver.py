"""Drive an agent through a recording, one invoke per recorded user turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.replay.recording import RecordedTurn, Recording


def replay_into(
    agent: Any,
    recording: Recording,
    config: RunnableConfig,
    *,
    on_call: Callable[[AIMessage], None] | None = None,
) -> list[BaseMessage]:
    """Send each recorded user message to `agent` on the thread in `config`; return the final messages.

    `on_call` sees every AI message as the agent produces it (for progress bars).
    """
    for turn in recording.turns:
        for update in agent.stream(_turn_input(turn), config, stream_mode="updates"):
            _report(update, on_call)
    return _final_messages(agent.get_state(config))


async def areplay_into(
    agent: Any,
    recording: Recording,
    config: RunnableConfig,
    *,
    on_call: Callable[[AIMessage], None] | None = None,
) -> list[BaseMessage]:
    """Async twin of `replay_into`."""
    for turn in recording.turns:
        async for update in agent.astream(_turn_input(turn), config, stream_mode="updates"):
            _report(update, on_call)
    return _final_messages(await agent.aget_state(config))


# The twins above differ only in how they stream and read the state; what they do with it is here, once.
def _turn_input(turn: RecordedTurn) -> dict[str, Any]:
    return {"messages": [turn.user]}


def _report(update: Any, on_call: Callable[[AIMessage], None] | None) -> None:
    """Hand every AI message of one streamed update to `on_call`."""
    for node_update in update.values():
        for message in _messages(node_update):
            if on_call is not None and isinstance(message, AIMessage):
                on_call(message)


def _final_messages(state: Any) -> list[BaseMessage]:
    return list(state.values.get("messages", []))


def _messages(node_update: Any) -> list[Any]:
    if isinstance(node_update, dict):
        messages = node_update.get("messages")
        if isinstance(messages, list):
            return messages
    return []


__all__ = ["areplay_into", "replay_into"]
