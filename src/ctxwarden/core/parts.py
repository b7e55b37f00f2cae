"""What an agent was built with, kept on the agent: its backend, trace, policy, meter and summarizer.

`compact()`, the /context report and the CLI act on a thread from outside a run. They
must write the history file to the backend the agent evicts to and record the fold in
the trace the agent records to — whatever the checkpointer (SQLite, Postgres, in
memory), which says nothing about either. So `create_context_agent` records its parts
on the compiled agent, and those callers read them back from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy

PARTS_ATTRIBUTE = "ctxwarden_parts"
"""The attribute of a compiled agent holding its `AgentParts`."""


@dataclass(frozen=True, slots=True)
class AgentParts:
    """The pieces a ctxwarden agent was built with."""

    backend: Any
    """Where large results and history files go (a deepagents backend), or `None`."""
    recorder: Any
    """The `TraceRecorder` the agent records to (a disabled one when it has no trace)."""
    policy: ContextPolicy
    meter: TokenMeter
    summarizer: Any = None
    """The summarizer given at build time (`None`: the model being called)."""


def attach_parts(agent: Any, parts: AgentParts) -> Any:
    """Record `parts` on `agent` (returned, for chaining)."""
    setattr(agent, PARTS_ATTRIBUTE, parts)
    return agent


def parts_of(source: Any) -> AgentParts | None:
    """The parts recorded on `source` (an agent, or a binding of one), or `None`."""
    for candidate in (source, getattr(source, "bound", None)):
        found = getattr(candidate, PARTS_ATTRIBUTE, None) if candidate is not None else None
        if isinstance(found, AgentParts):
            return found
    return None


__all__ = ["PARTS_ATTRIBUTE", "AgentParts", "attach_parts", "parts_of"]
