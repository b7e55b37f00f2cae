"""A call measured past a window the model declares goes through the forced round before it is sent.

Before, it was sent as measured and the forced round followed only a refusal. A provider that
refuses took the whole request in first (a pasted log of 220,000 tokens, for nothing). A local
server that loaded its model with a context (`num_ctx`, as ChatOllama keeps it) refuses nothing:
it cut the prompt from its start without a word, and the model answered without its system
prompt. A window passed in the policy is a budget the provider may not hold to: a call measured
past it is still sent as it stands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import PrivateAttr

from ctxwarden import ContextPolicy, TraceStore, create_context_agent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.replay import ScriptedChatModel
from ctxwarden.stack.refusals import MEASURE_SLACK

LOG = "\n".join(f"2026-11-27 12:{i // 60:02d}:{i % 60:02d} worker_{i % 7} processed batch_{i}" for i in range(6_000))
"""A pasted log of about 130,000 tokens."""


class LocalServer(ScriptedChatModel):
    """A local server that loaded its model with `num_ctx` tokens: a longer prompt is cut from its start, unsaid."""

    num_ctx: int = 8_000
    _read: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _cut: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        kept = list(messages)
        while len(kept) > 1 and sum(len(str(m.content)) for m in kept) // 4 > self.num_ctx:
            kept.pop(0)  # what llama.cpp-style context shifting keeps: the end
        self._cut.append(len(messages) - len(kept))
        self._read.append(kept)
        return super()._generate(kept, stop, run_manager, **kwargs)


def test_a_local_server_never_gets_a_prompt_past_the_context_it_loaded(tmp_path: Path) -> None:
    model = LocalServer(messages=iter([AIMessage("hello"), AIMessage("read it")]))
    agent = create_context_agent(model, state_dir=tmp_path, system_prompt="You are the log reader.")
    config = {"configurable": {"thread_id": "local"}}
    agent.invoke({"messages": [("user", "hi")]}, config)
    out = agent.invoke({"messages": [("user", LOG)]}, config)

    assert out["messages"][-1].content == "read it"
    assert not any(model._cut)  # before: the prompt after the paste lost its start, the system prompt with it
    read = model._read[-1]
    assert isinstance(read[0], SystemMessage)
    assert "You are the log reader." in str(read[0].content)
    assert any(str(m.content).startswith("[ctxwarden: this message is shown in part") for m in read)
    assert agent.get_state(config).values["messages"][2].content == LOG  # the thread keeps it whole
    trace = TraceStore(tmp_path / "trace.sqlite")
    window = trace.events(kind="context_overflow")[0].payload["window"]
    assert window == model.num_ctx  # the window ctxwarden read from the server's loaded context
    assert [e.payload["stage"] for e in trace.events(kind="context_overflow")] == ["measured"]
    assert any(e.payload["forced"] for e in trace.events(kind="context_clear"))
    # the trace holds what was done for the call sent: the forced round's batch, not the unforced shaping before it
    lifecycle = trace.events(kind="context_clear") + trace.events(kind="fold_held")
    assert all(e.payload.get("forced") for e in lifecycle if e.payload["tokens_before"] > model.num_ctx)
    agent.checkpointer.conn.close()


class Generous(ScriptedChatModel):
    """A provider that takes far more than the window the policy sets."""

    _sizes: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self._sizes.append(sum(len(str(m.content)) for m in messages) // 4)
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_window_set_in_the_policy_is_a_budget_and_a_call_past_it_is_sent_as_it_stands(tmp_path: Path) -> None:
    model = Generous(messages=iter([AIMessage("hello"), AIMessage("read it whole")]))
    model.profile = {"max_input_tokens": 1_000_000}
    agent = create_context_agent(model, state_dir=tmp_path, policy=ContextPolicy(window=32_000))
    config = {"configurable": {"thread_id": "budget"}}
    agent.invoke({"messages": [HumanMessage("hi")]}, config)
    agent.invoke({"messages": [HumanMessage(LOG)]}, config)

    assert max(model._sizes) > 32_000  # the model read the paste whole
    trace = TraceStore(tmp_path / "trace.sqlite")
    assert [e.payload["stage"] for e in trace.events(kind="context_overflow")] == ["measured"]
    assert not any(e.payload["forced"] for e in trace.events(kind="context_clear"))
    agent.checkpointer.conn.close()


def test_a_call_just_past_a_providers_window_is_sent_and_the_provider_decides(tmp_path: Path) -> None:
    """The calibrated count is an estimate: a call measured a few percent past a provider's declared window is sent as
    measured (a provider that refuses says so, and the forced round follows then); further past, it is forced first."""
    window = 20_000
    model = Generous(messages=iter([AIMessage("hello"), AIMessage("read it")]))
    model.profile = {"max_input_tokens": window}
    agent = create_context_agent(model, state_dir=tmp_path)
    config = {"configurable": {"thread_id": "borderline"}}
    first = agent.invoke({"messages": [HumanMessage("hi")]}, config)["messages"][-1]
    base = first.response_metadata["ctxwarden"]["input_tokens"]
    meter, lines = TokenMeter(), []
    while meter.message_tokens(HumanMessage("\n".join(lines))) < int(window * (1 + MEASURE_SLACK / 2)) - base:
        lines.append(LOG.splitlines()[len(lines)])
    out = agent.invoke({"messages": [HumanMessage("\n".join(lines))]}, config)

    measured = out["messages"][-1].response_metadata["ctxwarden"]["input_tokens"]
    assert window < measured < window * (1 + MEASURE_SLACK)  # past the window, within the meter's slack
    assert out["messages"][-2].content == "\n".join(lines)
    trace = TraceStore(tmp_path / "trace.sqlite")
    assert [e.payload["stage"] for e in trace.events(kind="context_overflow")] == ["measured"]
    assert not any(e.payload["forced"] for e in trace.events(kind="context_clear"))  # sent as measured
    agent.checkpointer.conn.close()
