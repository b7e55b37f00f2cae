"""Rendering capped system-prompt sections, and adding them to the system message.

Whatever sits in the system prompt is re-sent on every call, so each admitted section
is an index with a hard cap: past it, one line says what was omitted and where the
rest is. A section is rendered once per content and reused, so it stays
byte-identical from call to call while its files are unchanged (a provider's prompt
cache keeps the prefix).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import SystemMessage


def capped_lines(lines: Sequence[str], max_chars: int, omitted: str) -> str:
    """Whole lines up to `max_chars`; past it, `omitted` (formatted with `{count}`) as the last line."""
    out: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        cost = len(line) + 1
        if used + cost > max_chars:
            out.append(omitted.format(count=len(lines) - index))
            break
        out.append(line)
        used += cost
    return "\n".join(out)


def capped_text(text: str, max_chars: int, omitted: str) -> str:
    """`text` cut at `max_chars` on a line boundary, with `omitted` (formatted with `{chars}`) after it."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    cut = cut if cut > max_chars // 2 else max_chars
    return text[:cut].rstrip() + "\n" + omitted.format(chars=len(text) - cut)


def with_sections(system: SystemMessage | None, sections: Sequence[str]) -> SystemMessage:
    """`system` with `sections` appended (a new message; the original is untouched)."""
    text = "\n\n".join(s for s in sections if s)
    if system is None:
        return SystemMessage(text)
    content = system.content
    if isinstance(content, str):
        return SystemMessage(f"{content}\n\n{text}" if content else text)
    return SystemMessage([*content, {"type": "text", "text": f"\n\n{text}"}])


__all__ = ["capped_lines", "capped_text", "with_sections"]
