"""Streaming for the scripted and replay models: the reply a call would return, cut into chunks.

Agents are streamed (`stream_mode="messages"`), and a chat model that only answers
whole, or streams its text but drops its tool calls, makes an agent stop early or fail
with "No generations found in stream". Both fake models therefore stream the way a
real provider does: the text in word-sized pieces, then each tool call as chunks whose
JSON arguments arrive in parts, then one closing chunk with usage and metadata. The
chunks are cut from the message the model's `_generate` returns, so a subclass that
overrides `_generate` (the benchmark captures what each call received) streams too, and
merging the chunks gives back that exact message.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from ctxwarden.errors import ReplayMismatchError

_PIECES = re.compile(r"\s*\S+\s*|\s+")
"""A word with the whitespace around it: joined back, the pieces are the text exactly."""


def reply_of(result: ChatResult, model: str) -> AIMessage:
    """The one AI message of a fake model's result (anything else is a bug in the script)."""
    message = result.generations[0].message if result.generations else None
    if not isinstance(message, AIMessage):
        raise ReplayMismatchError(
            f"{model}: a scripted reply must be an AIMessage or a string, got {type(message).__name__}. "
            "Fix: script AIMessage(...) objects or plain strings."
        )
    return message


def chunks_of(message: AIMessage) -> list[AIMessageChunk]:
    """`message` as a provider would stream it; the chunks add up to `message` again.

    Text goes out a word at a time; each tool call as two chunks (name and id with the first
    half of the JSON arguments, then the rest); usage, response metadata and any extra
    provider fields ride on the last chunk, so nothing is counted twice when the chunks merge.
    """
    chunks: list[AIMessageChunk] = []
    content = message.content
    if isinstance(content, str):
        chunks.extend(AIMessageChunk(content=piece, id=message.id) for piece in _PIECES.findall(content))
    elif content:  # content blocks go out whole: merging lists of blocks is by position
        chunks.append(AIMessageChunk(content=list(content), id=message.id))
    for index, call in enumerate(message.tool_calls):
        arguments = json.dumps(call["args"], ensure_ascii=False)
        half = len(arguments) // 2
        first = tool_call_chunk(name=call["name"], args=arguments[:half], id=call["id"], index=index)
        rest = tool_call_chunk(name=None, args=arguments[half:], id=None, index=index)
        chunks.append(AIMessageChunk(content="", id=message.id, tool_call_chunks=[first]))
        chunks.append(AIMessageChunk(content="", id=message.id, tool_call_chunks=[rest]))
    last = AIMessageChunk(
        content="" if isinstance(content, str) else [],
        id=message.id,
        response_metadata=dict(message.response_metadata),
        additional_kwargs=dict(message.additional_kwargs),
        usage_metadata=message.usage_metadata,
        chunk_position="last",
    )
    chunks.append(last)
    if message.name is not None:
        chunks[0].name = message.name
    return chunks


def stream_reply(
    model: BaseChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None,
    run_manager: CallbackManagerForLLMRun | None,
    **kwargs: Any,
) -> Iterator[ChatGenerationChunk]:
    """`model._generate`'s reply, streamed (the shared body of both fake models' `_stream`)."""
    yield from _generation_chunks(model, model._generate(messages, stop, run_manager, **kwargs))


async def astream_reply(
    model: BaseChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None,
    run_manager: AsyncCallbackManagerForLLMRun | None,
    **kwargs: Any,
) -> AsyncIterator[ChatGenerationChunk]:
    """Async twin of `stream_reply`: the reply comes from `model._agenerate`."""
    for chunk in _generation_chunks(model, await model._agenerate(messages, stop, run_manager, **kwargs)):
        yield chunk


def _generation_chunks(model: BaseChatModel, result: ChatResult) -> Iterator[ChatGenerationChunk]:
    """The chunks both twins stream, from the result of `_generate` or `_agenerate`."""
    for chunk in chunks_of(reply_of(result, model.get_name())):
        yield ChatGenerationChunk(message=chunk)


class StreamedReplies:
    """Mixin for a fake chat model: `stream`/`astream` cut the reply of `_generate` into chunks, as providers do."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from stream_reply(cast(BaseChatModel, self), messages, stop, run_manager, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in astream_reply(cast(BaseChatModel, self), messages, stop, run_manager, **kwargs):
            yield chunk


__all__ = ["StreamedReplies", "astream_reply", "chunks_of", "reply_of", "stream_reply"]
