"""Eviction at arrival: the threshold follows the window, the file holds the exact original, nothing is lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import ContextPolicy, ThreadIsolatedBackend, create_context_agent
from ctxwarden.clip import make_recall_tool, result_path
from ctxwarden.clip.names import call_key
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import text_of
from ctxwarden.replay import scripted_model
from ctxwarden.trace import TraceStore

CONFIG = {"configurable": {"thread_id": "evict"}}
LOG = "\n".join(
    [f"INFO step {i}: compiled module_{i}" for i in range(600)]
    + ["Traceback (most recent call last):", '  File "app.py", line 3, in main', "ValueError: boom"]
    + [f"INFO step {i}: cleanup" for i in range(600)]
)


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG if target != "odd" else LOG + "\nundecodable byte: \udcff end"


@tool
def blocks(target: str) -> list:
    """Return the log as content blocks."""
    return [{"type": "text", "text": LOG}, {"type": "text", "text": "second block"}]


def _calls(*calls: tuple[str, dict, str], id: str | None = None) -> AIMessage:
    return AIMessage("", id=id, tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


def _file(state_dir: Path, thread: str, call_id: str, message_id: str, index: int = 0) -> Path:
    """Where the result of a call is evicted: keyed by the call id and the call itself."""
    return state_dir / result_path(thread, "", call_id, call_key(message_id, index)).lstrip("/")


def _run(state_dir: Path, replies: list, window: int, tools: list | None = None, **kwargs: Any) -> list:
    agent = create_context_agent(
        scripted_model(replies, window=window), tools or [build], state_dir=state_dir, **kwargs
    )
    out = agent.invoke({"messages": [("user", "build it")]}, CONFIG)
    agent.checkpointer.conn.close()
    return out["messages"]


def _results(messages: list) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def test_a_result_over_ten_percent_of_a_small_window_goes_to_a_file(state_dir: Path) -> None:
    messages = _run(state_dir, [_calls(("build", {"target": "all"}, "c1"), id="m1"), AIMessage("done")], window=32_000)
    result = _results(messages)["c1"]
    record = result.response_metadata[METADATA_KEY]
    key = call_key("m1", 0)
    assert record["evicted"] is True
    assert record["path"] == f"/large_tool_results/evict/c1-{key}"
    assert _file(state_dir, "evict", "c1", "m1").read_text(encoding="utf-8") == LOG
    text = result.content
    assert text.startswith("INFO step 0: compiled module_0")  # the head
    assert "INFO step 599: cleanup" in text  # the tail
    assert "ValueError: boom" in text  # the signal in the middle
    assert text.rstrip().endswith(f'recall(call_id="c1#{key}").]')  # the way back, last
    assert f'read_file(file_path="/large_tool_results/evict/c1-{key}", offset=0, limit=200)' in text
    assert len(text) < len(LOG) / 3


def test_the_same_result_stays_whole_on_a_large_window(state_dir: Path) -> None:
    messages = _run(state_dir, [_calls(("build", {"target": "all"}, "c1")), AIMessage("done")], window=1_000_000)
    result = _results(messages)["c1"]
    assert result.content == LOG
    assert METADATA_KEY not in result.response_metadata


def test_eviction_is_traced_with_its_tokens(state_dir: Path) -> None:
    _run(state_dir, [_calls(("build", {"target": "all"}, "c1")), AIMessage("done")], window=32_000)
    (event,) = TraceStore(state_dir / "trace.sqlite").events(kind="eviction")
    assert event.payload["ok"] is True
    assert event.payload["threshold"] == 3_200
    assert event.payload["tokens"] > 3_200 > event.payload["preview_tokens"]


def test_parallel_calls_undecodable_text_and_content_blocks_are_kept_exactly(state_dir: Path) -> None:
    replies = [
        _calls(
            ("build", {"target": "all"}, "p1"), ("build", {"target": "odd"}, "p2"), ("blocks", {"target": "x"}, "p3")
        ),
        AIMessage("done"),
    ]
    messages = _run(state_dir, replies, window=32_000, tools=[build, blocks])
    results = _results(messages)
    backend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)
    recall = make_recall_tool(backend)
    state = {"messages": messages}
    expected = {"p1": LOG, "p2": LOG + "\nundecodable byte: \udcff end", "p3": LOG + "\nsecond block"}
    for call_id, original in expected.items():
        assert results[call_id].response_metadata[METADATA_KEY]["evicted"], call_id
        text, number = "", 0
        while True:  # page through recall until the end
            number += 1
            page = recall.invoke({"call_id": call_id, "state": state, "page": number, "limit": 10_000})
            body, sep, note = page.rpartition("\n[ctxwarden: characters ")
            text += body if sep else page
            if not sep or "for the rest" not in note:
                break
        assert text == original, call_id
    paths = {results[c].response_metadata[METADATA_KEY]["path"] for c in expected}
    assert len(paths) == 3


def test_built_in_read_file_is_evicted_on_a_small_window(state_dir: Path) -> None:
    big = "\n".join(f"line {i}: " + "data " * 20 for i in range(150))
    (state_dir / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (state_dir / "notes.txt").write_text(big, encoding="utf-8")
    replies = [_calls(("read_file", {"file_path": "/notes.txt", "limit": 150}, "r1")), AIMessage("read")]
    messages = _run(state_dir, replies, window=8_000)
    result = _results(messages)["r1"]
    assert result.response_metadata[METADATA_KEY]["evicted"] is True
    assert len(text_of(result)) < 2_500


class BrokenBackend(FilesystemBackend):
    def upload_files(self, files: list[tuple[str, bytes]]) -> list:
        raise OSError(28, "No space left on device")


def test_a_failed_write_keeps_the_original_and_the_run_goes_on(state_dir: Path) -> None:
    backend = ThreadIsolatedBackend(BrokenBackend(root_dir=state_dir, virtual_mode=True))
    messages = _run(
        state_dir, [_calls(("build", {"target": "all"}, "c1")), AIMessage("done")], window=32_000, backend=backend
    )
    assert _results(messages)["c1"].content == LOG
    assert messages[-1].content == "done"
    (event,) = TraceStore(state_dir / "trace.sqlite").events(kind="eviction")
    assert event.payload["ok"] is False
    assert "No space left on device" in event.payload["error"]


async def test_async_runs_evict_too(state_dir: Path) -> None:
    agent = create_context_agent(
        scripted_model([_calls(("build", {"target": "all"}, "a1"), id="m1"), AIMessage("done")], window=32_000),
        [build],
        state_dir=state_dir,
    )
    out = await agent.ainvoke({"messages": [("user", "go")]}, CONFIG)
    agent.checkpointer.conn.close()
    assert _results(out["messages"])["a1"].response_metadata[METADATA_KEY]["evicted"] is True
    assert _file(state_dir, "evict", "a1", "m1").read_text(encoding="utf-8") == LOG


def test_threads_never_share_a_file(state_dir: Path) -> None:
    for thread in ("one", "two"):
        agent = create_context_agent(
            scripted_model([_calls(("build", {"target": "all"}, "same-id"), id="m1"), AIMessage("ok")], window=32_000),
            [build],
            state_dir=state_dir,
        )
        agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": thread}})
        agent.checkpointer.conn.close()
    assert _file(state_dir, "one", "same-id", "m1").is_file()
    assert _file(state_dir, "two", "same-id", "m1").is_file()


@pytest.mark.parametrize("window", [8_000, 32_000, 1_000_000])
def test_threshold_is_the_smaller_of_20k_and_ten_percent(window: int) -> None:
    assert ContextPolicy().evict_threshold(window) == min(20_000, window // 10)


def test_a_tiny_page_size_on_a_huge_output_is_raised_so_pages_stay_bounded() -> None:
    """`recall(limit=1)` of a 2,000,000-character output made 2,000,000 pages, every one held at once; the page size
    is raised to `len / MAX_PAGES` (100,000 pages), and the pages still follow one another exactly."""
    from ctxwarden.clip.recall import page

    text = "".join(f"{i:07d}" for i in range(300_000))[:2_000_000]  # one line, longer than any page
    past = page(text, 10**9, 1)
    assert past.startswith(f"[ctxwarden: page {10**9} is empty: 2,000,000 characters make ")
    assert int(past.rsplit("make ", 1)[1].split()[0]) == 100_000
    first, second = page(text, 1, 1), page(text, 2, 1)
    assert first.startswith(text[:20] + "\n[ctxwarden: characters 0-20 of 2,000,000")
    assert second.startswith(text[20:40] + "\n[ctxwarden: characters 20-40 of 2,000,000")
    small = "line one\nline two\n"
    assert page(small, 1, 1).startswith("l\n[ctxwarden: characters 0-1 of 18")  # a small text keeps its tiny pages
