"""Admit: the skills index, the memory index and the instruction files, in the measured system prompt.

The first layer of every call. It appends the three sections to the system message —
so the meter counts them, unlike the stock middlewares that add theirs after
summarization has measured — and reports each section's tokens in the call's stamp,
for the /context report. A problem reading any of them (a malformed skill, an
unreadable file) contributes nothing and one `admit_problem` trace event, once per
distinct problem; the agent never fails because of them.

It runs on every call, so what did not change is not redone: the skills index is
rendered once per loaded-skills list, each section's tokens are counted once per text,
and the same system prompt with the same sections gives the same system message object
(which the meter has counted already, and which keeps the provider's cached prefix).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import SystemMessage

from ctxwarden.admit.instructions import Instructions
from ctxwarden.admit.memory import MemoryIndex
from ctxwarden.admit.sections import with_sections
from ctxwarden.admit.skills import skills_section, unloaded_skills
from ctxwarden.core.caches import BoundedDict
from ctxwarden.core.layers import CallBudget, LayerEdit, PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy

ADMIT_STAMP_KEY = "admit_tokens"
SECTION_CACHE = 32
"""Section texts whose token counts are kept (each at most its category's character cap), and skill sets checked."""
REPORTED_CAP = 1_000
"""Distinct problems remembered as already traced."""


class AdmitLayer:
    """Appends the admitted sections to the system prompt of every call."""

    name = "admit"

    def __init__(
        self,
        policy: ContextPolicy,
        meter: TokenMeter,
        *,
        backend: Any = None,
        skills: Sequence[str] = (),
        memory: str | None = None,
        instructions: str | Path | None = None,
    ) -> None:
        self.meter = meter
        self.skills = list(skills)
        self.skills_max = policy.skills_index_max_chars
        self.memory = MemoryIndex(backend, memory, policy.memory_index_max_chars) if memory else None
        self.instructions = (
            Instructions(instructions, policy.instruction_file_max_chars, policy.instructions_max_chars)
            if instructions is not None
            else None
        )
        self._reported: BoundedDict[bool] = BoundedDict(REPORTED_CAP)
        """Problems already traced (each is traced once; past the cap the oldest may be traced again)."""
        self.backend = backend
        self._checked: BoundedDict[list[str]] = BoundedDict(SECTION_CACHE)
        self._skills: tuple[object, object, tuple[str, list[str]]] | None = None
        """The skills index rendered last: the state's skills list and errors it came from, and the result."""
        self._tokens: BoundedDict[int] = BoundedDict(SECTION_CACHE)
        self._system: tuple[object, tuple[str, ...], SystemMessage] | None = None
        """The system message built last: the prompt's content and the section texts it came from, and the message."""

    def _unloaded(self, loaded: Sequence[Any]) -> list[str]:
        """Malformed skills, checked once per set of loaded skills (the loader only logs them)."""
        key = tuple(sorted(str(s.get("path")) for s in loaded))
        problems = self._checked.get(key)
        if problems is None:
            problems = unloaded_skills(self.backend, self.skills, loaded)
            self._checked.put(key, problems)
        return problems

    def sections(self, state: Any) -> tuple[dict[str, str], list[str]]:
        """Each category's rendered section, and the problems met."""
        state = state if isinstance(state, dict) else {}
        rendered: dict[str, str] = {}
        problems: list[str] = []
        if self.skills:
            rendered["skills index"], errors = self._skills_section(state)
            problems.extend(errors)
            problems.extend(self._unloaded(state.get("skills_metadata") or []))
        if self.memory is not None:
            rendered["memory index"], problem = self.memory.section()
            problems.extend([problem] if problem else [])
        if self.instructions is not None:
            rendered["instruction files"], errors = self.instructions.section()
            problems.extend(errors)
        return rendered, problems

    def _skills_section(self, state: dict[str, Any]) -> tuple[str, list[str]]:
        """The skills index, rendered again only when the state holds another skills list."""
        loaded, errors = state.get("skills_metadata"), state.get("skills_load_errors")
        cached = self._skills
        if cached is not None and cached[0] is loaded and cached[1] is errors and loaded is not None:
            return cached[2]
        result = skills_section(state, self.skills, self.skills_max)
        self._skills = (loaded, errors, result)
        return result

    def _section_tokens(self, text: str) -> int:
        tokens = self._tokens.get(text)
        if tokens is None:
            tokens = self.meter.counter(text)
            self._tokens.put(text, tokens)
        return tokens

    def _with_sections(self, system: SystemMessage | None, texts: tuple[str, ...]) -> SystemMessage:
        content = None if system is None else system.content  # all `with_sections` takes from it
        cached = self._system
        if cached is not None and cached[1] == texts and (cached[0] is content or cached[0] == content):
            return cached[2]
        built = with_sections(system, list(texts))
        self._system = (content, texts, built)
        return built

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        rendered, problems = self.sections(request.state)
        events: list[PendingEvent] = []
        for problem in problems:
            if self._reported.get(problem) is None:
                self._reported.put(problem, True)
                events.append(("admit_problem", {"problem": problem}, None))
        present = {name: text for name, text in rendered.items() if text}
        if not present:
            return LayerEdit(request, events=events) if events else None
        system = self._with_sections(request.system_message, tuple(present.values()))
        tokens = {name: self._section_tokens(text) for name, text in present.items()}
        return LayerEdit(request.override(system_message=system), events=events, stamp={ADMIT_STAMP_KEY: tokens})

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)


__all__ = ["ADMIT_STAMP_KEY", "AdmitLayer"]
