"""A provider that refuses a request past its limit, as providers say a prompt is too long."""

from __future__ import annotations

from typing import Any

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import BaseMessage
from pydantic import PrivateAttr

from ctxwarden.fold.summarize import is_fold_request
from ctxwarden.replay import ScriptedChatModel


class Refusing(ScriptedChatModel):
    """Refuses a request over `limit` tokens (counted roughly, by characters); notes every call's size, and what each
    of the agent's calls held (the same model writes the fold summaries)."""

    limit: int = 8_000
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _sizes: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        size = sum(len(str(m.content)) for m in messages) // 4
        self._sizes.append(size)
        if not is_fold_request(messages):
            self._seen.append(list(messages))
        if size > self.limit:
            raise ContextOverflowError(f"prompt is too long: {size} tokens > {self.limit} maximum")
        return super()._generate(messages, stop, run_manager, **kwargs)


__all__ = ["Refusing"]
