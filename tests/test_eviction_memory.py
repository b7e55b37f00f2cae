"""Evicting a huge tool output needs a small multiple of its size, and nothing keeps the original afterwards."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from pathlib import Path
from typing import Any, cast

from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxwarden.bench.footprint import log_output
from ctxwarden.core.counters import EXACT_UP_TO_CHARS, default_counter
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import COUNT_KEY, METADATA_KEY
from ctxwarden.stack.build import context_middleware
from ctxwarden.stack.middleware import ContextWindowMiddleware

SIZE = 4 << 20


def _core(folder: Path, meter: TokenMeter | None = None, **policy: Any) -> ContextWindowMiddleware:
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    built = context_middleware(policy=ContextPolicy(**{"window": 200_000, **policy}), backend=backend, meter=meter)
    return cast(ContextWindowMiddleware, built[0])


class _Tokenized:
    """The default counter, noting the length of every text it tokenizes."""

    def __init__(self) -> None:
        self.inner = default_counter()
        self.name = self.key = self.inner.name
        self.lengths: list[int] = []

    def __call__(self, text: str) -> int:
        self.lengths.append(len(text))
        return self.inner(text)


def _request(call_id: str) -> ToolCallRequest:
    call = {"name": "bash", "args": {"command": "make test"}, "id": call_id, "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None, state={"messages": []}, runtime=cast(Any, None))  # type: ignore[arg-type]


def test_a_huge_output_is_evicted_within_four_times_its_size_beyond_itself(tmp_path: Path) -> None:
    core = _core(tmp_path)
    output = ToolMessage(log_output(SIZE), tool_call_id="big", name="bash", id="t-big")
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        kept = core.wrap_tool_call(_request("big"), lambda _request: output)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert isinstance(kept, ToolMessage)
    assert len(str(kept.content)) < 10_000
    assert peak < 4 * SIZE, f"evicting took {peak / SIZE:.1f}x the output's size on top of it"
    path = kept.response_metadata[METADATA_KEY]["path"]
    assert (tmp_path / path.lstrip("/")).read_bytes() == str(output.content).encode("utf-8")


def test_nothing_keeps_an_evicted_original_alive(tmp_path: Path) -> None:
    core = _core(tmp_path)
    originals = []
    for n in range(5):
        output = ToolMessage(log_output(500_000, seed=n), tool_call_id=f"c{n}", name="bash", id=f"t{n}")
        originals.append(weakref.ref(output))
        kept = core.wrap_tool_call(_request(f"c{n}"), lambda _request, out=output: out)
        assert kept is not output
        del output, kept
    gc.collect()
    assert [ref() for ref in originals] == [None] * 5


def test_a_huge_outputs_count_is_estimated_from_samples_and_what_stays_in_view_counted_exactly(
    tmp_path: Path,
) -> None:
    counter = _Tokenized()
    core = _core(tmp_path, TokenMeter(counter))
    text = log_output(SIZE)
    kept = core.wrap_tool_call(_request("big"), lambda _request: ToolMessage(text, tool_call_id="big", name="bash"))
    assert isinstance(kept, ToolMessage)
    tokenized = sum(counter.lengths)
    assert tokenized < SIZE // 4, f"{tokenized:,} characters tokenized for a {SIZE:,}-character output"
    assert max(counter.lengths) <= EXACT_UP_TO_CHARS
    record = kept.response_metadata[METADATA_KEY]
    exact = counter.inner(text)
    assert record["tokens_estimated"] is True
    assert abs(record["tokens"] - exact) < exact * 0.05
    assert f"evicted bash output of about {record['tokens']:,} tokens" in str(kept.content)
    # the preview that stays in view is counted whole, and carries that count into the thread
    recount = TokenMeter(lambda part: counter.inner(part))  # no name: reads no carried count
    assert kept.response_metadata[COUNT_KEY]["tokens"] == recount.message_tokens(kept)


def test_an_estimate_too_close_to_the_threshold_to_decide_is_replaced_by_the_exact_count(tmp_path: Path) -> None:
    counter = _Tokenized()
    text = log_output(EXACT_UP_TO_CHARS * 3 // 2)
    exact = TokenMeter(counter.inner).message_tokens(ToolMessage(text, tool_call_id="big", name="bash"))
    core = _core(tmp_path, TokenMeter(counter), window=100 * exact, evict_max_tokens=exact - 1)
    kept = core.wrap_tool_call(_request("big"), lambda _request: ToolMessage(text, tool_call_id="big", name="bash"))
    assert isinstance(kept, ToolMessage)
    record = kept.response_metadata[METADATA_KEY]
    assert record["evicted"] is True
    assert record["tokens"] == exact
    assert "tokens_estimated" not in record
    assert f"evicted bash output of {exact:,} tokens" in str(kept.content)


def test_millions_of_short_lines_are_evicted_within_twice_their_size_beyond_themselves(tmp_path: Path) -> None:
    core = _core(tmp_path)
    text = "".join(f"{i}\n" for i in range(SIZE // 7))  # about 600,000 lines of six or seven characters
    output = ToolMessage(text, tool_call_id="big", name="bash", id="t-big")
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        kept = core.wrap_tool_call(_request("big"), lambda _request: output)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert isinstance(kept, ToolMessage)
    assert f"{text.count(chr(10)):,} lines" in str(kept.content)
    assert peak < 2 * len(text), f"evicting took {peak / len(text):.1f}x the output's size on top of it"


def test_a_huge_text_block_is_estimated_and_a_short_message_counted_exactly_with_its_caches() -> None:
    counter = _Tokenized()
    meter = TokenMeter(counter)
    big = log_output(SIZE)
    blocks = ToolMessage([{"type": "text", "text": big}, {"type": "text", "text": "tail"}], tool_call_id="b")
    tokens, exact = meter.estimate_tokens(blocks)
    assert exact is False
    assert max(counter.lengths) <= EXACT_UP_TO_CHARS
    assert abs(tokens - TokenMeter(counter.inner).message_tokens(blocks)) < tokens * 0.05
    short = ToolMessage("3 passed in 0.1s", tool_call_id="s")
    assert meter.estimate_tokens(short) == (meter.message_tokens(short), True)
    counted = len(counter.lengths)
    assert meter.message_tokens(ToolMessage("3 passed in 0.1s", tool_call_id="s")) == meter.message_tokens(short)
    assert len(counter.lengths) == counted  # the content cache knew it: counted once, as message_tokens would
