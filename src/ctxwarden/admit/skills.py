"""The skills index: one line per skill (name and description), bodies read on demand.

deepagents' `SkillsMiddleware` does the discovery — skills folders on the backend,
`SKILL.md` front matter, later folders overriding earlier ones on a name clash — and
keeps the result in state; ctxwarden renders the index itself, capped, inside the
measured system prompt (the stock index is uncapped and added after measurement).
Pass folders farthest first (user-wide, then project): the closer folder shadows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepagents.middleware.skills import SkillsMiddleware

from ctxwarden.admit.sections import capped_lines


def skills_loader(backend: Any, sources: Sequence[str]) -> SkillsMiddleware:
    """deepagents' skills middleware with its own prompt section turned off: it loads, ctxwarden renders."""
    return SkillsMiddleware(backend=backend, sources=list(sources), system_prompt=None)


def unloaded_skills(backend: Any, sources: Sequence[str], loaded: Sequence[Mapping[str, Any]]) -> list[str]:
    """Skill folders holding a `SKILL.md` that did not load (malformed front matter, a bad name)."""
    if backend is None:
        return []
    paths = {str(s.get("path")) for s in loaded}
    problems = []
    for source in sources:
        try:
            listing = backend.ls(source)
        except Exception:  # an unreadable source is reported by the loader itself
            continue
        for entry in getattr(listing, "entries", None) or []:
            if not entry.get("is_dir"):
                continue
            skill_md = entry["path"].rstrip("/") + "/SKILL.md"
            if skill_md in paths:
                continue
            (found,) = backend.download_files([skill_md])
            if found.error is None:
                problems.append(f"skill at {skill_md} could not be loaded: malformed front matter or name")
    return problems


def skills_section(state: Mapping[str, Any], sources: Sequence[str], max_chars: int) -> tuple[str, list[str]]:
    """The rendered index and the loading problems to report (malformed skills contribute nothing)."""
    skills = list(state.get("skills_metadata") or [])
    errors = [str(e) for e in state.get("skills_load_errors") or []]
    if not sources:
        return "", errors
    where = ", ".join(f"`{s}`" for s in sources)
    head = (
        "## Skills\n"
        f"Skills are folders under {where}; the list below names each with what it is for. "
        "Before using one, read its SKILL.md with read_file for the full instructions."
    )
    if not skills:
        return f"{head}\n(no skills yet)", errors
    lines = [f"- {s['name']}: {s['description']} ({s['path']})" for s in sorted(skills, key=lambda s: s["name"])]
    body = capped_lines(lines, max_chars, "- … {count} more skills omitted; list the skills folders to see them all")
    return f"{head}\n{body}", errors


__all__ = ["skills_loader", "skills_section", "unloaded_skills"]
