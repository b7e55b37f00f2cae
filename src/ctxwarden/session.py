"""A session: one checkpointed thread under a state dir, with the whole stack around it.

It owns the state dir — the SQLite checkpoints, the trace, the filesystem backend —
and keeps them across model switches: `switch_model()` rebuilds the agent on the same
thread, so the conversation carries over and every threshold follows the new model's
window (a switch to a smaller window clears and folds before the next call).
Reopening the same state dir and thread id, in this process or another, resumes the
thread.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from ctxwarden.core.identity import identified
from ctxwarden.core.io import Steps, arun, method, run
from ctxwarden.core.layout import CHECKPOINTS_FILE, DEFAULT_STATE_DIR, TRACE_FILE
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import DEFAULT_POLICY, ContextPolicy
from ctxwarden.curate.fork import Unit, carried_values, carry_offloaded, list_units, seed_messages
from ctxwarden.curate.lineage import fork_state
from ctxwarden.errors import ForkError
from ctxwarden.fold.state import FoldRecord
from ctxwarden.report import ContextReport, acontext_report, context_report
from ctxwarden.stack.build import create_context_agent
from ctxwarden.stack.deletion import DeletedThread, adelete_thread, delete_thread
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.thread.checkpoints import SqliteCheckpointer, open_checkpointer
from ctxwarden.thread.compaction import acompact, compact
from ctxwarden.thread.write import seed_thread
from ctxwarden.trace.recorder import TraceRecorder
from ctxwarden.trace.store import TraceStore

DEFAULT_THREAD = "main"


class Session:
    """Runs one thread of a context-managed deep agent; see the module docstring."""

    def __init__(
        self,
        model: Any,
        tools: Sequence[Any] = (),
        *,
        state_dir: str | Path = DEFAULT_STATE_DIR,
        thread_id: str = DEFAULT_THREAD,
        policy: ContextPolicy = DEFAULT_POLICY,
        summarizer: Any = None,
        **agent_kwargs: Any,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.thread_id = thread_id
        self.policy = policy
        self.summarizer = summarizer
        self.tools = list(tools)
        self.agent_kwargs = agent_kwargs
        self.checkpointer: SqliteCheckpointer = open_checkpointer(self.state_dir / CHECKPOINTS_FILE)
        self.trace = TraceStore(self.state_dir / TRACE_FILE)
        self.recorder = TraceRecorder(self.trace)
        self.backend = ThreadIsolatedBackend(FilesystemBackend(root_dir=self.state_dir, virtual_mode=True))
        self.meter = TokenMeter()
        self.model = model
        self.agent = self._build(model)

    # --- lifecycle --------------------------------------------------------------
    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id}}

    def _build(self, model: Any) -> Any:
        return create_context_agent(
            model,
            self.tools,
            state_dir=self.state_dir,
            policy=self.policy,
            meter=self.meter,
            trace=self.recorder,
            summarizer=self.summarizer,
            checkpointer=self.checkpointer,
            backend=self.backend,
            **self.agent_kwargs,
        )

    def switch_model(self, model: Any) -> None:
        """Continue the same thread with `model`; thresholds follow its window from the next call on."""
        self.model = model
        self.agent = self._build(model)

    def close(self) -> None:
        self.checkpointer.conn.close()
        self.trace.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.close()

    # --- running ----------------------------------------------------------------
    def invoke(self, message: str | BaseMessage | dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Send one user message; returns the thread's state values after the agent's turn.

        Every step is checkpointed before the next starts (`durability="sync"` unless given):
        a process killed mid-turn resumes from its last step without running any step twice.
        """
        return dict(self.agent.invoke(_input(message), self.config, **_durable(kwargs)))

    async def ainvoke(self, message: str | BaseMessage | dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return dict(await self.agent.ainvoke(_input(message), self.config, **_durable(kwargs)))

    def stream(self, message: str | BaseMessage | dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        """Stream the agent's turn (`stream_mode` and the rest as for `CompiledStateGraph.stream`)."""
        yield from self.agent.stream(_input(message), self.config, **_durable(kwargs))

    async def astream(self, message: str | BaseMessage | dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        async for chunk in self.agent.astream(_input(message), self.config, **_durable(kwargs)):
            yield chunk

    @property
    def interrupted(self) -> bool:
        """Whether the last turn was left unfinished (e.g. its process was killed): `resume()` finishes it."""
        return _unfinished(self.agent.get_state(self.config))

    def resume(self, **kwargs: Any) -> dict[str, Any]:
        """Finish the turn a killed or failed run left, from its last checkpoint; returns the state values.

        Sending a new message instead would leave the unfinished tool calls cancelled.
        With nothing unfinished it runs nothing.
        """
        return run(self._resuming(kwargs))

    async def aresume(self, **kwargs: Any) -> dict[str, Any]:
        return await arun(self._resuming(kwargs))

    def _resuming(self, kwargs: dict[str, Any]) -> Steps[dict[str, Any]]:
        """The core of `resume`/`aresume` (see `ctxwarden.core.io`)."""
        state = yield method(self.agent, "get_state", self.config)
        if not _unfinished(state):
            return dict(state.values)
        return dict((yield method(self.agent, "invoke", None, self.config, **_durable(kwargs))))

    @property
    def messages(self) -> list[BaseMessage]:
        """The thread's checkpointed messages (every one, as recorded)."""
        return list(self.agent.get_state(self.config).values.get("messages", []))

    # --- /context, /compact, delete, fork ---------------------------------------------------
    def context(self) -> ContextReport:
        """The /context report of this thread, against the current model's window."""
        return context_report(self.agent, self.config, trace=self.trace, policy=self.policy, model=self.model)

    async def acontext(self) -> ContextReport:
        return await acontext_report(self.agent, self.config, trace=self.trace, policy=self.policy, model=self.model)

    def compact(self, instructions: str | None = None) -> FoldRecord | None:
        """Fold the thread now (keeping the last step), with optional focus instructions for the summary."""
        return compact(self.agent, self.config, instructions, **self._folding())

    async def acompact(self, instructions: str | None = None) -> FoldRecord | None:
        """Async twin of `compact`."""
        return await acompact(self.agent, self.config, instructions, **self._folding())

    def delete(self) -> DeletedThread:
        """Delete this thread: its offloaded files, then its checkpoints (`ctxwarden.delete_thread`). The session
        stays open: its next message starts a new thread under the same id, which sees nothing of this one."""
        return delete_thread(self.checkpointer, self.config, backend=self.backend, trace=self.recorder)

    async def adelete(self) -> DeletedThread:
        """Async twin of `delete`."""
        return await adelete_thread(self.checkpointer, self.config, backend=self.backend, trace=self.recorder)

    def _folding(self) -> dict[str, Any]:
        """What a fold on demand uses: this session's parts, and its summarizer (else its current model)."""
        summarizer = self.summarizer if self.summarizer is not None else self.model
        return {
            "summarizer": summarizer,
            "backend": self.backend,
            "trace": self.recorder,
            "policy": self.policy,
            "meter": self.meter,
        }

    def units(self) -> list[Unit]:
        """The thread's turns and folds to fork from, numbered in conversation order."""
        values = self.agent.get_state(self.config).values
        return list_units(identified(values.get("messages", [])), values, self.meter)

    def fork(self, units: Sequence[int], *, thread_id: str | None = None, model: Any = None) -> Session:
        """A new session on a new thread seeded with the chosen units; this thread is left as it was.

        The fork also gets this thread's other state (todos, in-state files, a middleware's
        own keys) and copies of the offloaded files its seed names, so `recall` there returns
        the full originals; it records this thread as its parent, so `recall(query=...)` there
        also searches this thread, read-only.
        """
        snapshot = self.agent.get_state(self.config)
        values = snapshot.values
        seed = seed_messages(identified(values.get("messages", [])), values, units, self.thread_id)
        new_thread = thread_id or f"{self.thread_id}-fork-{uuid.uuid4().hex[:8]}"
        target: RunnableConfig = {"configurable": {"thread_id": new_thread}}
        if self.checkpointer.get_tuple(target) is not None:
            raise ForkError(f"thread {new_thread!r} already exists in {self.state_dir}. Fix: pick another thread_id.")
        seed = carry_offloaded(self.backend, seed, self.thread_id, new_thread)
        made_from = snapshot.config["configurable"].get("checkpoint_id")  # the parent is this thread while it holds it
        seeded = {**carried_values(values), **fork_state(self.thread_id, made_from), "messages": seed}
        seed_thread(self.checkpointer, target, seeded)
        return Session(
            model if model is not None else self.model,
            self.tools,
            state_dir=self.state_dir,
            thread_id=new_thread,
            policy=self.policy,
            summarizer=self.summarizer,
            **self.agent_kwargs,
        )


def _unfinished(state: Any) -> bool:
    """Steps are pending, or the thread does not end on a final answer.

    A checkpoint written in the background can be lost with its pending writes, so `next`
    alone may be empty while the last step still waits for its successor.
    """
    if state.next:
        return True
    messages = state.values.get("messages") or []
    last = messages[-1] if messages else None
    return last is not None and not (isinstance(last, AIMessage) and not last.tool_calls)


def _durable(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"durability": "sync", **kwargs}


def _input(message: str | BaseMessage | dict[str, Any]) -> dict[str, Any]:
    if isinstance(message, dict):
        return message
    return {"messages": [HumanMessage(message) if isinstance(message, str) else message]}


__all__ = ["DEFAULT_THREAD", "Session"]
