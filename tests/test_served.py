"""The served path, end to end: the example agent behind `langgraph dev`, driven with langgraph-sdk.

Two threads run on one server (the in-memory dev server the LangGraph CLI starts, a real
HTTP API on 127.0.0.1), streamed with the `messages`, `updates` and `custom` modes, one of
them twice more on the same thread. Their build logs are evicted, old results cleared and
older turns folded. What a served deployment must keep: each thread's offloaded files and
trace events are its own, nothing is lost (the agent's `recall` brings back an evicted log
whole), and no fold summary reaches the `messages` stream a chat UI shows.

The server is started once for this module (`served_server.served`).
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from rich.console import Console

from ctxwarden import acompact, acontext_report, compact, context_report
from ctxwarden.cli import main
from ctxwarden.errors import CtxwardenError, UnknownThreadError
from ctxwarden.trace import TraceStore
from served_server import EXAMPLE, ServedAgent, running_server


def _example() -> Any:
    """The example's agent module (importing it builds the graph and writes nothing)."""
    spec = importlib.util.spec_from_file_location("served_example_agent", EXAMPLE / "agent.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_log = _example().build_log  # the example tool's own output, to compare with what comes back

STREAM_MODES = ["messages", "updates", "custom"]
SUMMARY_MARKS = ("folded into this summary", "## Session intent", "## Facts (quoted from the folded turns)")


@dataclass
class Thread:
    """What the tests saw of one served thread: its id and every streamed part of its runs, by run."""

    id: str
    runs: list[list[Any]] = field(default_factory=list)

    def parts(self, event: str) -> list[Any]:
        return [part.data for run in self.runs for part in run if part.event.startswith(event)]


def _run(client: Any, thread: Thread, request: str) -> None:
    stream = client.runs.stream(
        thread.id, "agent", input={"messages": [{"role": "user", "content": request}]}, stream_mode=STREAM_MODES
    )
    parts = list(stream)
    errors = [part.data for part in parts if part.event == "error"]
    assert not errors, errors
    thread.runs.append(parts)


@pytest.fixture(scope="module")
def served() -> Iterator[ServedAgent]:
    """One server for the whole module."""
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def client(served: ServedAgent) -> Iterator[Any]:
    """A langgraph-sdk client of the module's server."""
    with get_sync_client(url=served.url) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def threads(client: Any) -> dict[str, Thread]:
    """Two threads: `app` (three runs: 12 build steps, 12 more, a recall) and `lib` (6 steps, a recall)."""
    app = Thread(client.threads.create()["thread_id"])
    lib = Thread(client.threads.create()["thread_id"])
    _run(client, app, "build app in 12 steps")
    _run(client, lib, "build lib in 6 steps")
    _run(client, app, "build docs in 12 steps")  # a second run on the same thread: it grows to a second fold
    _run(client, app, "recall build-app-1-of-12")
    _run(client, lib, "recall build-lib-3-of-6")
    return {"app": app, "lib": lib}


def _state(client: Any, thread: Thread) -> dict[str, Any]:
    return dict(client.threads.get_state(thread.id)["values"])


def _events(served: ServedAgent, thread: Thread, kind: str | None = None) -> list[Any]:
    store = TraceStore(served.trace)
    try:
        return list(store.events(thread_id=thread.id, kind=kind))
    finally:
        store.close()


def test_every_run_finishes_and_the_second_run_continues_the_thread(client: Any, threads: dict[str, Thread]) -> None:
    values = _state(client, threads["app"])
    said = [m["content"] for m in values["messages"] if m["type"] == "ai" and not m.get("tool_calls")]
    assert said == ["Built app: all 12 steps passed.", "Built docs: all 12 steps passed.", said[-1]]
    assert said[-1].startswith("Recalled build-app-1-of-12: ")
    humans = [m["content"] for m in values["messages"] if m["type"] == "human"]
    assert humans == ["build app in 12 steps", "build docs in 12 steps", "recall build-app-1-of-12"]


def test_the_three_stream_modes_carry_tokens_steps_and_lifecycle_events(threads: dict[str, Thread]) -> None:
    app = threads["app"]
    for run in app.runs:
        assert {"messages/partial", "updates", "custom"} <= {part.event for part in run}
    steps = Counter(name for update in app.parts("updates") for name in update)
    assert steps["model"] >= 12
    assert steps["tools"] >= 12
    custom = Counter(event["ctxwarden"] for event in app.parts("custom"))
    assert custom["clear"] >= 1  # the run cleared and folded, and said so
    assert custom["fold_end"] >= 1


def test_each_thread_keeps_its_own_offloaded_files(served: ServedAgent, threads: dict[str, Thread]) -> None:
    evicted = served.files / "large_tool_results"
    assert sorted(p.name for p in evicted.iterdir()) == sorted(t.id for t in threads.values())
    targets = {"app": ("build-app-", "build-docs-"), "lib": ("build-lib-",)}
    for name, thread in threads.items():
        files = sorted(p.name for p in (evicted / thread.id).iterdir())
        assert files
        assert all(f.startswith(targets[name]) for f in files)  # this thread's calls only
        events = _events(served, thread, "eviction")
        assert len(events) == len(files)  # one file per eviction event, all under this thread
        history = served.files / "conversation_history" / f"{thread.id}.md"
        folds = [e for e in _events(served, thread, "context_compaction") if e.payload.get("ok")]
        assert history.is_file() == bool(folds)


def test_trace_events_are_per_thread(client: Any, served: ServedAgent, threads: dict[str, Thread]) -> None:
    store = TraceStore(served.trace)
    try:
        assert set(store.threads()) == {t.id for t in threads.values()}
        for thread in threads.values():
            events = list(store.events(thread_id=thread.id))
            assert {e.thread_id for e in events} == {thread.id}
            calls = [e for e in events if e.kind == "model_usage"]
            values = _state(client, thread)
            replies = [m for m in values["messages"] if m["type"] == "ai"]
            assert len(calls) == len(replies)  # every model call of this thread, and none of the other's
    finally:
        store.close()


def test_the_app_thread_evicted_cleared_and_folded(served: ServedAgent, threads: dict[str, Thread]) -> None:
    kinds = Counter(e.kind for e in _events(served, threads["app"]))
    assert kinds["eviction"] >= 6
    assert kinds["context_clear"] >= 1
    assert len([e for e in _events(served, threads["app"], "context_compaction") if e.payload.get("ok")]) >= 2


@pytest.mark.parametrize(("thread", "target", "step"), [("app", "app", 1), ("lib", "lib", 3)])
def test_recall_of_an_evicted_log_returns_the_whole_original(
    client: Any, threads: dict[str, Thread], thread: str, target: str, step: int
) -> None:
    values = _state(client, threads[thread])
    call = f"build-{target}-{step}-of-{12 if target == 'app' else 6}"
    stored = next(m for m in values["messages"] if m["type"] == "tool" and m["tool_call_id"] == call)
    assert "evicted" in stored["content"]  # the thread keeps a preview
    assert len(stored["content"]) < len(build_log(target, step))
    pages = [
        m["content"]
        for m in values["messages"]
        if m["type"] == "tool" and m["tool_call_id"].startswith(f"recall-{call}")
    ]
    assert len(pages) > 1  # a page of 50,000 characters does not fit a 6,000-token window beside the tools
    joined = "".join(page.rpartition("\n[ctxwarden: characters ")[0] for page in pages)
    assert joined == build_log(target, step)  # byte for byte, the whole log, page after page


def test_fold_summaries_never_reach_the_messages_stream(client: Any, threads: dict[str, Thread]) -> None:
    app = threads["app"]
    folds = _state(client, app)["ctxwarden_fold"]["records"]
    assert len(folds) >= 2
    streamed = [m for chunk in app.parts("messages/") if isinstance(chunk, list) for m in chunk]
    assert streamed, "the messages stream carried nothing"
    text = json.dumps(streamed)
    for mark in SUMMARY_MARKS:
        assert mark not in text
    for record in folds:
        assert record["summary"][:200] not in text
    assert all((m.get("additional_kwargs") or {}).get("lc_source") is None for m in streamed)


def test_the_recipe_shows_the_tested_example() -> None:
    recipe = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text(encoding="utf-8")
    served_part = recipe[recipe.index("## Serving the agent on a LangGraph server") :]
    assert "examples/server/" in served_part
    shown = json.loads(re.findall(r"```json\n(.+?)\n```", served_part, flags=re.S)[0])
    assert shown == json.loads((EXAMPLE / "langgraph.json").read_text(encoding="utf-8"))


# /context and /compact for a served thread: the state over the server's API, the trace where the deployment keeps it.


def _config(thread: Thread | str) -> Any:
    return {"configurable": {"thread_id": thread.id if isinstance(thread, Thread) else thread}}


@pytest.fixture(scope="module")
def remote(served: ServedAgent) -> Iterator[RemoteGraph]:
    """The served graph as a `RemoteGraph` (its sync client closed after the module; the async one is never used)."""
    with get_sync_client(url=served.url) as sdk:
        yield RemoteGraph("agent", sync_client=sdk)


@pytest.mark.parametrize("kind", ["client", "remote graph"])
def test_context_report_of_a_served_thread(
    client: Any, remote: RemoteGraph, served: ServedAgent, threads: dict[str, Thread], kind: str
) -> None:
    app = threads["app"]
    report = context_report(client if kind == "client" else remote, _config(app), trace=served.trace)
    assert report.thread_id == app.id
    assert (report.window, report.window_source) == (6_000, "profile")
    calls = _events(served, app, "model_usage")
    assert report.calls == len(calls)
    assert report.spend["main"]["calls"] == len(calls)
    kinds = Counter(e.kind for e in _events(served, app))
    assert report.lifecycle["eviction"]["count"] == kinds["eviction"]
    assert report.lifecycle["context_compaction"]["count"] == kinds["context_compaction"]
    assert report.categories["summary"] > 0  # counted on the folded view the server's thread keeps
    assert report.trace_found


def test_the_report_of_a_served_thread_reads_the_same_through_either_source(
    client: Any, remote: RemoteGraph, served: ServedAgent, threads: dict[str, Thread]
) -> None:
    config = _config(threads["lib"])
    assert context_report(client, config, trace=served.trace).to_dict() == (
        context_report(remote, config, trace=served.trace).to_dict()
    )


def test_text_rich_and_html_forms_of_a_served_report(
    client: Any, served: ServedAgent, threads: dict[str, Thread]
) -> None:
    app = threads["app"]
    report = context_report(client, _config(app), trace=served.trace)
    text = report.to_text()
    assert text.startswith(f"Context · thread {app.id} · model BuildModel · window 6,000 tokens (profile)")
    assert "lifecycle: " in text
    console = Console(record=True, width=120)
    console.print(report)
    shown = console.export_text()
    assert app.id in shown
    assert "tool schemas" in shown
    page = report._repr_html_()
    assert app.id in page
    assert "tool schemas" in page


async def test_async_report_through_the_async_client(
    client: Any, served: ServedAgent, threads: dict[str, Thread]
) -> None:
    config = _config(threads["lib"])
    async with get_client(url=served.url) as aclient:
        report = await acontext_report(aclient, config, trace=served.trace)
    assert report.to_dict() == context_report(client, config, trace=served.trace).to_dict()


def test_without_a_trace_the_report_says_so(client: Any, threads: dict[str, Thread]) -> None:
    report = context_report(client, _config(threads["lib"]))
    assert not report.trace_found
    assert report.to_dict()["lifecycle"] is None


def test_an_unknown_served_thread_is_named(client: Any) -> None:
    with pytest.raises(UnknownThreadError, match=r"not on the server at http://127\.0\.0\.1"):
        context_report(client, _config("00000000-0000-0000-0000-000000000000"))


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["context", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_ctxwarden_context_reads_a_served_thread(
    served: ServedAgent, threads: dict[str, Thread], capsys: pytest.CaptureFixture[str]
) -> None:
    app = threads["app"]
    code, out, err = _cli(capsys, "--url", served.url, "--thread", app.id, "--state-dir", str(served.files))
    assert code == 0, err
    assert out.startswith(f"Context · thread {app.id} · model BuildModel")
    assert "lifecycle: " in out  # the trace was found in the state dir the server writes to
    code, out, err = _cli(capsys, "--url", served.url, "--thread", app.id, "--trace", str(served.trace), "--json")
    figures = json.loads(out)
    assert figures["thread_id"] == app.id
    assert figures["lifecycle"]["eviction"]["count"] == len(_events(served, app, "eviction"))
    code, out, err = _cli(capsys, "--url", served.url, "--thread", "no-such-thread")
    assert code == 2
    assert "'no-such-thread' is not on the server" in err


def test_compact_folds_a_served_thread_through_the_server(
    client: Any, remote: RemoteGraph, served: ServedAgent
) -> None:
    thread = Thread(client.threads.create()["thread_id"])
    _run(client, thread, "build tool in 4 steps")
    before = _state(client, thread)
    backend = FilesystemBackend(root_dir=served.files, virtual_mode=True)  # the operator's view of the files
    with pytest.raises(CtxwardenError, match="backend="):
        compact(remote, _config(thread), trace=served.trace)
    record = compact(remote, _config(thread), "keep the build steps", backend=backend, trace=served.trace)
    assert record is not None
    after = _state(client, thread)
    assert len(after["messages"]) == len(before["messages"])  # nothing deleted: the fold is a view
    folds = (after.get("ctxwarden_fold") or {}).get("records") or []
    assert [f["number"] for f in folds][-1] == record.number
    assert (after["ctxwarden_fold"] or {}).get("compacted_after")  # marked as done after the last call
    traced = [e for e in _events(served, thread, "context_compaction") if e.payload.get("ok")]
    assert len(traced) == len(folds)  # traced like any fold, under this thread
    history = served.files / "conversation_history" / f"{thread.id}.md"
    assert "[tool step 4] compiled tool/module_15.py" in history.read_text(encoding="utf-8")  # the folded turns
    assert folds[-1]["pinned"] == before["messages"][0]["id"]  # the user's request stays in view, above the summary
    assert context_report(client, _config(thread), trace=served.trace).basis == "current view"
    _run(client, thread, "build more in 2 steps")  # the server goes on from the folded thread
    assert _state(client, thread)["messages"][-1]["content"] == "Built more: all 2 steps passed."


async def test_acompact_through_the_async_client(client: Any, served: ServedAgent) -> None:
    thread = Thread(client.threads.create()["thread_id"])
    _run(client, thread, "build kit in 3 steps")
    backend = FilesystemBackend(root_dir=served.files, virtual_mode=True)
    async with get_client(url=served.url) as aclient:
        record = await acompact(aclient, _config(thread), backend=backend, trace=served.trace)
    assert record is not None
    assert _state(client, thread)["ctxwarden_fold"]["records"][-1]["number"] == record.number
    assert any(e.payload.get("ok") for e in _events(served, thread, "context_compaction"))
