"""A thread a LangGraph server runs, read and written over the server's API.

A served thread's checkpoints live in the server (its own checkpointer, in memory or in
its database), so neither the agent module nor a state dir can read them: `/context`
found "no checkpoints" and `compact()` had no checkpointer to write through. The server's
threads API has both: `GET /threads/{id}/state` returns every state key — the messages
and ctxwarden's private keys (folds, the clearing boundary) — as JSON, and
`POST /threads/{id}/state` applies an update as the graph's last node would. So a source
that is a `RemoteGraph` or a langgraph-sdk client (sync or async) is read and written
here, the messages turned back into message objects; `context_report`, `compact` and
their async twins accept one wherever they accept an agent.

The trace and the offloaded files are not behind the API: they are where the deployment
keeps them (a folder on the server's machine, a Postgres), so the caller names them
(`trace=`, `backend=`), as for any agent not built by `create_context_agent`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from ctxwarden.errors import CtxwardenError, UnknownThreadError

SERVED_SCHEMES = ("http://", "https://")
"""URL schemes of a LangGraph server (a `postgresql://` URL names a database instead)."""


def is_served(source: Any) -> bool:
    """Whether `source` reaches a LangGraph server: a `RemoteGraph` or a langgraph-sdk client."""
    return isinstance(source, RemoteGraph | SyncLangGraphClient | LangGraphClient)


def is_server_url(url: str | None) -> bool:
    """Whether `url` is a LangGraph server's address (`http://` or `https://`)."""
    return url is not None and url.startswith(SERVED_SCHEMES)


def served_client(url: str) -> SyncLangGraphClient:
    """A langgraph-sdk client for the server at `url` (what `ctxwarden context --url http://...` reads with)."""
    if not is_server_url(url):
        raise CtxwardenError(f"{url!r} is not a LangGraph server address. Fix: pass http://HOST:PORT.")
    return get_sync_client(url=url)


def _thread(config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise UnknownThreadError("the config names no thread. Fix: pass {'configurable': {'thread_id': '<thread>'}}.")
    return str(thread)


def served_messages(raw: Any) -> list[BaseMessage]:
    """Messages as the server's JSON gives them (`{"type": "ai", "content": ...}`), as message objects."""
    if not isinstance(raw, list):
        return []
    return list(messages_from_dict([{"type": item["type"], "data": item} for item in raw]))


def _values(state: Any, thread: str, where: str) -> dict[str, Any]:
    values = getattr(state, "values", None) if not isinstance(state, Mapping) else state.get("values")
    messages = served_messages(values.get("messages")) if isinstance(values, Mapping) else []
    if not messages:
        raise UnknownThreadError(
            f"thread {thread!r} has no messages on the server at {where}. Fix: pass the id of a thread that has run "
            "(client.threads.search() lists them)."
        )
    return {**dict(values), "messages": messages}  # type: ignore[arg-type]


def _where(source: Any) -> str:
    client = source.sync_client or source.client if isinstance(source, RemoteGraph) else source
    http = getattr(client, "http", None)
    inner = getattr(http, "client", None)
    return str(getattr(inner, "base_url", "") or "the server")


def _not_found(thread: str, source: Any, refused: Exception) -> UnknownThreadError:
    why = f" ({getattr(refused, 'message', None) or refused})" if isinstance(refused, UnprocessableEntityError) else ""
    return UnknownThreadError(
        f"thread {thread!r} is not on the server at {_where(source)}{why}. Fix: pass the id of one of its threads "
        "(client.threads.search() lists them)."
    )


def served_values(source: Any, config: RunnableConfig) -> dict[str, Any]:
    """The state values of the served thread in `config`: its messages (as objects) and every other key."""
    thread = _thread(config)
    try:
        if isinstance(source, RemoteGraph):
            state: Any = source.get_state(config)
        elif isinstance(source, SyncLangGraphClient):
            state = source.threads.get_state(thread)
        else:  # an async client: not from inside a running loop (use the async twin there)
            return asyncio.run(aserved_values(source, config))
    except (NotFoundError, UnprocessableEntityError) as refused:  # no such thread, or not a thread id at all
        raise _not_found(thread, source, refused) from None
    return _values(state, thread, _where(source))


async def aserved_values(source: Any, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `served_values`."""
    thread = _thread(config)
    try:
        if isinstance(source, RemoteGraph):
            state: Any = await source.aget_state(config)
        elif isinstance(source, LangGraphClient):
            state = await source.threads.get_state(thread)
        else:
            state = await asyncio.to_thread(source.threads.get_state, thread)
    except (NotFoundError, UnprocessableEntityError) as refused:  # no such thread, or not a thread id at all
        raise _not_found(thread, source, refused) from None
    return _values(state, thread, _where(source))


def write_served(source: Any, config: RunnableConfig, update: Mapping[str, Any]) -> None:
    """Apply `update` to the served thread as its last node would: every other key and pending step is kept."""
    thread = _thread(config)
    if isinstance(source, RemoteGraph):
        source.update_state(config, dict(update))
    elif isinstance(source, SyncLangGraphClient):
        source.threads.update_state(thread, dict(update))
    else:
        asyncio.run(awrite_served(source, config, update))


async def awrite_served(source: Any, config: RunnableConfig, update: Mapping[str, Any]) -> None:
    """Async twin of `write_served`."""
    thread = _thread(config)
    if isinstance(source, RemoteGraph):
        await source.aupdate_state(config, dict(update))
    elif isinstance(source, LangGraphClient):
        await source.threads.update_state(thread, dict(update))
    else:
        await asyncio.to_thread(source.threads.update_state, thread, dict(update))


__all__ = [
    "SERVED_SCHEMES",
    "aserved_values",
    "awrite_served",
    "is_served",
    "is_server_url",
    "served_client",
    "served_messages",
    "served_values",
    "write_served",
]
