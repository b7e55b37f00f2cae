"""The window is resolved per call from the model actually called: override, profile, loaded context, error."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from ctxwarden import WindowUnknownError, create_context_agent, resolve_window
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import ScriptedChatModel, scripted_model


class ChatOllama(ScriptedChatModel):
    """Stands in for langchain-ollama's ChatOllama: the same `num_ctx` attribute, no import needed."""

    num_ctx: int | None = None


def test_profile_max_input_tokens() -> None:
    window = resolve_window(scripted_model([], window=200_000))
    assert (window.tokens, window.source) == (200_000, "profile")


def test_override_beats_profile() -> None:
    window = resolve_window(scripted_model([], window=200_000), override=8_000)
    assert (window.tokens, window.source) == (8_000, "override")


def test_local_model_loaded_context() -> None:
    model = ChatOllama(messages=iter([]), num_ctx=16_384)
    window = resolve_window(model)
    assert (window.tokens, window.source) == (16_384, "loaded_context")


def test_bound_model_is_unwrapped() -> None:
    model = scripted_model([], window=64_000)
    assert resolve_window(model.bind(stop=["x"])).tokens == 64_000


def test_unknown_window_says_how_to_pass_one() -> None:
    with pytest.raises(WindowUnknownError) as caught:
        resolve_window(scripted_model([], name="mystery"))
    message = str(caught.value)
    assert "'mystery'" in message
    assert "ContextPolicy(window=" in message
    assert "max_input_tokens" in message
    assert isinstance(caught.value, LookupError)


def test_local_model_without_loaded_context_names_the_attribute() -> None:
    with pytest.raises(WindowUnknownError, match=r"ChatOllama\.num_ctx is None.*num_ctx=32768"):
        resolve_window(ChatOllama(messages=iter([])))


def test_a_bad_profile_value_is_not_trusted() -> None:
    model = scripted_model([])
    model.profile = {"max_input_tokens": "lots"}  # type: ignore[typeddict-item]
    with pytest.raises(WindowUnknownError):
        resolve_window(model)


def _windows(messages: list) -> list[int]:
    return [m.response_metadata[METADATA_KEY]["window"] for m in messages if isinstance(m, AIMessage)]


def test_window_follows_the_model_when_a_thread_moves_to_another(state_dir: Path) -> None:
    """Rebuilding the agent on the same checkpointed thread with another model changes every threshold."""
    config = {"configurable": {"thread_id": "switch"}}
    big = create_context_agent(scripted_model(["first"], window=200_000, name="big"), state_dir=state_dir)
    big.invoke({"messages": [("user", "one")]}, config)
    big.checkpointer.conn.close()

    small = create_context_agent(scripted_model(["second"], window=8_000, name="small"), state_dir=state_dir)
    out = small.invoke({"messages": [("user", "two")]}, config)
    small.checkpointer.conn.close()

    assert _windows(out["messages"]) == [200_000, 8_000]
    models = [m.response_metadata[METADATA_KEY]["model"] for m in out["messages"] if isinstance(m, AIMessage)]
    assert models == ["big", "small"]


def test_agent_without_a_known_window_fails_with_the_fix(state_dir: Path) -> None:
    agent = create_context_agent(scripted_model(["never"], name="mystery"), state_dir=state_dir)
    with pytest.raises(WindowUnknownError, match="ContextPolicy"):
        agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    agent.checkpointer.conn.close()
