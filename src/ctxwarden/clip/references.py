"""What a `recall` reference names: a call id, `call id#call key` for a reused id, or the end of a long id.

Call ids come from the model or the provider, so any of them can look like another reference: an id that
ends like a call key (`c#0badf00d`), an id that is another call's keyed reference (`c1#<c1's key>`), the
same id in every reply (`call_0`). Each reading that names a result of the thread is weighed; a reference
that names two gets the unambiguous name of each, never one of them silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxwarden.clip.names import NO_ID, TAIL_MARK, call_key, recall_id, split_recall_id
from ctxwarden.core.identity import answered_call
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import text_of


def resolve(messages: Sequence[BaseMessage], reference: str) -> tuple[str, str | None] | str:
    """`(call id, call key or None)` that `reference` names, or why it names none.

    `reference` is a call id, `call id#call key`, or the end of a call id as a placeholder shows it (`…Sr5FeHu`, the
    mark optional): an id of the thread that is not the whole reference and ends with it is the one meant, when it is
    the only one."""
    call_id, key = split_recall_id(reference)
    ids = dict.fromkeys(
        str(c.get("id")) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    ) | dict.fromkeys(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    if key is not None and reference in ids:
        if not (call_id in ids and has_key(messages, call_id, key)):
            return reference, None  # a call id that merely ends like a call key (`c#0badf00d`): the whole id
        return _both(messages, reference, call_id, key)
    if call_id == NO_ID and "" in ids:  # an empty call id, as its file and placeholder name it
        if call_id not in ids or (key is not None and has_key(messages, "", key)):
            return "", key
        if key is None:  # and a call whose id is "no-id" itself: its results and the empty id's, each by its key
            keyed = [recall_id(NO_ID, k) for known in ("", NO_ID) for k, _m in answers(list(messages), known) if k]
            named = ", ".join(f'recall(call_id="{reference}")' for reference in keyed)
            return (
                f"[ctxwarden: {NO_ID!r} names the results of calls with an empty id and of a call with that id. "
                f"Name the one you mean: {named}.]"
            )
    tail = call_id.removeprefix(TAIL_MARK)
    if call_id in ids:
        longer = [known for known in ids if known != call_id and tail and known.endswith(tail)]
        if key is None and call_id.startswith(TAIL_MARK) and longer:  # an id spelled as another's end is shown
            return _spelled_as_end(messages, call_id, longer)
        return call_id, key
    found = [known for known in ids if tail and known.endswith(tail)]
    if len(found) > 1:
        return (
            f"[ctxwarden: {len(found)} calls of this thread have ids ending with {tail!r}: "
            f"{', '.join(repr(known) for known in found)}. Name the one you mean by its whole id.]"
        )
    if not found and tail and key is None:  # the end of a reused id as the view named it, `<id>#<call key>`
        ends = [(known, k) for known, k in _keyed_names(messages) if recall_id(known, k).endswith(tail)]
        if len(ends) == 1:
            return ends[0]
    return (found[0] if found else call_id), key


def _keyed_names(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """`(call id, call key)` of every call of the thread whose id another call has too: the view names it
    `<id>#<key>` (`core.identity`), and a placeholder shows the end of that."""
    calls = [
        (str(c.get("id")), call_key(m.id, i))
        for m in messages
        if isinstance(m, AIMessage)
        for i, c in enumerate(m.tool_calls)
    ]
    uses = Counter(call_id for call_id, _key in calls)
    recorded = [(known, k) for known in uses for k, _m in answers(list(messages), known) if k]  # twins by output
    return list(dict.fromkeys([*((i, k) for i, k in calls if uses[i] > 1), *recorded]))


def _spelled_as_end(messages: Sequence[BaseMessage], call_id: str, longer: list[str]) -> str:
    """The answer to a reference that is a call's whole id and the end of another's as a placeholder shows it
    (`…35lq9XYZ`): the name of each that is not ambiguous, never one of them silently."""
    own = [recall_id(call_id, k) for k, _m in answers(list(messages), call_id) if k] or [call_id]
    named = [f'recall(call_id="{name}")' for name in (*own, *longer)]
    return (
        f"[ctxwarden: {call_id!r} is the id of a call and the end of the id of another: "
        f"{', '.join(repr(known) for known in longer)}. Name the one you mean: {'; '.join(named)}.]"
    )


def _both(messages: Sequence[BaseMessage], reference: str, call_id: str, key: str) -> tuple[str, str | None] | str:
    """What `reference` names when it is both a call id of the thread and `call_id` with its key `key`: the way to
    name each that is not ambiguous. When `call_id` has other results too, `reference` is the only name of its result
    keyed `key` (as its eviction marker writes it), so that reading is taken; the call whose id it is is named by its
    own key then (`<reference>#<its key>`), as its eviction marker writes it."""
    own = [k for k, _m in answers(list(messages), reference) if k is not None]
    other = f'recall(call_id="{recall_id(reference, own[0])}")' if len(set(own)) == 1 else "recall(query=...)"
    if len(answers(list(messages), call_id)) > 1:
        return call_id, key
    return (
        f"[ctxwarden: {reference!r} names two tool results: the call whose id it is, {other}, and the call "
        f'{call_id!r} (its key is {key}), recall(call_id="{call_id}"). Name the one you mean.]'
    )


def has_key(messages: Sequence[BaseMessage], call_id: str, key: str) -> bool:
    """Whether a call of the thread with id `call_id` has the call key `key`."""
    return any(k == key for k, _m in answers(list(messages), call_id))


def answers(messages: list[BaseMessage], call_id: str) -> list[tuple[str | None, ToolMessage]]:
    """Every result of `call_id` in the thread, each with the call key of the call it answers, in order.

    A call id can be reused (see `ctxwarden.clip.names`), so this can be more than one.
    """
    waiting: list[tuple[int, str]] = []
    found: list[tuple[str | None, ToolMessage]] = []
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            waiting += [
                (index, call_key(message.id, i)) for i, c in enumerate(message.tool_calls) if c.get("id") == call_id
            ]
        elif isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            in_order = answered_call(waiting) if waiting else None  # the newest asking message's, as the view pairs
            record = message.response_metadata.get(METADATA_KEY) or {}
            recorded = record.get("key") if isinstance(record, dict) and record.get("evicted") else None
            found.append((recorded or in_order, message))  # an evicted output's key is the one its file has
    return found


def choose(
    found: list[tuple[str | None, ToolMessage]], call_id: str, key: str | None
) -> tuple[ToolMessage | None, str | None]:
    """The one result meant, or why there is none (unknown id or key, or an ambiguous bare id)."""
    if key is not None:
        found = [(k, m) for k, m in found if k == key]
    if len(found) == 1 or (key is not None and len({text_of(m) for _k, m in found}) == 1):
        return found[0][1], None  # (twin calls that returned the same text share their key)
    if not found:
        known = "this call id and key" if key else "this call id"
        named = recall_id(call_id, key)
        return None, f"[ctxwarden: this thread has no tool result with {known} ({named!r}); check the placeholder.]"
    choices = "; ".join(
        f'recall(call_id="{recall_id(call_id, k)}") for the one starting {_first_line(m)!r}' for k, m in found
    )
    return None, (
        f"[ctxwarden: {len(found)} tool results in this thread share call id {call_id!r} (the id was reused). "
        f"Name the one you mean: {choices}.]"
    )


def _first_line(message: ToolMessage) -> str:
    line = next((line for line in text_of(message).splitlines() if line.strip()), "")
    return line[:60]


__all__ = ["answers", "choose", "has_key", "resolve"]
