"""What a provider says when it refuses a call as too long: whether an error is such a refusal, and the limit it names.

Providers refuse a prompt past their window each in their own words, and langchain's
integrations raise `ContextOverflowError` for some of them only. An error not recognised
as a refusal ends the run where the forced round would have saved it, so the wordings of
the providers an agent is run on are listed here, each with an example. Most of them name
the limit too, which is read only from these phrases; where a provider counts the reply in
its limit and says how much it reserved for it ("you requested 5000 tokens (4000 in the
messages, 1000 in the completion)"), that share is taken off.

A status code, where the error or an error it was raised from carries one, must be one a
refusal comes with (400, 413, 422): a rate limit counted in tokens (429, "too many tokens
per minute") is not a refusal of the prompt's size.
"""

from __future__ import annotations

import re

from langchain_core.exceptions import ContextOverflowError

_OVERFLOW = re.compile(
    "|".join(
        (
            r"context_length_exceeded",  # OpenAI's error code, Groq's
            r"contextwindowexceedederror",  # LiteLLM
            r"maximum context length",  # OpenAI, OpenRouter, vLLM: "maximum context length is 4096 tokens"
            r"exceeds the context window",  # OpenAI: "Your input exceeds the context window of this model"
            r"exceeds the available context size",  # llama.cpp server
            r"exceed context window of",  # llama-cpp-python: "Requested tokens (5000) exceed context window of 4096"
            r"context window exceeded",
            r"context limit exceeded",
            r"input tokens exceed the configured limit",  # OpenAI Responses
            r"prompt is too long",  # Anthropic
            r"request too large",
            r"input is too long for requested model",  # Amazon Bedrock
            r"input token count.{0,40}exceeds the maximum",  # Gemini
            r"maximum prompt length is",  # xAI
            r"reduce the length of the messages",  # Groq
            r"token count of \d+ exceeds the limit",  # GitHub Copilot
            r"greater than the context length",  # LM Studio
            r"context window exceeds limit",  # MiniMax
            r"exceeded model token limit",  # Kimi
            r"too large for model with \d+ maximum context length",  # Mistral, vLLM
        )
    ),
    re.IGNORECASE,
)

_REFUSAL_STATUS = frozenset({400, 413, 422})

_NUMBER = r"(\d[\d,_]{0,14})"
"""A token count as providers write it (`200000`, `200,000`); longer digit strings are not a window."""

_STATED = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"tokens? > {_NUMBER}\b",  # Anthropic: "prompt is too long: 213462 tokens > 200000 maximum"
        rf"maximum context length is {_NUMBER}",  # OpenAI, OpenRouter, vLLM
        rf"configured limit of {_NUMBER}",  # OpenAI Responses: "Input tokens exceed the configured limit of N tokens"
        rf"maximum number of tokens allowed \({_NUMBER}\)",  # Gemini: "The input token count (N) exceeds the ..."
        rf"maximum prompt length is {_NUMBER}",  # xAI: "This model's maximum prompt length is 131072 but ..."
        rf"exceeds the limit of {_NUMBER}",  # GitHub Copilot: "prompt token count of X exceeds the limit of Y"
        rf"exceeded model token limit: {_NUMBER}",  # Kimi: "Your request exceeded model token limit: X (requested: Y)"
        rf"model with {_NUMBER} maximum context length",  # Mistral, vLLM: "too large for model with N maximum ..."
        rf"exceed context window of {_NUMBER}",  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
        rf"\"n_ctx\": ?{_NUMBER}",  # llama.cpp server: {"type": "exceed_context_size_error", ..., "n_ctx": 4096}
    )
)

_RESERVED = re.compile(rf"{_NUMBER} (?:in the completion|in the output)\b", re.IGNORECASE)
"""The share of a limit a provider reserved for the reply, where it counts the reply in the limit and says so."""


def is_context_overflow(exc: BaseException) -> bool:
    """Whether a provider error says the input was larger than the model's window: `ContextOverflowError`, or an
    error in one of the providers' wordings whose status, if it or an error it was raised from has one, is one a
    refusal comes with."""
    if isinstance(exc, ContextOverflowError):
        return True
    chain = _raised_from(exc)
    status = next((code for error in chain if (code := _status(error)) is not None), None)
    if status is not None and status not in _REFUSAL_STATUS:
        return False
    return any(_OVERFLOW.search(str(error)) for error in chain)


def _raised_from(exc: BaseException) -> list[BaseException]:
    """`exc` and the errors it was raised from (`raise ... from`), as an integration wraps the provider's error; not
    an error merely being handled when it was raised, which may be another call's."""
    chain = [exc]
    while (cause := chain[-1].__cause__) is not None and len(chain) < 8:
        chain.append(cause)
    return chain


def _status(error: BaseException) -> int | None:
    """The HTTP status `error` carries, if it carries one."""
    response = getattr(error, "response", None)
    for value in (
        getattr(error, "status_code", None),
        getattr(response, "status_code", None),
        getattr(error, "code", None),  # google's errors
    ):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
            return value
    return None


def stated_limit(error: BaseException | str) -> int | None:
    """The input tokens a refusal says the model takes, or `None` when it names no limit in a known phrase."""
    text = str(error) if isinstance(error, str) else "\n".join(map(str, _raised_from(error)))
    for pattern in _STATED:
        if (found := pattern.search(text)) is None:
            continue
        limit = _tokens(found.group(1))
        reserved = _RESERVED.search(text, found.end())
        if reserved is not None:
            limit -= _tokens(reserved.group(1))
        return limit if limit > 0 else None
    return None


def _tokens(written: str) -> int:
    return int(written.replace(",", "").replace("_", ""))


__all__ = ["is_context_overflow", "stated_limit"]
