"""Admit: skills, memory and instruction files as capped indexes in the measured system prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StateBackend
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, HumanMessage

from ctxwarden import ContextPolicy, TokenMeter, context_report, create_context_agent
from ctxwarden.admit import Instructions, candidate_paths
from ctxwarden.admit.memory import MemoryIndex, local_path
from ctxwarden.replay import scripted_model
from ctxwarden.stack.discover import AgentBackend
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.trace import TraceStore
from spies import note_calls

CONFIG = {"configurable": {"thread_id": "admit"}}


class Prompts(AgentMiddleware):
    """Records the system prompt each call receives (it runs inside ctxwarden)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        system = request.system_message
        self.prompts.append(system.text if system is not None else "")
        return handler(request)


def _skill(root: Path, folder: str, name: str, description: str, body: str = "Do the thing.") -> None:
    path = root / folder / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n", encoding="utf-8")


def _run(state: Path, replies: list, **kwargs: Any) -> tuple[list, Prompts]:
    prompts = Prompts()
    agent = create_context_agent(
        scripted_model(replies, window=32_000), state_dir=state, middleware=[prompts], **kwargs
    )
    for i in range(len([r for r in replies if not getattr(r, "tool_calls", None)])):
        out = agent.invoke({"messages": [HumanMessage(f"turn {i}")]}, CONFIG)
    agent.checkpointer.conn.close()
    return out["messages"], prompts


def test_skills_index_names_up_front_closer_folder_shadows(state_dir: Path) -> None:
    _skill(state_dir, "skills/user", "review", "Review code the way the user likes")
    _skill(state_dir, "skills/user", "deploy", "Deploy to staging")
    _skill(state_dir, "skills/project", "review", "Review code against this project's checklist", body="SECRET BODY")
    bad = state_dir / "skills" / "project" / "broken"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: [unclosed\n---\n", encoding="utf-8")
    _messages, prompts = _run(state_dir, ["ok"], skills=["/skills/user/", "/skills/project/"])
    prompt = prompts.prompts[0]
    assert "- review: Review code against this project's checklist (/skills/project/review/SKILL.md)" in prompt
    assert "the user likes" not in prompt
    assert "- deploy: Deploy to staging" in prompt
    assert "SECRET BODY" not in prompt  # bodies are read on demand
    assert "broken" not in prompt
    problems = TraceStore(state_dir / "trace.sqlite").events(kind="admit_problem")
    assert problems
    assert any("broken" in e.payload["problem"] for e in problems)


def test_skills_index_is_capped(state_dir: Path) -> None:
    for i in range(40):
        _skill(state_dir, "skills", f"skill-{i:02d}", "A skill that does something rather specific " * 2)
    policy = ContextPolicy(skills_index_max_chars=1_000)
    _messages, prompts = _run(state_dir, ["ok"], skills=["/skills/"], policy=policy)
    section = prompts.prompts[0].split("## Skills", 1)[1]
    assert "more skills omitted" in section
    listed = section.count("\n- skill-")
    assert 0 < listed < 40
    assert f"- … {40 - listed} more skills omitted" in section


def test_memory_index_is_admitted_capped_and_reread_when_it_changes(state_dir: Path) -> None:
    memory = state_dir / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("- [Style](/memory/style.md) — the user's code style\n", encoding="utf-8")
    (memory / "style.md").write_text("Tabs, never spaces. NOTE BODY", encoding="utf-8")
    add_note = AIMessage(
        "",
        tool_calls=[
            {
                "name": "edit_file",
                "args": {
                    "file_path": "/memory/MEMORY.md",
                    "old_string": "- [Style](/memory/style.md) — the user's code style",
                    "new_string": "- [Style](/memory/style.md) — the user's code style\n"
                    "- [Deploy](/memory/deploy.md) — how to deploy",
                },
                "id": "e1",
            }
        ],
    )
    _messages, prompts = _run(state_dir, ["first", add_note, "second", "third"], memory="/memory/MEMORY.md")
    first, after_edit, last = prompts.prompts[0], prompts.prompts[2], prompts.prompts[3]
    assert "- [Style](/memory/style.md) — the user's code style" in first
    assert "NOTE BODY" not in first  # note bodies enter only when read
    assert "write it to `/memory/<short-name>.md`" in first  # how to add a note
    assert "[Deploy]" not in first
    assert "- [Deploy](/memory/deploy.md) — how to deploy" in after_edit
    assert after_edit == last  # unchanged index, byte-identical section


def test_memory_index_cap_and_a_bad_index(state_dir: Path) -> None:
    memory = state_dir / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_text("".join(f"- [Note {i}](/memory/n{i}.md) — a note\n" for i in range(400)))
    _messages, prompts = _run(state_dir, ["ok"], memory="/memory/MEMORY.md")
    section = prompts.prompts[0].split("## Memory", 1)[1]
    assert len(section) < 8_000 + 800
    assert "more lines omitted; read /memory/MEMORY.md for the rest" in section

    (memory / "MEMORY.md").write_bytes(b"\xff\xfe not utf-8")
    _messages, prompts = _run(state_dir / "again", ["ok"], memory="/memory/MEMORY.md")
    assert "## Memory" in prompts.prompts[0]  # the agent still runs, without the index


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Use Python 3.11. Run pytest before committing.", encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "AGENTS.md").write_text("Keep modules under 400 lines.", encoding="utf-8")
    deep = root / "pkg" / "deep"
    deep.mkdir()
    (deep / "AGENTS.md").write_text("Use Python 3.11. Run pytest before committing.", encoding="utf-8")  # a copy
    return deep


def test_instruction_files_broad_first_labelled_deduped(tmp_path: Path, state_dir: Path) -> None:
    deep = _repo(tmp_path)
    assert [p.parent.name for p in candidate_paths(deep)] == ["repo", "pkg", "deep"]
    _messages, prompts = _run(state_dir, ["ok"], instructions=deep)
    section = prompts.prompts[0].split("## Instructions (AGENTS.md)", 1)[1]
    assert section.index("### .\nUse Python 3.11") < section.index("### pkg\nKeep modules under 400 lines.")
    assert section.count("Use Python 3.11") == 1  # identical content counted once
    assert "### pkg/deep" not in section


def test_instruction_caps_and_no_repository(tmp_path: Path) -> None:
    deep = _repo(tmp_path)
    (deep.parent / "AGENTS.md").write_text("x" * 9_000, encoding="utf-8")
    text, problems = Instructions(deep, per_file=4_000, total=12_000).section()
    assert problems == []
    assert "more chars: read" in text
    assert len(text) < 12_000 + 1_000
    tight, _ = Instructions(deep, per_file=4_000, total=4_050).section()
    assert "more instruction files omitted" in tight
    alone = tmp_path / "loose"
    alone.mkdir()
    (alone / "AGENTS.md").write_text("Only here.", encoding="utf-8")
    assert candidate_paths(alone) == [alone.resolve() / "AGENTS.md"]


def test_an_unreadable_instruction_file_contributes_nothing(tmp_path: Path, state_dir: Path) -> None:
    deep = _repo(tmp_path)
    (deep.parent / "AGENTS.md").write_bytes(b"\xff\xfe\x00 binary")
    messages, prompts = _run(state_dir, ["still fine"], instructions=deep)
    assert messages[-1].content == "still fine"
    assert "Keep modules" not in prompts.prompts[0]
    (problem,) = TraceStore(state_dir / "trace.sqlite").events(kind="admit_problem")
    assert "pkg/AGENTS.md" in problem.payload["problem"]


def test_sections_are_counted_and_reported_as_categories(tmp_path: Path, state_dir: Path) -> None:
    deep = _repo(tmp_path)
    _skill(state_dir, "skills", "review", "Review code")
    (state_dir / "memory").mkdir(parents=True)
    (state_dir / "memory" / "MEMORY.md").write_text("- [Style](/memory/style.md) — code style\n", encoding="utf-8")
    messages, prompts = _run(
        state_dir, ["one", "two"], skills=["/skills/"], memory="/memory/MEMORY.md", instructions=deep
    )
    assert prompts.prompts[0] == prompts.prompts[1]  # byte-identical while the files are unchanged
    stamp = messages[-1].response_metadata["ctxwarden"]
    admitted = stamp["admit_tokens"]
    assert set(admitted) == {"skills index", "memory index", "instruction files"}
    assert stamp["system_tokens"] > sum(admitted.values())  # measured: the sections are in what the model receives
    report = context_report(state_dir, CONFIG)
    for category in ("skills index", "memory index", "instruction files"):
        assert report.categories[category] > 0


@pytest.mark.parametrize("kind", ["skills", "memory", "instructions"])
def test_missing_sources_never_break_the_agent(tmp_path: Path, state_dir: Path, kind: str) -> None:
    options = {"skills": {"skills": ["/nowhere/"]}, "memory": {"memory": "/nowhere/MEMORY.md"}}
    options["instructions"] = {"instructions": tmp_path / "no-such-dir"}
    messages, _prompts = _run(state_dir, ["fine"], **options[kind])
    assert messages[-1].content == "fine"


class _CountingBackend(FilesystemBackend):
    """A filesystem backend that counts what it is asked to download."""

    def __init__(self, root: Path) -> None:
        super().__init__(root_dir=root, virtual_mode=True)
        self.downloads: list[str] = []

    def download_files(self, paths: list[str]) -> Any:
        self.downloads.extend(paths)
        return super().download_files(paths)


@pytest.mark.parametrize("wrapped", ["bare", "isolated", "agent"])
def test_a_local_memory_index_is_read_again_only_when_its_file_changed(tmp_path: Path, wrapped: str) -> None:
    inner = _CountingBackend(tmp_path)
    backend: Any = {
        "bare": inner,
        "isolated": ThreadIsolatedBackend(inner),
        "agent": _adopted(tmp_path, inner),
    }[wrapped]
    (tmp_path / "memory").mkdir()
    index = tmp_path / "memory" / "MEMORY.md"
    index.write_text("- [Style](/memory/style.md) — tabs\n", encoding="utf-8")
    memory = MemoryIndex(backend, "/memory/MEMORY.md", 2_000)
    first = [memory.section()[0] for _ in range(5)]
    assert inner.downloads == ["/memory/MEMORY.md"]  # four calls answered by a stat
    assert len(set(first)) == 1
    assert "- [Style](/memory/style.md) — tabs" in first[0]

    index.write_text("- [Style](/memory/style.md) — tabs\n- [Deploy](/memory/deploy.md) — how\n", encoding="utf-8")
    assert "- [Deploy](/memory/deploy.md) — how" in memory.section()[0]
    index.unlink()
    assert "(no notes yet)" in memory.section()[0]
    assert inner.downloads == ["/memory/MEMORY.md"] * 3


def _adopted(state: Path, inner: FilesystemBackend) -> AgentBackend:
    """ctxwarden's own backend, having found `inner` behind deepagents' file tools."""
    backend = AgentBackend(state)
    backend._found = inner
    return backend


def test_a_memory_index_on_another_backend_is_read_on_every_call() -> None:
    backend = StateBackend()
    assert local_path(backend, "/memory/MEMORY.md") is None  # nothing to stat: each call reads (fresh, as before)
    assert local_path(FilesystemBackend(root_dir="/srv", virtual_mode=True), "/memory/../x") is None


def test_a_call_whose_sections_change_only_the_system_prompt_measures_its_messages_once(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured = note_calls(monkeypatch, TokenMeter, "messages_tokens", lambda _meter, messages: len(messages))
    (state_dir / "memory").mkdir(parents=True)
    (state_dir / "memory" / "MEMORY.md").write_text("- [Style](/memory/style.md) — code style\n", encoding="utf-8")
    messages, _prompts = _run(state_dir, ["one", "two"], memory="/memory/MEMORY.md", instructions=_repo(tmp_path))
    assert measured == [1, 3]  # one measure per call: the admitted prompt reuses the messages' count
    meter = TokenMeter()
    for reply, upto in ((messages[1], 1), (messages[3], 3)):
        stamp = reply.response_metadata["ctxwarden"]
        assert stamp["message_tokens"] == meter.messages_tokens(messages[:upto])  # the count is the full one
