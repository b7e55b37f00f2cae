"""Isolation wraps a `CompositeBackend` whole: a route of it cannot be isolated, and saying so is refused up front.

The composite hands a route's backend the path without the route's prefix, so a `ThreadIsolatedBackend` under
`/large_tool_results/` sees `/owner/<file>` and let another thread list, read and edit the owner's evicted output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ctxwarden import ThreadIsolatedBackend, ThreadIsolatedStoreBackend, context_middleware, create_context_agent
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.errors import BuildArgumentError
from ctxwarden.replay import scripted_model

SECRET = "token=owner-only-7f3a"
LOG = "\n".join(f"INFO step {i}: {SECRET} compiled module_{i}" for i in range(900))


@tool
def build(target: str) -> str:
    """Run the build for `target` and return its log."""
    return LOG


def _folders(root: Path) -> dict[str, FilesystemBackend]:
    for name in ("ws", "results", "history"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return {name: FilesystemBackend(root_dir=root / name, virtual_mode=True) for name in ("ws", "results", "history")}


def _routed(root: Path, wrap: Any = ThreadIsolatedBackend) -> CompositeBackend:
    """The composite a user writes to keep offloaded files apart, each route wrapped in `wrap`."""
    disk = _folders(root)
    return CompositeBackend(
        default=ThreadIsolatedBackend(disk["ws"]),
        routes={"/large_tool_results/": wrap(disk["results"]), "/conversation_history/": wrap(disk["history"])},
    )


def _whole(root: Path) -> ThreadIsolatedBackend:
    disk = _folders(root)
    routes = {"/large_tool_results/": disk["results"], "/conversation_history/": disk["history"]}
    return ThreadIsolatedBackend(CompositeBackend(default=disk["ws"], routes=routes))


def test_create_context_agent_refuses_a_route_wrapped_in_isolation_naming_the_route_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(BuildArgumentError) as refused:
        create_context_agent(scripted_model(["ok"]), [build], state_dir=tmp_path / "s", backend=_routed(tmp_path))
    assert "'/large_tool_results/'" in str(refused.value)
    assert "ThreadIsolatedBackend(CompositeBackend(" in str(refused.value)


def test_a_route_wrapped_in_store_isolation_is_refused_too(tmp_path: Path) -> None:
    backend = _routed(tmp_path, wrap=lambda _disk: ThreadIsolatedStoreBackend())
    with pytest.raises(BuildArgumentError, match="ThreadIsolatedStoreBackend"):
        context_middleware(state_dir=tmp_path / "s", backend=backend)


def test_a_deep_agent_whose_file_backend_routes_to_isolation_fails_at_its_first_call(tmp_path: Path) -> None:
    agent = create_deep_agent(
        model=scripted_model(["ok"], window=32_000),
        tools=[build],
        backend=_routed(tmp_path),
        middleware=[context_middleware(state_dir=tmp_path / "s", trace=False)],
    )
    with pytest.raises(BuildArgumentError, match="the agent's file backend"):
        agent.invoke({"messages": [("user", "build it")]}, {"configurable": {"thread_id": "owner"}})


def test_the_composite_wrapped_whole_keeps_each_thread_out_of_another_s_files(tmp_path: Path) -> None:
    owner = create_context_agent(
        scripted_model(
            [AIMessage("", id="o1", tool_calls=[{"name": "build", "args": {"target": "x"}, "id": "c0"}]), "built"],
            window=32_000,
        ),
        [build],
        state_dir=tmp_path / "s",
        backend=_whole(tmp_path),
    )
    out = owner.invoke({"messages": [("user", "build")]}, {"configurable": {"thread_id": "owner"}})
    owner.checkpointer.conn.close()
    path = next(m for m in out["messages"] if isinstance(m, ToolMessage)).response_metadata[METADATA_KEY]["path"]
    evicted = tmp_path / "results" / path.removeprefix("/large_tool_results/")
    assert SECRET in evicted.read_text(encoding="utf-8")
    probes = [
        ("read_file", {"file_path": path}),
        ("ls", {"path": "/large_tool_results/owner"}),
        ("edit_file", {"file_path": path, "old_string": "INFO step 1:", "new_string": "EDITED"}),
    ]
    calls = [{"name": name, "args": args, "id": f"p{i}"} for i, (name, args) in enumerate(probes)]
    intruder = create_context_agent(
        scripted_model([AIMessage("", tool_calls=calls), "done"], window=200_000),
        [build],
        state_dir=tmp_path / "s",
        backend=_whole(tmp_path),
    )
    seen = intruder.invoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": "intruder"}})
    intruder.checkpointer.conn.close()
    answers = [m for m in seen["messages"] if isinstance(m, ToolMessage)]
    assert len(answers) == 3
    for answer in answers:
        assert "another thread" in str(answer.content)
        assert SECRET not in str(answer.content)
    assert "EDITED" not in evicted.read_text(encoding="utf-8")
