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
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.stack.build import context_middleware
from ctxwarden.stack.middleware import ContextWindowMiddleware

SIZE = 4 << 20


def _core(folder: Path) -> ContextWindowMiddleware:
    backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
    return cast(ContextWindowMiddleware, context_middleware(policy=ContextPolicy(window=200_000), backend=backend)[0])


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
