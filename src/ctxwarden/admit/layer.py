"""Admit: the skills index, the memory index and the instruction files, in the measured system prompt.

The first layer of every call. It appends the three sections to the system message —
so the meter counts them, unlike the stock middlewares that add theirs after
summarization has measured — and reports each section's tokens in the call's stamp,
for the /context report. A problem reading any of them (a malformed skill, an
unreadable file) contributes nothing and one `admit_problem` trace event, once per
distinct problem; the agent never fails because of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain.agents.middleware.types import ModelRequest

from ctxwarden.admit.instructions import Instructions
from ctxwarden.admit.memory import MemoryIndex
from ctxwarden.admit.sections import with_sections
from ctxwarden.admit.skills import skills_section, unloaded_skills
from ctxwarden.core.layers import CallBudget, LayerEdit, PendingEvent
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy

ADMIT_STAMP_KEY = "admit_tokens"


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
        self._reported: set[str] = set()
        self.backend = backend
        self._checked: dict[tuple[str, ...], list[str]] = {}

    def _unloaded(self, loaded: Sequence[Any]) -> list[str]:
        """Malformed skills, checked once per set of loaded skills (the loader only logs them)."""
        key = tuple(sorted(str(s.get("path")) for s in loaded))
        if key not in self._checked:
            self._checked[key] = unloaded_skills(self.backend, self.skills, loaded)
        return self._checked[key]

    def sections(self, state: Any) -> tuple[dict[str, str], list[str]]:
        """Each category's rendered section, and the problems met."""
        state = state if isinstance(state, dict) else {}
        rendered: dict[str, str] = {}
        problems: list[str] = []
        if self.skills:
            rendered["skills index"], errors = skills_section(state, self.skills, self.skills_max)
            problems.extend(errors)
            problems.extend(self._unloaded(state.get("skills_metadata") or []))
        if self.memory is not None:
            rendered["memory index"], problem = self.memory.section()
            problems.extend([problem] if problem else [])
        if self.instructions is not None:
            rendered["instruction files"], errors = self.instructions.section()
            problems.extend(errors)
        return rendered, problems

    def shape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        rendered, problems = self.sections(request.state)
        events: list[PendingEvent] = []
        for problem in problems:
            if problem not in self._reported:
                self._reported.add(problem)
                events.append(("admit_problem", {"problem": problem}, None))
        present = {name: text for name, text in rendered.items() if text}
        if not present:
            return LayerEdit(request, events=events) if events else None
        system = with_sections(request.system_message, list(present.values()))
        tokens = {name: self.meter.counter(text) for name, text in present.items()}
        return LayerEdit(request.override(system_message=system), events=events, stamp={ADMIT_STAMP_KEY: tokens})

    async def ashape(self, request: ModelRequest[Any], budget: CallBudget) -> LayerEdit | None:
        return self.shape(request, budget)


__all__ = ["ADMIT_STAMP_KEY", "AdmitLayer"]
