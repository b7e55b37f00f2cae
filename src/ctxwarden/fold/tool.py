"""The agent's `compact_conversation` tool: it asks for a fold, and the next model call performs it.

A tool cannot change what the model is shown, so it does not fold by itself: it records
the request (with the agent's `focus`) in the fold state, and the fold layer folds at the
next model call — whether or not the provider reports usage. Folding a checkpointed thread
from outside a run is `ctxwarden.thread.compact`.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from pydantic import BeforeValidator

from ctxwarden.core.shown_schema import ShownSchemaTool, bare_schema
from ctxwarden.fold.state import FOLD_STATE_KEY, Folds

COMPACT_TOOL = "compact_conversation"
SCHEDULED = (
    "Compaction scheduled: before your next step, the older turns will be folded into a structured summary; "
    "their full text goes to the conversation history file named in the summary."
)


def make_compact_tool() -> BaseTool:
    """The agent's `compact_conversation` tool: asks for a fold at the next model call."""

    def compact_conversation(
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
        focus: Annotated[str, BeforeValidator(lambda value: value or "")] = "",
    ) -> Command[Any]:
        folds = Folds.from_state(state)
        asked = Folds(folds.records, folds.hold_until, {"instructions": focus or None})
        return Command(
            update={
                FOLD_STATE_KEY: asked.to_state(),
                "messages": [ToolMessage(SCHEDULED, tool_call_id=tool_call_id, name=COMPACT_TOOL)],
            }
        )

    return ShownSchemaTool.from_function(
        func=compact_conversation,
        name=COMPACT_TOOL,
        description="Fold older turns into a summary; focus: what to keep.",
        shown=bare_schema(focus="string"),
    )


__all__ = ["COMPACT_TOOL", "SCHEDULED", "make_compact_tool"]
