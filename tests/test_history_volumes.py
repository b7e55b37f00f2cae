"""A long thread's history: each fold reads and writes a bounded file, and the folds stay one chain, each once.

A backend has no append, so a fold rewrites its history file; in one file, a thread's
hundredth fold read and wrote a hundred sections. Past `VOLUME_CHARS` the next fold
starts a part of its own, whose first line names the file before it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ctxwarden import DETERMINISTIC, ContextPolicy, Session
from ctxwarden.fold import Folds, history
from ctxwarden.fold.history import append_section
from ctxwarden.fold.transcript import history_section
from ctxwarden.replay import scripted_model

BASE = "/conversation_history/long.md"
PREVIOUS = re.compile(r"\A<!-- ctxwarden: the folds before fold (\d+) are in (\S+) -->\n")


def _read(root: Path, path: str) -> str:
    return (root / path.lstrip("/")).read_text(encoding="utf-8")


def _chain(root: Path, last: str) -> list[str]:
    """The files from the thread's own to `last`, following each part's first line back."""
    files = [last]
    while (previous := PREVIOUS.match(_read(root, files[0]))) is not None:
        files.insert(0, previous[2])
    return files


def _folds_in(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^## fold (\d+)$", text, flags=re.MULTILINE)]


def test_past_the_volume_size_a_fold_starts_a_part_naming_the_file_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "VOLUME_CHARS", 10_000)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    sections = [history_section(n, "long", [AIMessage(f"turn {n} " + "x" * 3_000, id=f"m{n}")]) for n in range(1, 13)]
    path, written = BASE, []
    for number, section in enumerate(sections, start=1):
        path, error = append_section(backend, path, number, section, BASE)
        assert error is None
        written.append(path)
    assert written[0] == BASE
    assert len(set(written)) == 4  # three folds a file: the fourth would pass 10,000 characters
    chain = _chain(tmp_path, written[-1])
    assert chain == list(dict.fromkeys(written))
    assert all(re.fullmatch(r"/conversation_history/long/from-fold-\d+-[0-9a-f]{12}\.md", p) for p in chain[1:])
    assert all(len(_read(tmp_path, p)) <= 10_000 + len(sections[0]) for p in chain)
    assert [n for p in chain for n in _folds_in(_read(tmp_path, p))] == list(range(1, 13))
    assert "".join(PREVIOUS.sub("", _read(tmp_path, p)) for p in chain) == "".join(sections)

    # a retry of the last fold (its checkpoint lost) from the file the fold before it wrote finds it, writes nothing
    before = {p: _read(tmp_path, p) for p in chain}
    assert append_section(backend, written[-2], 12, sections[-1], BASE) == (written[-1], None)
    assert {p: _read(tmp_path, p) for p in chain} == before
    assert sorted(f"/{p.relative_to(tmp_path)}" for p in tmp_path.rglob("*") if p.is_file()) == sorted(chain)


THOUGHT = "Checking the next page of the report before moving on. " * 20  # kept in view by the policy: folds come


@tool
def fetch(page: int) -> str:
    """Fetch a page of the report."""
    return f"page {page}: " + "figures " * 160


def _steps(count: int) -> list[Any]:
    calls = [{"name": "fetch", "args": {"page": i}, "id": f"f{i}"} for i in range(count)]
    return [AIMessage(THOUGHT, tool_calls=[c]) for c in calls]


def test_a_thread_folding_many_times_keeps_every_fold_once_in_its_chain_and_a_fork_carries_it(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "VOLUME_CHARS", 12_000)
    model = scripted_model([*_steps(60), AIMessage("read")], window=4_000)
    policy = ContextPolicy(clear_call_text=False)
    with Session(
        model, [fetch], state_dir=state_dir, thread_id="long", summarizer=DETERMINISTIC, policy=policy
    ) as session:
        session.invoke("read the report")
        records = Folds.from_state(session.agent.get_state(session.config).values).records
        assert len(records) >= 6
        paths = [r.path for r in records]
        assert paths[0] == BASE
        assert len(set(paths)) >= 3
        chain = _chain(state_dir, str(paths[-1]))
        assert chain == list(dict.fromkeys(str(p) for p in paths))
        for record in records:  # each summary names the file holding its fold's section
            assert record.number in _folds_in(_read(state_dir, str(record.path)))
        assert [n for p in chain for n in _folds_in(_read(state_dir, p))] == [r.number for r in records]
        folds = [u.index for u in session.units() if u.kind == "fold"]
        child = session.fork(folds[-1:], thread_id="copy")
        seeded = str(child.messages[1].content)
        child.close()
    copied = re.search(r"/conversation_history/copy/fork-of-long-from-fold-\d+-[0-9a-f]{12}\.md", seeded)
    assert copied is not None
    copies = _chain(state_dir, copied[0])
    assert copies[0] == "/conversation_history/copy/fork-of-long.md"
    assert len(copies) == len(chain)
    for copy, original in zip(copies, chain, strict=True):  # the same folds, naming the fork's copies only
        text = _read(state_dir, copy)
        assert _folds_in(text) == _folds_in(_read(state_dir, original))
        assert "/conversation_history/long" not in text
        assert "/large_tool_results/long/" not in text
