"""What ctxwarden assumes about deepagents' own eviction, checked against deepagents' public middleware.

deepagents leaves no public mark on a tool result its `FilesystemMiddleware` evicted, only
its wording; the report's plot and the demo count such results with `is_evicted`. These
tests evict through the public `wrap_tool_call` and fail when a new deepagents words it
otherwise, or when the installed release is not the one the wording was checked against.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from deepagents.backends import FilesystemBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxwarden.core.stamp import DEEPAGENTS_CHECKED, STOCK_EVICTION_PREFIX, is_evicted


def _evicted_by_deepagents(tmp_path: Path) -> ToolMessage:
    middleware = FilesystemMiddleware(
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), tool_token_limit_before_evict=50
    )
    call = {"name": "run_tests", "args": {}, "id": "call_probe", "type": "tool_call"}
    request = ToolCallRequest(tool_call=call, tool=None, state={"messages": []}, runtime=None)  # type: ignore[arg-type]
    result = ToolMessage("a line of output\n" * 500, tool_call_id="call_probe", name="run_tests")
    left = middleware.wrap_tool_call(request, lambda _request: result)
    assert isinstance(left, ToolMessage)
    assert left.content != result.content, "deepagents no longer evicts a large result through wrap_tool_call"
    return left


def test_deepagents_eviction_is_recognised(tmp_path: Path) -> None:
    left = _evicted_by_deepagents(tmp_path)
    assert isinstance(left.content, str)
    assert left.content.startswith(STOCK_EVICTION_PREFIX), left.content[:200]
    assert is_evicted(left)


def test_the_installed_deepagents_is_the_series_checked() -> None:
    installed = version("deepagents")
    assert installed.split(".")[:2] == DEEPAGENTS_CHECKED.split("."), (
        f"deepagents {installed} is installed; the eviction wording was checked against {DEEPAGENTS_CHECKED}.x. "
        "Fix: run test_deepagents_eviction_is_recognised, update STOCK_EVICTION_PREFIX if it fails, then "
        "DEEPAGENTS_CHECKED."
    )
