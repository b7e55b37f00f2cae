"""The per-call record stamped on each AI message, the token count each message carries, and how to read them.

Every model call's budget is written into the reply's `response_metadata["ctxwarden"]`,
so the checkpointed thread itself says, call by call, which model and window were used
and what was sent. The report, the plot and the demo read it from there.

Each reply and each tool result that passes through the stack also carries its own
token count (`response_metadata["ctxwarden_count"]`): a process that loads the thread
from the checkpoint — a new server worker, a restart, the next run of the thread — reads
the counts instead of tokenizing a million-token history again. A carried count names
the counter that made it and a cheap signature of the content (lengths only), so a count
is reused only by a meter that counts alike, and never for a message whose content was
replaced (a placeholder copied from it, another middleware's edit): those are recounted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

METADATA_KEY = "ctxwarden"
"""Key under which each AI message's `response_metadata` records its call's budget."""


def stamp_of(message: BaseMessage) -> dict[str, Any] | None:
    """The ctxwarden record of an AI message, or `None` when it has none."""
    if not isinstance(message, AIMessage):
        return None
    stamp = message.response_metadata.get(METADATA_KEY)
    return stamp if isinstance(stamp, dict) else None


RECENT = 500
"""How far back the per-call paths look for the previous call's stamp (it is almost always a few messages back)."""


def last_stamped(messages: Sequence[BaseMessage], *, limit: int | None = None) -> tuple[int, dict[str, Any]] | None:
    """Index and record of the last stamped AI message (among the last `limit` messages, when given)."""
    stop = -1 if limit is None else max(-1, len(messages) - 1 - limit)
    for index in range(len(messages) - 1, stop, -1):
        stamp = stamp_of(messages[index])
        if stamp is not None:
            return index, stamp
    return None


def stamps(messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
    """Records of every stamped AI message, in order."""
    return [s for s in (stamp_of(m) for m in messages) if s is not None]


STOCK_EVICTION_PREFIX = "Tool result too large, the result of this tool call"
"""How deepagents' own eviction (`FilesystemMiddleware`) begins the message it leaves behind.

deepagents marks an evicted result by nothing public but this wording, so it is pinned
to what its public middleware produces: `tests/test_deepagents_contract.py` evicts a
result through `FilesystemMiddleware.wrap_tool_call` and fails on a deepagents whose
wording no longer starts so (then update this, and `DEEPAGENTS_CHECKED`)."""

DEEPAGENTS_CHECKED = "0.7"
"""The deepagents release series whose eviction wording `STOCK_EVICTION_PREFIX` was checked against."""


def is_evicted(message: BaseMessage) -> bool:
    """Whether a tool result was replaced at arrival by a pointer to a file (by ctxwarden or deepagents)."""
    if not isinstance(message, ToolMessage):
        return False
    record = message.response_metadata.get(METADATA_KEY)
    if isinstance(record, dict) and record.get("evicted"):
        return True
    return isinstance(message.content, str) and message.content.startswith(STOCK_EVICTION_PREFIX)


COUNT_KEY = "ctxwarden_count"
"""Key under which a message's `response_metadata` carries its own token count."""


def content_signature(message: BaseMessage) -> list[int]:
    """A cheap fingerprint of what a message's count depends on: lengths, never the text itself.

    The content's length (and its text blocks' total length), the name's length, and per
    tool call its id's and name's lengths, how many arguments it has and their keys' and
    top-level values' total length. Computing it reads no text, so it costs the same for a
    short reply and a 2 MB tool result.
    """
    content = message.content
    if isinstance(content, str):
        signature = [len(content)]
    else:
        texts = 0
        for block in content:
            if isinstance(block, str):
                texts += len(block)
            elif isinstance(block, dict):
                texts += len(str(block.get("text") or "")) + len(block)
        signature = [-1 - len(content), texts]
    signature.append(len(message.name or ""))
    for call in message.tool_calls if isinstance(message, AIMessage) else ():  # getattr on others raises inside
        args: Any = call.get("args")  # a dict, unless a message was built without validation
        signature.append(len(str(call.get("id"))) + len(str(call.get("name"))))
        if isinstance(args, dict):
            signature.append(len(args))
            signature.append(sum(len(str(key)) + _shallow_size(value) for key, value in args.items()))
        else:
            signature.extend((-1, _shallow_size(args)))
    return signature


def _shallow_size(value: Any) -> int:
    if isinstance(value, (str, list, tuple, dict)):  # a tuple, not a union: nothing allocated per call
        return len(value)
    return len(repr(value))


def count_record(tokens: int, counter: str, message: BaseMessage, args: Sequence[int] | None = None) -> dict[str, Any]:
    """The carried-count record for `message`: `tokens` counted by `counter`, and its tool calls' argument tokens."""
    record: dict[str, Any] = {"tokens": tokens, "by": counter, "sig": content_signature(message)}
    if args is not None:
        record["args"] = list(args)
    return record


def unstamped(message: BaseMessage) -> BaseMessage:
    """`message` without the records only ctxwarden writes (its stamp or eviction record, and its carried count).

    A tool's result brings none of ctxwarden's: one it did bring (a message copied from a thread, or forged) would be
    trusted, a count that says 7 tokens for 50,000 keeping the output whole past the window, an eviction record
    naming a file the output was never written to."""
    metadata = message.response_metadata
    if METADATA_KEY not in metadata and COUNT_KEY not in metadata:
        return message
    kept = {key: value for key, value in metadata.items() if key not in (METADATA_KEY, COUNT_KEY)}
    return message.model_copy(update={"response_metadata": kept})


def carried(message: BaseMessage, counter: str) -> dict[str, Any] | None:
    """The count `message` carries, when `counter` made it and the content is the one counted."""
    record = message.response_metadata.get(COUNT_KEY)
    if not isinstance(record, dict) or record.get("by") != counter or not isinstance(record.get("tokens"), int):
        return None
    if record.get("sig") != content_signature(message):
        return None
    return record


__all__ = [
    "COUNT_KEY",
    "DEEPAGENTS_CHECKED",
    "METADATA_KEY",
    "RECENT",
    "STOCK_EVICTION_PREFIX",
    "carried",
    "content_signature",
    "count_record",
    "is_evicted",
    "last_stamped",
    "stamp_of",
    "stamps",
    "unstamped",
]
