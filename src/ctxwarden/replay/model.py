"""A chat model that replays a recorded session, step by step.

The recorded actions do not depend on what the model is shown, so replaying them
through different context managers compares the managers alone. Each call
re-emits the next recorded assistant turn with its tool calls; before it does, it
checks that the conversation it received answers the previous step (the results of
exactly its tool calls, or a new user message), and raises `ReplayMismatchError`
naming the step when it does not. After the last step, one closing message without
tool calls ends the agent loop. Where the recording continues with a user message
after a step that called tools (a harness's feedback, for example), the replay ends the
turn with a message without tool calls, and the driver sends the user's message.

With `reply_ids` set, every reply gets the id `<reply_ids>-<step>` (the turn-end and
closing messages theirs) instead of a random one, so a replay into a new thread is the
same bytes every time: the paths of evicted results are keyed by the id of the message
that called the tool. Replay into a new thread: two replies with one id in a thread
would replace each other.

`usage` chooses what `usage_metadata` reports: `"recorded"` (what the original
provider billed for the original harness's context) or `"received"` (the input this
replay actually received, counted with langchain-core's estimate) — the one to use
when measuring a context manager.

It streams like a provider (see `ctxwarden.replay.streaming`): the chunks are cut from
what `_generate` returns, so a subclass that overrides `_generate` streams the same.

Once an agent has bound its tools, it answers only the agent's own calls (they carry the
tools): a call from outside the loop, such as a fold asking the agent's model for a
summary, raises `ReplayMismatchError` instead of taking the next recorded step. Given
`summaries`, a model, it hands that model every fold request instead (the request in
place, with the agent's tools, or the transcript prompt), so a replay takes the path a
fold takes when the agent's own model summarizes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from ctxwarden.core.gauge_note import is_note
from ctxwarden.errors import ReplayMismatchError
from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay.recording import Recording
from ctxwarden.replay.streaming import StreamedReplies

CLOSING_TEXT = "The recorded session ends here."
TURN_END_TEXT = "The recorded turn ends here; the recording continues with the user's next message."


class ReplayChatModel(StreamedReplies, BaseChatModel):
    """Re-emits the assistant turns of a `Recording`, in order, one per call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    recording: Recording
    usage: Literal["recorded", "received"] = "recorded"
    model_name: str = "replay"
    reply_ids: str | None = None
    """Prefix of stable reply ids (see the module); `None`: langchain gives each reply a random one."""
    summaries: Any = None
    """A model that answers the fold requests this model receives (see the module); `None`: they are refused."""

    _position: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _bound: bool = PrivateAttr(default=False)

    @property
    def _llm_type(self) -> str:
        return "ctxwarden-replay"

    @property
    def position(self) -> int:
        """Index of the next step to emit."""
        return self._position

    @property
    def finished(self) -> bool:
        """Whether every recorded step was emitted."""
        return self._position >= len(self.recording.steps)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Keep the tool schemas so `usage="received"` counts them like a provider would."""
        self._bound = True
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.summaries is not None and is_fold_request(messages):
            reply = self.summaries.invoke(messages, stop=stop, **kwargs)
            return ChatResult(generations=[ChatGeneration(message=reply)])
        steps = self.recording.steps
        if (self._bound and kwargs.get("tools") is None) or is_fold_request(messages):
            raise ReplayMismatchError(
                f"{self.recording.source}: the replayed model was called outside its agent's loop (a fold asking for "
                "a summary, when no summarizer was given); its steps are the agent's, so none is spent here. "
                "Fix: pass summarizer='deterministic', or a summarizer model."
            )
        with self._lock:
            index = self._position
            if index > len(steps):
                raise ReplayMismatchError(
                    f"{self.recording.source}: step {index}: the recording has {len(steps)} steps and its "
                    f"closing message was already sent; the agent called the model again."
                )
            answers = [m for m in messages if not is_note(m)]  # ctxwarden's gauge note rides after the answers
            turn_ends = index in self._turn_starts() and bool(answers) and not isinstance(answers[-1], HumanMessage)
            self._check_answers(index, messages, turn_ends=turn_ends)
            if not turn_ends:
                self._position += 1
        if turn_ends:  # the recording went on with a user message here: end this turn, the driver sends it
            message = AIMessage(TURN_END_TEXT, response_metadata={"replay": {"step": index, "turn_end": True}})
            suffix = f"{index}-turn-end"
        elif index == len(steps):
            message = AIMessage(CLOSING_TEXT, response_metadata={"replay": {"step": index, "closing": True}})
            suffix = "closing"
        else:
            message = steps[index].model_copy(deep=True)
            suffix = str(index)
        if self.reply_ids is not None and message.id is None:
            message.id = f"{self.reply_ids}-{suffix}"
        if self.usage == "received":
            received = count_tokens_approximately(messages, tools=kwargs.get("tools"))
            message.usage_metadata = UsageMetadata(
                input_tokens=received,
                output_tokens=count_tokens_approximately([message]),
                total_tokens=received + count_tokens_approximately([message]),
            )
        elif index == len(steps) or turn_ends:
            message.usage_metadata = None
        message.response_metadata = {**message.response_metadata, "model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _turn_starts(self) -> set[int]:
        """Indexes of the steps that begin the second and later turns."""
        starts, total = set(), 0
        for turn in self.recording.turns:
            if total:
                starts.add(total)
            total += len(turn.steps)
        return starts

    def _check_answers(self, index: int, messages: Sequence[BaseMessage], *, turn_ends: bool = False) -> None:
        """The conversation must answer step `index - 1`: its tool results, or a new user message."""
        where = f"{self.recording.source}: step {index}"
        messages = [m for m in messages if not is_note(m)]  # ctxwarden's gauge note rides after the answers
        if not messages:
            raise ReplayMismatchError(f"{where}: the model was called with no messages.")
        if index in self._turn_starts() and not turn_ends:
            if not isinstance(messages[-1], HumanMessage):
                raise ReplayMismatchError(f"{where}: a new turn starts here, so the user's message was expected.")
            return
        if index == 0:
            if not isinstance(messages[-1], HumanMessage):
                raise ReplayMismatchError(
                    f"{where}: expected the first call to end with the user's message, "
                    f"got a {messages[-1].type} message."
                )
            return
        expected = {str(call["id"]) for call in self.recording.steps[index - 1].tool_calls}
        if not expected:
            if not isinstance(messages[-1], HumanMessage):
                raise ReplayMismatchError(
                    f"{where}: step {index - 1} ended a turn, so a new user message was expected; "
                    f"got a {messages[-1].type} message."
                )
            return
        answered: set[str] = set()
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            answered.add(message.tool_call_id)
        if answered != expected:
            raise ReplayMismatchError(
                f"{where}: expected the results of step {index - 1}'s tool calls {sorted(expected)}, "
                f"got results for {sorted(answered)}."
            )


__all__ = ["CLOSING_TEXT", "ReplayChatModel"]
