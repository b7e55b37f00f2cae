"""Nothing lost, property-based: random conversations through the whole stack, every byte recoverable exactly.

Hypothesis draws conversations — user text, parallel tool calls, content blocks, empty,
tiny, medium and huge results, several turns on windows that force clearing and folds,
and model switches between turns — and runs them through a real deep agent on a SQLite
checkpointer and a filesystem backend. After every run:

- the checkpoint holds every message as it was sent, except results evicted at arrival,
  whose placeholder names a file holding the exact original;
- the last model call's view holds every original tool output verbatim, or shows a way
  back (a recall id, an evicted file, the history file of a fold) that returns it exactly;
- every user and assistant message is in that view verbatim, or in a history file the
  view names.
"""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, TraceStore, create_context_agent, open_checkpointer
from ctxwarden.clip.recall import original_text
from ctxwarden.clip.recoverability import HISTORY_REFERENCE, check_outputs
from ctxwarden.clip.render import from_exact
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import decode, text_of
from ctxwarden.fold import is_summary
from ctxwarden.replay import ScriptedChatModel
from views import Views

EXAMPLES = 30
WINDOWS = (6_000, 12_000, 200_000)
OUTPUTS: dict[str, Any] = {}
"""What the `emit` tool returns, by call id (filled per example)."""


@tool
def emit(key: str) -> Any:
    """Return the output prepared for `key`."""
    return OUTPUTS[key]


def _lines(snippet: str, n: int) -> str:
    return "\n".join(f"{i}: {snippet}" for i in range(n))


_snippet = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)
_output = st.one_of(
    st.just(""),
    _snippet,
    st.builds(_lines, _snippet, st.integers(40, 300)),
    st.builds(_lines, _snippet, st.integers(1_500, 3_000)),
)
_result = st.tuples(_output, st.booleans())  # (text, returned as content blocks)
_turn = st.fixed_dictionaries(
    {
        "user": _snippet,
        "steps": st.lists(st.lists(_result, min_size=1, max_size=3), min_size=1, max_size=4),
        "thought": _snippet,
        "final": _snippet,
        "window": st.sampled_from(WINDOWS),
    }
)
conversations = st.lists(_turn, min_size=2, max_size=6)


def _script(conversation: list[dict]) -> tuple[list[list[AIMessage]], dict[str, str]]:
    """Per turn, the model's replies; and every call's original output text (as the tool message carries it)."""
    counter = itertools.count()
    replies: list[list[AIMessage]] = []
    originals: dict[str, str] = {}
    OUTPUTS.clear()
    for turn in conversation:
        turn_replies = []
        for step in turn["steps"]:
            calls = []
            for text, as_blocks in step:
                call_id = f"call-{next(counter)}"
                if as_blocks and text:
                    half = len(text) // 2
                    OUTPUTS[call_id] = [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]
                    originals[call_id] = f"{text[:half]}\n{text[half:]}"
                else:
                    OUTPUTS[call_id] = text
                    originals[call_id] = text
                calls.append({"name": "emit", "args": {"key": call_id}, "id": call_id})
            turn_replies.append(AIMessage(turn["thought"], tool_calls=calls))
        turn_replies.append(AIMessage(turn["final"]))
        replies.append(turn_replies)
    return replies, originals


def _agents(state_dir: Path, replies: Iterator[AIMessage], views: Views) -> dict[int, Any]:
    """One agent per window on one checkpointer: switching agents between turns switches the model mid-thread."""
    checkpointer = open_checkpointer(state_dir / "checkpoints.sqlite")
    agents = {}
    for window in WINDOWS:
        model = ScriptedChatModel(
            messages=replies, profile=ModelProfile(max_input_tokens=window), name=f"model-{window}"
        )
        agents[window] = create_context_agent(
            model,
            [emit],
            state_dir=state_dir,
            checkpointer=checkpointer,
            summarizer=DETERMINISTIC,
            middleware=[views],
        )
    return agents


def _histories(view: list[BaseMessage], backend: FilesystemBackend) -> str:
    paths = sorted({m.group(1) for message in view for m in HISTORY_REFERENCE.finditer(str(message.content))})
    return "\n".join(decode(r.content) for r in backend.download_files(paths) if r.content is not None)


def _assert_checkpoint_keeps_everything(thread: list[BaseMessage], originals: dict[str, str], backend: Any) -> None:
    results = {m.tool_call_id: m for m in thread if isinstance(m, ToolMessage)}
    assert set(results) == set(originals)
    for call_id, original in originals.items():
        message = results[call_id]
        record = message.response_metadata.get(METADATA_KEY) or {}
        if record.get("raw_path"):  # rendered or made readable at arrival: the exact original is the raw file
            assert record["raw_path"] in text_of(message) or record.get("evicted"), call_id
            (raw,) = backend.download_files([record["raw_path"]])
            assert raw.content is not None, call_id
            assert from_exact(raw.content, record["raw_encoding"]) == original, call_id
        elif record.get("evicted"):
            assert record["path"] in text_of(message)
            (stored,) = backend.download_files([record["path"]])
            assert stored.content is not None, call_id
            assert decode(stored.content) == original, call_id
        else:
            assert text_of(message) == original, call_id


def _assert_view_reaches_everything(
    view: list[BaseMessage], thread: list[BaseMessage], originals: dict[str, str], backend: Any
) -> None:
    recoverable = check_outputs(view, thread, originals, backend)
    assert recoverable.lost == (), recoverable.lost
    shown = {m.id: m for m in view}
    histories = _histories(view, backend)
    for message in thread:
        if isinstance(message, HumanMessage | AIMessage) and not is_summary(message):
            text = message.content if isinstance(message.content, str) else text_of(message)  # type: ignore[arg-type]
            visible = message.id in shown and shown[message.id].content == message.content
            assert visible or str(text) in histories or _text_recalled(message, shown, thread), (message.type, text)


def _text_recalled(message: BaseMessage, shown: dict[str | None, BaseMessage], thread: list[BaseMessage]) -> bool:
    """A call whose results all left the view shows its calls without its text: `recall(part="text")` returns it."""
    copy = shown.get(message.id)
    if not isinstance(message, AIMessage) or not isinstance(copy, AIMessage) or not copy.tool_calls:
        return False
    assert copy.tool_calls == message.tool_calls
    return all(original_text(thread, str(call["id"])) == text_of(message) for call in copy.tool_calls)


def _run(conversation: list[dict]) -> Counter[str]:
    """One drawn conversation through the stack, checked; returns what the stack did (trace event kinds)."""
    replies, originals = _script(conversation)
    views = Views()
    with tempfile.TemporaryDirectory() as tmp:
        state_dir = Path(tmp)
        agents = _agents(state_dir, iter(itertools.chain.from_iterable(replies)), views)
        config = {"configurable": {"thread_id": "prop"}}
        for turn in conversation:
            agents[turn["window"]].invoke({"messages": [HumanMessage(turn["user"])]}, config)
        agent = agents[conversation[-1]["window"]]
        thread = list(agent.get_state(config).values["messages"])
        backend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)
        _assert_checkpoint_keeps_everything(thread, originals, backend)
        last_reply = max(i for i, m in enumerate(thread) if isinstance(m, AIMessage))
        _assert_view_reaches_everything(views.views[-1], thread[:last_reply], originals, backend)
        trace = TraceStore(state_dir / "trace.sqlite")
        assert trace.verify() == []
        done = Counter(e.kind for e in trace.events() if e.payload.get("ok", True))
        done["tool_outputs"] = len(originals)
        done["conversations"] = 1
        agent.checkpointer.conn.close()
        return done


def test_every_message_and_output_stays_recoverable_exactly() -> None:
    seen: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(conversations)
    def every_drawn_conversation(conversation: list[dict]) -> None:
        seen.update(_run(conversation))

    every_drawn_conversation()
    print(f"\nnothing lost: {dict(sorted(seen.items()))}")
    # the drawn conversations did exercise every layer the property is about
    for kind in ("eviction", "context_clear", "context_compaction", "model_switch"):
        assert seen[kind] > 0, kind
