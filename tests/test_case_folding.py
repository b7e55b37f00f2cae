"""Thread folders stay apart on a filesystem that ignores case (macOS and Windows by default).

Thread ids come from clients: `Readme` and `readme` are two threads. On a case-insensitive
filesystem, folders named `Readme` and `readme` are one folder, so the second thread would
list, read and overwrite the first one's evicted outputs, and its fold would find the
first thread's `## fold 1` in "its" history file and write nothing. A thread's folder is
therefore named so that no two ids' folders differ only in case (`folder_name`).

`CaseFoldingBackend` is the filesystem backend on a disk that ignores case and keeps it, as
macOS's does: a path finds an existing entry whose name differs only in case, and a new entry
keeps the case it was created with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from ctxwarden import compact, create_context_agent
from ctxwarden.clip.names import result_path
from ctxwarden.core.layout import DATABASES, MAX_COMPONENT, NO_THREAD, folder_name, safe_component
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.fold.history import history_path
from ctxwarden.replay import scripted_model
from ctxwarden.stack.isolation import ThreadIsolatedBackend

FIRST, SECOND = "Readme", "readme"


class CaseFoldingBackend(FilesystemBackend):
    """A `FilesystemBackend` whose disk ignores case and preserves it (see the module docstring)."""

    def _resolve_path(self, key: str) -> Path:
        vpath = key if key.startswith("/") else "/" + key
        real = self.cwd
        for part in [p for p in vpath.split("/") if p]:
            found = None
            if real.is_dir():
                found = next((e.name for e in real.iterdir() if e.name.casefold() == part.casefold()), None)
            real = real / (found or part)
        return super()._resolve_path("/" + str(real.relative_to(self.cwd)) if real != self.cwd else "/")


def _log(secret: str) -> str:
    return "\n".join(f"INFO step {i}: {secret} compiled module_{i}" for i in range(900))


def _agent(state: Path, secret: str, script: list[Any]) -> Any:
    def build(target: str) -> str:
        """Run the build for `target` and return its log."""
        return _log(secret)

    backend = ThreadIsolatedBackend(CaseFoldingBackend(root_dir=state, virtual_mode=True), reserved=DATABASES)
    model = scripted_model(script, window=32_000)
    return create_context_agent(model, [StructuredTool.from_function(build)], state_dir=state, backend=backend)


def _calls(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    # every thread's model sends the same message and call ids: nothing but the thread tells the files apart
    return AIMessage(
        "", id="same", tool_calls=[{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(calls)]
    )


def _run(agent: Any, thread: str, prompt: str) -> list[Any]:
    config = {"configurable": {"thread_id": thread}}
    messages = agent.invoke({"messages": [("user", prompt)]}, config)["messages"]
    return messages


def _evicted_path(messages: list[Any]) -> str:
    evicted = next(m for m in messages if isinstance(m, ToolMessage) and m.response_metadata.get(METADATA_KEY))
    return str(evicted.response_metadata[METADATA_KEY]["path"])


def test_threads_whose_ids_differ_only_in_case_keep_their_own_files(state_dir: Path) -> None:
    first = _agent(state_dir, "FIRST_SECRET", [_calls(("build", {"target": "all"})), AIMessage("built")])
    first_path = _evicted_path(_run(first, FIRST, "build it"))
    compact(first, {"configurable": {"thread_id": FIRST}}, summarizer="deterministic")
    first.checkpointer.conn.close()

    probes = [
        ("build", {"target": "all"}),
        ("ls", {"path": result_path(SECOND, "", "c0").rpartition("/")[0]}),
        ("grep", {"pattern": "FIRST_SECRET"}),
        ("read_file", {"file_path": first_path}),
        ("recall", {"query": "FIRST_SECRET"}),
    ]
    second = _agent(state_dir, "SECOND_SECRET", [_calls(*probes), AIMessage("done")])
    results = [m for m in _run(second, SECOND, "build it") if isinstance(m, ToolMessage)]
    compact(second, {"configurable": {"thread_id": SECOND}}, summarizer="deterministic")
    second.checkpointer.conn.close()

    assert len(results) == len(probes)
    for message in results:
        assert "FIRST_SECRET compiled" not in str(message.content), message.content
    second_path = _evicted_path(results)
    assert second_path != first_path
    files = CaseFoldingBackend(root_dir=state_dir, virtual_mode=True)
    assert files._resolve_path(first_path).read_text(encoding="utf-8") == _log("FIRST_SECRET")  # not overwritten
    assert files._resolve_path(second_path).read_text(encoding="utf-8") == _log("SECOND_SECRET")
    first_history = files._resolve_path(history_path(FIRST, "")).read_text(encoding="utf-8")
    second_history = files._resolve_path(history_path(SECOND, "")).read_text(encoding="utf-8")
    assert "## fold 1" in first_history  # each fold wrote its own section
    assert "## fold 1" in second_history
    assert "SECOND_SECRET compiled" not in first_history, first_history
    assert "FIRST_SECRET compiled" not in second_history, second_history
    assert "SECOND_SECRET compiled" in second_history


def _ids() -> st.SearchStrategy[str]:
    """Thread ids that differ in case, end in a dot, or are a Windows device name, beside any text and UUIDs."""
    plain = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True)
    devices = st.sampled_from(["con", "CON", "nul", "Nul.txt", "aux", "prn.log", "com1", "LPT9", "conin$"])
    return st.one_of(
        st.text(max_size=30),
        plain,
        st.builds(str.upper, plain),
        st.builds(lambda p: p + ".", plain),
        st.builds(lambda p: p + ".md", plain),
        devices,
        st.builds(folder_name, plain),  # another id's folder, as an id of its own
        st.builds(lambda u: str(u).upper(), st.uuids()),
        st.builds(lambda u: str(u), st.uuids()),
    )


@settings(max_examples=3_000, deadline=None)
@given(_ids(), _ids())
def test_two_ids_never_get_folders_that_differ_only_in_case(a: str, b: str) -> None:
    if a != b:
        assert folder_name(a).casefold() != folder_name(b).casefold()


@settings(max_examples=1_000, deadline=None)
@given(_ids())
def test_a_folder_name_is_portable(value: str) -> None:
    name = folder_name(value)
    assert name == safe_component(value) or safe_component(value) == value  # only a plain name can change
    assert len(name) <= MAX_COMPONENT
    assert not name.endswith((".", ".md"))  # no folder is another thread's history file
    assert name.split(".")[0].casefold() not in {"con", "prn", "aux", "nul", "com1", "lpt9", "conin$"}


def test_lowercase_ids_and_uuids_keep_their_folders() -> None:
    for value in ("owner", "123e4567-e89b-12d3-a456-426614174000", "team_alpha-825c310177ba"):
        assert folder_name(value) == safe_component(value)
    assert folder_name(NO_THREAD) == "no-thread"  # the runs without a thread id
    assert folder_name("no-thread") != "no-thread"  # a thread a client named so: a folder of its own
    assert folder_name("Readme") != "Readme"
