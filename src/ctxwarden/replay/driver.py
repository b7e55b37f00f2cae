"""Drive an agent through a recording, one invoke per recorded user turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.replay.recording import Recording


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
        for update in agent.stream({"messages": [turn.user]}, config, stream_mode="updates"):
            for node_update in update.values():
                for message in _messages(node_update):
                    if on_call is not None and isinstance(message, AIMessage):
                        on_call(message)
    state = agent.get_state(config)
    return list(state.values.get("messages", []))


async def areplay_into(
    agent: Any,
    recording: Recording,
    config: RunnableConfig,
    *,
    on_call: Callable[[AIMessage], None] | None = None,
) -> list[BaseMessage]:
    """Async twin of `replay_into`."""
    for turn in recording.turns:
        async for update in agent.astream({"messages": [turn.user]}, config, stream_mode="updates"):
            for node_update in update.values():
                for message in _messages(node_update):
                    if on_call is not None and isinstance(message, AIMessage):
                        on_call(message)
    state = await agent.aget_state(config)
    return list(state.values.get("messages", []))


def _messages(node_update: Any) -> list[Any]:
    if isinstance(node_update, dict):
        messages = node_update.get("messages")
        if isinstance(messages, list):
            return messages
    return []


__all__ = ["areplay_into", "replay_into"]
