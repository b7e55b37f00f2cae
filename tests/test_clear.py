"""Clearing at 60%: one batch down to 40%, newest results kept, boundary remembered, nothing lost."""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import ContextPolicy, TokenMeter, context_middleware
from ctxwarden.clip import CLIP_STATE_KEY, Boundary, ClearLayer, make_recall_tool
from ctxwarden.clip.clear import NO_MASK
from ctxwarden.clip.placeholders import args_placeholder
from ctxwarden.core.counters import default_counter
from ctxwarden.core.gist import GAP
from ctxwarden.core.layers import CallBudget
from ctxwarden.core.meter import Measurement
from ctxwarden.core.window import Window
from ctxwarden.replay import Recording, ReplayChatModel, replay_tools, scripted_model
from ctxwarden.replay.driver import replay_into
from ctxwarden.trace import TraceStore
from views import Views

WINDOW = 10_000
PAGE = "word " * 480  # about 500 tokens: under the eviction threshold, large enough to matter


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: {PAGE}"


@tool
def attempt_log(note: str) -> str:
    """Record an attempt (never cleared)."""
    return f"attempt: {note} " + "detail " * 300


@tool
def write_file(file_path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {len(content)} chars to {file_path}"


def _step(name: str, args: dict, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _agent(replies: list, tools: list, policy: ContextPolicy, trace: Path | None = None) -> tuple[Any, Views]:
    views = Views()
    model = scripted_model(replies, window=WINDOW)
    middleware = [*context_middleware(policy=policy, trace=trace), views]
    return create_agent(model, tools, middleware=middleware, checkpointer=InMemorySaver()), views


def _dump(messages: list) -> list[str]:
    return [
        json.dumps([m.type, m.content, getattr(m, "tool_calls", None)], sort_keys=True, default=str) for m in messages
    ]


def test_one_batch_down_to_forty_percent_newest_kept_raw_state_untouched(tmp_path: Path) -> None:
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(16)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch], ContextPolicy(), trace=tmp_path / "trace.sqlite")
    config = {"configurable": {"thread_id": "clear"}}
    out = agent.invoke({"messages": [HumanMessage("read everything")]}, config)

    batches = TraceStore(tmp_path / "trace.sqlite").events(kind="context_clear")
    assert batches
    for batch in batches:
        assert batch.payload["tokens_before"] > 0.60 * WINDOW
        assert batch.payload["tokens_after"] <= 0.40 * WINDOW
    # every call stayed under the window, and each kept its newest results verbatim
    for view in views.views:
        results = [m for m in view if isinstance(m, ToolMessage)]
        assert all(m.content.startswith("page ") for m in results[-ContextPolicy().keep_tool_results :])
    stamps = [m.response_metadata["ctxwarden"] for m in out["messages"] if isinstance(m, AIMessage)]
    assert max(s["input_tokens"] for s in stamps) <= 0.60 * WINDOW + 600  # at most one result past the trigger
    # the checkpointed thread still holds every original result; the boundary is private state
    assert all(m.content.startswith("page ") for m in out["messages"] if isinstance(m, ToolMessage))
    state = agent.get_state(config).values
    assert state[CLIP_STATE_KEY]["results"][:3] == ["f0", "f1", "f2"]


def test_placeholders_name_tool_id_size_and_the_way_back() -> None:
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(16)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch], ContextPolicy())
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "p"}})
    cleared = [m for m in views.views[-1] if isinstance(m, ToolMessage) and not m.content.startswith("page ")]
    assert cleared
    first = cleared[0]
    assert first.content.startswith("[cleared, ")
    assert f'recall(call_id="{first.tool_call_id}")' in first.content
    assert "tokens" in first.content
    assert first.tool_call_id == "f0"


def test_between_batches_every_call_extends_the_previous_one_byte_for_byte(tmp_path: Path) -> None:
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(30)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch], ContextPolicy(), trace=tmp_path / "t.sqlite")
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "cache"}})
    batch_calls = {
        i
        for i, m in enumerate(m for m in out["messages"] if isinstance(m, AIMessage))
        if "context_clear" in m.response_metadata["ctxwarden"]["events"]
    }
    breaks = set()
    for i in range(1, len(views.views)):
        before, after = _dump(views.views[i - 1]), _dump(views.views[i])
        if after[: len(before)] != before:
            breaks.add(i)
    assert breaks == batch_calls
    assert len(batch_calls) <= 4


def test_excluded_tools_are_never_cleared() -> None:
    replies = []
    for i in range(10):
        replies.append(_step("attempt_log", {"note": f"try {i}"}, f"a{i}"))
        replies.append(_step("fetch", {"page": i}, f"f{i}"))
    replies.append(AIMessage("done"))
    agent, views = _agent(replies, [fetch, attempt_log], ContextPolicy(clear_exclude_tools=("attempt_log",)))
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "x"}})
    final = views.views[-1]
    assert all(
        m.content.startswith("attempt:") for m in final if isinstance(m, ToolMessage) and m.name == "attempt_log"
    )
    assert any(m.content.startswith("[cleared, ") for m in final if isinstance(m, ToolMessage))


def test_old_large_arguments_are_clipped_and_recalled_exactly() -> None:
    body = "def f():\n    return 1\n" * 150  # a whole file in the call's arguments
    replies = [_step("write_file", {"file_path": f"/m{i}.py", "content": body + str(i)}, f"w{i}") for i in range(12)]
    agent, views = _agent([*replies, AIMessage("done")], [write_file], ContextPolicy())
    out = agent.invoke({"messages": [HumanMessage("write")]}, {"configurable": {"thread_id": "args"}})
    final = views.views[-1]
    callers = [m for m in final if isinstance(m, AIMessage) and m.tool_calls]
    clipped = [m for m in callers if str(m.tool_calls[0]["args"].get("content", "")).startswith("[clipped")]
    assert clipped
    for message in callers[-ContextPolicy().keep_tool_results :]:  # the newest calls keep their arguments
        assert message.tool_calls[0]["args"]["content"].startswith("def f()")
    for message in clipped:  # ids, names and the other arguments stay valid
        call = message.tool_calls[0]
        assert call["name"] == "write_file"
        assert call["args"]["file_path"].startswith("/m")
        original = next(
            c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls if c["id"] == call["id"]
        )
        recalled = make_recall_tool(None).invoke(
            {"call_id": call["id"], "part": "args", "state": {"messages": out["messages"]}, "limit": 50_000}
        )
        assert json.loads(recalled) == original["args"]


@tool
def run(command: str) -> str:
    """Run a shell command."""
    seed = zlib.crc32(command.encode())
    return f"ran {command.splitlines()[0]}\n" + " ".join(f"w{seed}_{k}" for k in range(120))  # nothing repeated


def test_a_script_sent_as_a_command_is_clipped_and_a_one_line_command_is_not() -> None:
    script = "cat > check.py << 'EOF'\n" + "".join(f"print(value_{i} + offset_{i})\n" for i in range(12)) + "EOF"
    scripts_sent = {f"r{i}": f"{script}\n# {i}" for i in range(1, 14, 2)}
    short = "grep -n needle src/module.py"
    counter = default_counter()
    assert 64 <= counter(script) < 200
    assert counter(short) < 64
    replies = [_step("run", {"command": scripts_sent.get(f"r{i}", f"{short} {i}")}, f"r{i}") for i in range(14)]
    agent, views = _agent([*replies, AIMessage("done")], [run], ContextPolicy())
    out = agent.invoke({"messages": [HumanMessage("check")]}, {"configurable": {"thread_id": "commands"}})
    final = views.views[-1]
    cleared = {m.tool_call_id for m in final if isinstance(m, ToolMessage) and m.content.startswith("[cleared")}
    callers = [m for m in final if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["id"] in cleared]
    scripts = [m.tool_calls[0] for m in callers if m.tool_calls[0]["args"]["command"].startswith("[clipped ")]
    commands = [m.tool_calls[0] for m in callers if not int(m.tool_calls[0]["id"][1:]) % 2]
    assert scripts
    assert commands
    for call in scripts:  # the pointer and the line naming the file it writes
        assert int(call["id"][1:]) % 2
        assert "cat > check.py << 'EOF'" in call["args"]["command"]
        assert "print(value_3" not in call["args"]["command"]
        recalled = make_recall_tool(None).invoke(
            {"call_id": call["id"], "part": "args", "state": {"messages": out["messages"]}, "limit": 50_000}
        )
        assert json.loads(recalled) == {"command": scripts_sent[call["id"]]}
    for call in commands:  # what each result came from stays in view
        assert call["args"]["command"].startswith(short)


@tool
def edit_file(file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    """Replace a string in a file."""
    seed = zlib.crc32(new_string.encode())
    return f"edited {file_path}\n" + " ".join(f"w{seed}_{k}" for k in range(120))


def test_an_edit_clipped_keeps_its_path_in_view() -> None:
    def edit(i: int) -> dict:
        old = f"    return compute_total(items, discount={i}, currency='EUR', rounding=ROUND_HALF_EVEN)  # {i}"
        return {"file_path": f"/src/pricing_{i}.py", "old_string": old, "new_string": old.replace("EUR", "USD")}

    edits = {f"e{i}": edit(i) for i in range(12)}
    assert all(len(v) < 200 for args in edits.values() for v in map(str, args.values()))  # no value large alone
    agent, views = _agent(
        [*(_step("edit_file", a, i) for i, a in edits.items()), AIMessage("ok")], [edit_file], ContextPolicy()
    )
    out = agent.invoke({"messages": [HumanMessage("edit")]}, {"configurable": {"thread_id": "edits"}})
    clipped = [
        m.tool_calls[0]
        for m in views.views[-1]
        if isinstance(m, AIMessage) and m.tool_calls and "ctxwarden_clipped" in m.tool_calls[0]["args"]
    ]
    assert clipped
    for call in clipped:
        original = edits[call["id"]]
        assert call["args"]["file_path"] == original["file_path"]  # which file it edited stays in view
        assert "old_string" not in call["args"]
        assert "new_string" not in call["args"]
        assert call["args"]["ctxwarden_clipped"].startswith("[clipped ")
        recalled = make_recall_tool(None).invoke(
            {"call_id": call["id"], "part": "args", "state": {"messages": out["messages"]}, "limit": 50_000}
        )
        assert json.loads(recalled) == original


def test_small_arguments_clipped_together_keep_only_what_names_the_call_and_our_pointer_wins() -> None:
    forged = {"ctxwarden_clipped": "[clipped 3 chars: nothing here]", "file_path": "/a.py", "body": "x" * 150}
    many_numbers = {f"n{i}": i for i in range(60)}
    call = AIMessage(
        "", tool_calls=[{"name": "t", "args": forged, "id": "f1"}, {"name": "t", "args": many_numbers, "id": "f2"}]
    )
    first, second = args_placeholder(call, {"f1", "f2"}).tool_calls
    assert first["args"]["file_path"] == "/a.py"
    assert "body" not in first["args"]
    assert first["args"]["ctxwarden_clipped"].startswith("[clipped ")
    assert 'recall(call_id="f1", part="args")' in first["args"]["ctxwarden_clipped"]
    assert set(second["args"]) == {"ctxwarden_clipped"}  # every value names something: nothing would be saved
    assert args_placeholder(call, {"f1", "f2"}).tool_calls == [first, second]  # the same bytes every time


def _masked(views: Views) -> list[list[str]]:
    """Per call, the results shown as placeholders."""
    return [
        [m.tool_call_id for m in v if isinstance(m, ToolMessage) and m.content.startswith("[cleared")]
        for v in views.views
    ]


def masking(window: int) -> ContextPolicy:
    """The cost-first mask (two turns kept) with clearing from 35% down to 20% and folding from 70%: the thresholds
    these scenarios are sized for, as whether masking pays depends on how far off clearing is."""
    return ContextPolicy.cost_first(2, window=window, clear_at=0.35, clear_to=0.20, summarize_at=0.70)


def test_cost_first_masks_old_results_while_clearing_is_far() -> None:
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(9)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch], masking(1_000_000))
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "cost"}})
    final = [m for m in views.views[-1] if isinstance(m, ToolMessage)]
    # results older than the newest 2 turns are masked, four turns at a time: each advance re-bills the turns after it,
    # so the prefix holds for four calls between advances
    assert [m.content.startswith("[cleared") for m in final] == [True] * 4 + [False] * 5
    assert [len(ids) for ids in _masked(views)] == [0] * 6 + [4] * 4


def test_cost_first_leaves_to_clearing_the_results_it_would_take_within_a_few_calls() -> None:
    """On a 16k window clearing starts at 5,600 tokens: masking four 500-token results there would cost a re-read of
    every turn after them and save a few cached reads before clearing hides them anyway."""
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(9)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch], masking(16_000))
    config = {"configurable": {"thread_id": "cost-small"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    assert _masked(views) == [[]] * 10
    assert "masked_turns" not in agent.get_state(config).values.get(CLIP_STATE_KEY, {})


@tool
def dump(part: int) -> str:
    """Dump a log part."""
    return f"log part {part}: " + "entry " * 2_800


def test_the_mask_keeps_its_reach_when_advancing_further_no_longer_pays() -> None:
    """Masking pays while the view is far from clearing; once large logs fill it, a further advance would not, and
    the results masked already stay masked, with the same bytes."""
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(7)]
    replies += [_step("dump", {"part": i}, f"d{i}") for i in range(5)] + [AIMessage("done")]
    agent, views = _agent(replies, [fetch, dump], masking(60_000))
    config = {"configurable": {"thread_id": "cost-held"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    masked = _masked(views)
    assert masked == [[]] * 6 + [["f0", "f1", "f2", "f3"]] * 7  # due to reach 8 turns from the 10th call: held at 4
    placeholders = [
        [m.content for m in v if isinstance(m, ToolMessage) and m.tool_call_id == "f0"] for v in views.views
    ]
    assert len({text for found in placeholders[6:] for text in found}) == 1
    state = agent.get_state(config).values[CLIP_STATE_KEY]
    assert state["masked_turns"] == 4


@tool
def listing(page: int) -> str:
    """List the handlers of a page: every line names new things."""
    return "\n".join(f"src/mod_{page}_{i}.py:{i * 7}: def handler_{page}_{i}(request_{page}_{i}):" for i in range(40))


@pytest.mark.parametrize(("window", "cap"), [(16_000, 48), (128_000, 150)])
def test_cost_first_masked_results_keep_a_gist_that_shrinks_with_the_window(window: int, cap: int) -> None:
    replies = [_step("listing", {"page": i}, f"l{i}") for i in range(9)] + [AIMessage("done")]
    agent, views = _agent(replies, [listing], masking(window))
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": f"gists-{window}"}})
    masked = [m for m in views.views[-1] if isinstance(m, ToolMessage) and m.content.startswith("[cleared")]
    assert len(masked) == 4
    counter = default_counter()
    for message in masked:
        original = listing.invoke({"page": int(message.tool_call_id[1:])}).splitlines()
        quoted = [line for line in message.content.splitlines()[1:] if line != GAP]
        assert quoted, "a masked result keeps some of its lines"
        assert all(line in original for line in quoted)  # whole lines of the original, verbatim
        assert sum(counter(line) + 1 for line in quoted) <= cap  # at most 0.3% of the window, 150 tokens at most
    assert f'recall(call_id="{masked[0].tool_call_id}")' in masked[0].content


def test_stale_reads_go_first_and_untouched_messages_are_not_copied() -> None:
    messages = [HumanMessage("go", id="h")]
    for i, (name, args) in enumerate(
        [
            ("fetch", {"page": 0}),
            ("read_file", {"file_path": "/a.py"}),
            ("fetch", {"page": 1}),
            ("write_file", {"file_path": "/a.py", "content": "x"}),
        ]
    ):
        messages.append(_step(name, args, f"c{i}"))
        messages.append(ToolMessage(PAGE, tool_call_id=f"c{i}", name=name, id=f"t{i}"))
    layer = ClearLayer(ContextPolicy(keep_tool_results=0), TokenMeter())
    candidates = layer._candidates(messages, Boundary(), NO_MASK)
    assert candidates[0][:2] == ("result", "c1")  # the read of /a.py, which was written afterwards
    view = layer.view(messages, Boundary(results=("c0",)), NO_MASK)
    assert view[2] is not messages[2]
    assert all(a is b for i, (a, b) in enumerate(zip(view, messages, strict=True)) if i != 2)


class Capturing(ReplayChatModel):
    """A replay model that keeps what each call received."""

    _received: list[list[str]] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        self._received.append(_dump(messages))  # the agent's calls only: a summary asked of it is refused
        return result


def _prefix_breaks(received: list[list[str]]) -> int:
    return sum(1 for a, b in itertools.pairwise(received) if b[: len(a)] != a)


def test_fewer_cache_misses_than_stock_context_editing_on_a_real_session(shipped_recording: Recording) -> None:
    window = 32_000
    ours = Capturing(recording=shipped_recording, usage="received", profile={"max_input_tokens": window})
    agent = create_agent(
        ours, replay_tools(shipped_recording), middleware=context_middleware(), checkpointer=InMemorySaver()
    )
    replay_into(agent, shipped_recording, {"configurable": {"thread_id": "ours"}})

    stock = Capturing(recording=shipped_recording, usage="received", profile={"max_input_tokens": window})
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=int(0.6 * window), keep=3)])
    agent = create_agent(stock, replay_tools(shipped_recording), middleware=[editing], checkpointer=InMemorySaver())
    replay_into(agent, shipped_recording, {"configurable": {"thread_id": "stock"}})

    ours_breaks, stock_breaks = _prefix_breaks(ours._received), _prefix_breaks(stock._received)
    assert ours_breaks <= 8
    assert stock_breaks >= 4 * ours_breaks
    print(f"prefix breaks over {len(ours._received)} calls: ctxwarden {ours_breaks}, stock {stock_breaks}")


@pytest.mark.parametrize("policy", [ContextPolicy(), ContextPolicy.cost_first()])
async def test_async_path_gives_the_same_views(policy: ContextPolicy) -> None:
    replies = [_step("fetch", {"page": i}, f"f{i}") for i in range(14)] + [AIMessage("done")]
    sync_agent, sync_views = _agent(list(replies), [fetch], policy)
    sync_agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "s"}})
    async_agent, async_views = _agent(list(replies), [fetch], policy)
    await async_agent.ainvoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "a"}})
    assert [_dump(v) for v in async_views.views] == [_dump(v) for v in sync_views.views]


def test_a_call_past_the_fold_threshold_with_nothing_left_to_clear_makes_no_batch() -> None:
    """Past the fold threshold a batch is made whatever it frees, but one that hides nothing is no batch: no event and
    no boundary written again (the stored boundary carries gists and counts a bare one would drop); the fold takes
    over."""
    messages = [
        HumanMessage("read both", id="h"),
        _step("fetch", {"page": 0}, "a"),
        ToolMessage(f"page 0: {PAGE}", tool_call_id="a", name="fetch"),
        _step("fetch", {"page": 1}, "b"),
        ToolMessage("page 1: " + "word " * 9_000, tool_call_id="b", name="fetch"),  # the newest: kept, past 85%
    ]
    state = {"messages": messages, CLIP_STATE_KEY: {"results": ["a"], "gists": {"a": [0]}}}
    request = ModelRequest(model=cast(Any, None), messages=cast(Any, messages), state=cast(Any, state))
    past_fold = CallBudget(Window(WINDOW, "override", "m"), Measurement(0, 0, 9_600, 1.0), ContextPolicy())
    edit = ClearLayer(ContextPolicy(), TokenMeter()).shape(request, past_fold)
    assert edit is not None  # the cleared result is shown as its placeholder
    assert edit.events == []
    assert edit.state is None
