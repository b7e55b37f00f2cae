"""Admit: names up front, bodies on demand — the skills index, the memory index, the instruction files."""

from ctxwarden.admit.instructions import Instructions, candidate_paths, repository_root
from ctxwarden.admit.layer import ADMIT_STAMP_KEY, AdmitLayer
from ctxwarden.admit.memory import DEFAULT_MEMORY_INDEX, MemoryIndex
from ctxwarden.admit.skills import skills_loader, skills_section

__all__ = [
    "ADMIT_STAMP_KEY",
    "DEFAULT_MEMORY_INDEX",
    "AdmitLayer",
    "Instructions",
    "MemoryIndex",
    "candidate_paths",
    "repository_root",
    "skills_loader",
    "skills_section",
]
