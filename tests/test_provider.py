"""Opt-in: the stack in front of a real provider. Runs only when the provider's key is set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from ctxwarden import create_context_agent
from ctxwarden.core.stamp import METADATA_KEY

PROVIDERS = [
    ("ANTHROPIC_API_KEY", "langchain_anthropic", "anthropic:claude-haiku-4-5"),
    ("OPENAI_API_KEY", "langchain_openai", "openai:gpt-4o-mini"),
]


@pytest.mark.provider
@pytest.mark.parametrize(("key", "package", "model"), PROVIDERS)
def test_real_provider_reports_usage_and_the_meter_calibrates(
    key: str, package: str, model: str, state_dir: Path
) -> None:
    if not os.environ.get(key):
        pytest.skip(f"{key} is not set")
    pytest.importorskip(package)
    from langchain.chat_models import init_chat_model

    agent = create_context_agent(init_chat_model(model), state_dir=state_dir)
    config = {"configurable": {"thread_id": "provider"}}
    agent.invoke({"messages": [("user", "Reply with the single word: ready")]}, config)
    out = agent.invoke({"messages": [("user", "Once more, the single word: ready")]}, config)
    agent.checkpointer.conn.close()
    stamps = [m.response_metadata[METADATA_KEY] for m in out["messages"] if isinstance(m, AIMessage)]
    assert stamps[0]["reported_input_tokens"] > 0
    assert stamps[0]["window"] > 8_000  # read from the provider's model profile
    # after one calibration, the meter is within 15% of what the provider counts
    assert stamps[1]["input_tokens"] == pytest.approx(stamps[1]["reported_input_tokens"], rel=0.15)
