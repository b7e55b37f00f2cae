"""Outputs that are not plain UTF-8 text, or one enormous line, are stored so every pointer the model gets works."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxwarden import create_context_agent
from ctxwarden.clip.recall import lookup_result
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.replay import scripted_model
from ctxwarden.stack.build import context_middleware
from ctxwarden.stack.middleware import ContextWindowMiddleware

POINTER = re.compile(r'read_file\(file_path="([^"]+)"')


def _setup(tmp_path: Path) -> tuple[ContextWindowMiddleware, FilesystemBackend]:
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    core = context_middleware(policy=ContextPolicy(window=200_000), backend=backend, trace=False)[0]
    return cast(ContextWindowMiddleware, core), backend


def _arrive(core: ContextWindowMiddleware, message: ToolMessage) -> tuple[list[Any], ToolMessage]:
    ask = AIMessage("", id="ai-1", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}])
    call = {"name": "bash", "args": {}, "id": "c1", "type": "tool_call"}
    request = ToolCallRequest(tool_call=call, tool=None, state={"messages": [ask]}, runtime=cast(Any, None))  # type: ignore[arg-type]
    out = cast(ToolMessage, core.wrap_tool_call(request, lambda _r: message))
    return [ask, out], out


def _pointers_open(backend: FilesystemBackend, text: str) -> list[str]:
    """Every read_file pointer in `text`, each checked to open (a failing read raises)."""
    paths = POINTER.findall(text)
    for path in paths:
        result = backend.read(path)
        assert result.error is None, (path, result.error)
    return paths


def test_a_small_output_with_bytes_that_are_not_utf8_keeps_them_exactly_and_every_pointer_opens(
    tmp_path: Path,
) -> None:
    core, backend = _setup(tmp_path)
    original = b"build step 3: \xed\xff\xfe done\n".decode("utf-8", "surrogateescape")
    messages, out = _arrive(core, ToolMessage(original, tool_call_id="c1", name="bash", id="t1"))
    shown = str(out.content)
    assert "\\xed\\xff\\xfe done" in shown  # readable: each byte as \xNN
    shown.encode("utf-8")  # and storable: no lone surrogate left in the message
    _pointers_open(backend, shown)
    record = out.response_metadata[METADATA_KEY]
    assert (tmp_path / record["raw_path"].lstrip("/")).read_bytes() == b"build step 3: \xed\xff\xfe done\n"
    assert lookup_result(messages, "c1", backend) == (original, None)
    assert lookup_result(messages, "c1", backend, raw=True) == (original, None)


def test_a_large_output_with_bytes_that_are_not_utf8_is_evicted_to_a_file_read_file_opens(tmp_path: Path) -> None:
    core, backend = _setup(tmp_path)
    original = ("log line ok\n" * 20_000 + "bad \xff byte\n").encode("latin-1").decode("utf-8", "surrogateescape")
    messages, out = _arrive(core, ToolMessage(original, tool_call_id="c1", name="bash", id="t1"))
    assert out.response_metadata[METADATA_KEY]["evicted"]
    assert _pointers_open(backend, str(out.content))
    assert lookup_result(messages, "c1", backend, raw=True) == (original, None)


def test_a_tool_returning_bytes_keeps_the_bytes_not_their_repr(tmp_path: Path) -> None:
    payload = b"\x89PNG\r\n\x1a\n\x00\x00 header \xff\xd8 text part\n"

    @tool
    def blob() -> bytes:
        """Returns bytes."""
        return payload

    message = cast(ToolMessage, blob.invoke({"type": "tool_call", "id": "c1", "name": "blob", "args": {}}))
    assert message.content == repr(payload)  # what langchain hands the middleware
    core, backend = _setup(tmp_path)
    messages, out = _arrive(core, message)
    record = out.response_metadata[METADATA_KEY]
    assert (tmp_path / record["raw_path"].lstrip("/")).read_bytes() == payload
    assert "header \\xff\\xd8 text part" in str(out.content)
    assert not str(out.content).startswith("b'")
    assert lookup_result(messages, "c1", backend, raw=True) == (repr(payload), None)


def test_a_huge_single_line_output_gets_a_preview_of_its_ends(tmp_path: Path) -> None:
    core, backend = _setup(tmp_path)
    line = "START-" + "0123456789abcdef" * 1_250_000 + "-THE-END"
    messages, out = _arrive(core, ToolMessage(line, tool_call_id="c1", name="bash", id="t1"))
    shown = str(out.content)
    assert out.response_metadata[METADATA_KEY]["evicted"]
    assert shown.startswith("START-0123456789abcdef")
    assert "-THE-END\n" in shown
    assert "chars of this 20,000,014-char line omitted" in shown
    assert _pointers_open(backend, shown)
    assert lookup_result(messages, "c1", backend) == (line, None)


def test_binary_bytes_are_shown_as_python_writes_them_by_their_ends_and_never_rendered(tmp_path: Path) -> None:
    core, backend = _setup(tmp_path)
    noise = bytes(range(256)) * 8_000  # every byte, escapes and carriage returns among them: 2 MB
    payload = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + noise + b"\x00\x00IEND\xaeB`\x82"
    messages, out = _arrive(core, ToolMessage(repr(payload), tool_call_id="c1", name="bash", id="t1"))
    shown = str(out.content)
    assert shown.startswith("\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR")  # its head, as Python writes bytes
    assert "IEND\\xaeB`\\x82" in shown.split("\n")[-3]  # and its tail, on the line the note follows
    record = out.response_metadata[METADATA_KEY]
    assert record["evicted"] is True
    assert record["rendered"] is False  # bytes of a file are not a terminal's output
    assert (tmp_path / record["raw_path"].lstrip("/")).read_bytes() == payload
    assert lookup_result(messages, "c1", backend, raw=True) == (repr(payload), None)


def test_a_search_after_a_binary_output_reads_its_raw_bytes_without_failing(tmp_path: Path) -> None:
    @tool
    def dump(x: int) -> bytes:
        """Dump a binary file."""
        return b"\x89binary \xff\xfe needle " * 2_000

    replies = [
        AIMessage("", tool_calls=[{"name": "dump", "args": {"x": 1}, "id": "d1"}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "needle"}, "id": "s1"}]),
        AIMessage("done"),
    ]
    agent = create_context_agent(scripted_model(replies, window=32_000), [dump], state_dir=tmp_path)
    out = agent.invoke(
        {"messages": [("user", "go")]}, {"configurable": {"thread_id": "t"}}
    )  # UnicodeDecodeError before
    found = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "s1")
    assert "needle" in found.content
    assert "line 1 [evicted]" in found.content
