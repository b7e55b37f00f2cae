"""File names from ids can never leave the backend root and never collide."""

from __future__ import annotations

from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend

from ctxwarden.clip import result_path
from ctxwarden.core.layout import safe_component

HOSTILE = [
    "../../etc/passwd",
    "/abs/path",
    "a\x00b",
    "x" * 5_000,
    "ünïcödé-☃",
    "..",
    ".hidden",
    "",
    "a/b",
    "a_b",
    "C:\\w",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_components_are_safe(value: str) -> None:
    component = safe_component(value)
    assert component
    assert "/" not in component
    assert "\\" not in component
    assert "\x00" not in component
    assert not component.startswith(".")
    assert len(component) <= 80


def test_different_ids_never_share_a_name() -> None:
    names = [safe_component(v) for v in HOSTILE]
    assert len(set(names)) == len(names)
    assert safe_component("call_00_abc") == "call_00_abc"  # ordinary ids stay readable


def test_paths_separate_threads_and_subagents() -> None:
    paths = {
        result_path("t1", "", "call_1"),
        result_path("t2", "", "call_1"),
        result_path("t1", "tools:abc", "call_1"),
    }
    assert len(paths) == 3
    assert result_path("t1", "", "call_1") == "/large_tool_results/t1/call_1"


@pytest.mark.parametrize("value", HOSTILE)
def test_written_files_stay_under_the_root(tmp_path: Path, value: str) -> None:
    root = tmp_path / "state"
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    path = result_path(value, value, value)
    (response,) = backend.upload_files([(path, b"data")])
    assert response.error is None
    written = [p for p in root.rglob("*") if p.is_file()]
    assert len(written) == 1
    assert written[0].resolve().is_relative_to(root.resolve())
