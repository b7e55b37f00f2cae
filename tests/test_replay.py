"""Replay of recorded sessions: loaders for both formats, exact outputs, and errors that name the place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import ReplayChatModel, ReplayMismatchError, TrajectoryFormatError, create_context_agent
from ctxwarden.core.gauge_note import note_message
from ctxwarden.replay import Recording, load_recording, parse_recording, replay_tools
from ctxwarden.replay.driver import areplay_into, replay_into
from ctxwarden.replay.model import CLOSING_TEXT, TURN_END_TEXT

OPENAI_SESSION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}},
            {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": '{"file": "a.txt"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
    {"role": "tool", "tool_call_id": "c2", "content": "hello"},
    {"role": "assistant", "content": "Two files; a.txt says hello."},
    {"role": "user", "content": "and b?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "cat", "arguments": '{"file": "b.txt"}'}}],
    },
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "bye"}]},
    {"role": "assistant", "content": "b.txt says bye."},
]


FEEDBACK_SESSION = [
    {"role": "user", "content": "fix it"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    {"role": "user", "content": "Tool call error: use exactly one tool call."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "b.txt"},
    {"role": "assistant", "content": "done"},
]
"""A harness answering a bad call with a user message: the replay ends the turn there."""


def _write(tmp_path: Path, data: object, name: str = "session.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_shipped_trajectory_loads_with_full_outputs(shipped_recording: Recording) -> None:
    rec = shipped_recording
    assert rec.instance_id == "sqlfluff__sqlfluff-1733"
    assert len(rec.turns) == 1
    assert len(rec.steps) == 80
    assert rec.tool_names == ("bash",)
    assert rec.system_prompt
    # raw_output, not the clipped text the original model saw: the largest is 110,817 characters
    assert max(len(text) for text in rec.outputs.values()) == 110_817
    first = rec.steps[0]
    assert first.usage_metadata is not None
    assert first.usage_metadata["input_tokens"] == 1742
    assert first.usage_metadata["input_token_details"]["cache_read"] == 320
    # the final submit call has no recorded result: it returns what the session submitted
    last_call = rec.steps[-1].tool_calls[0]["id"]
    assert rec.outputs[last_call] == rec.final_output


def test_every_shared_trajectory_loads(shared_trajectories: Path) -> None:
    files = sorted(shared_trajectories.rglob("*.traj.json"))
    assert files
    for path in files:
        rec = load_recording(path)
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert len(rec.steps) == sum(1 for m in raw["messages"] if m["role"] == "assistant"), path
        assert all(call["id"] in rec.outputs for step in rec.steps for call in step.tool_calls), path


def test_openai_message_list_loads_as_turns(tmp_path: Path) -> None:
    rec = load_recording(_write(tmp_path, OPENAI_SESSION))
    assert rec.system_prompt == "You are terse."
    assert [t.user.content for t in rec.turns] == ["list files", "and b?"]
    assert [len(t.steps) for t in rec.turns] == [2, 2]
    assert rec.tool_names == ("ls", "cat")
    assert rec.outputs == {"c1": "a.txt\nb.txt", "c2": "hello", "c3": "bye"}
    wrapped = load_recording(_write(tmp_path, {"messages": OPENAI_SESSION}, "wrapped.json"))
    assert wrapped.outputs == rec.outputs


def test_multi_turn_replay_through_a_langchain_agent(tmp_path: Path) -> None:
    rec = load_recording(_write(tmp_path, OPENAI_SESSION))
    model = ReplayChatModel(recording=rec, profile={"max_input_tokens": 8_000})
    agent = create_agent(model, replay_tools(rec), checkpointer=InMemorySaver())
    messages = replay_into(agent, rec, {"configurable": {"thread_id": "r"}})
    tool_outputs = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
    assert tool_outputs == {"c1": "a.txt\nb.txt", "c2": "hello", "c3": "bye"}
    assert [m.content for m in messages if isinstance(m, HumanMessage)] == ["list files", "and b?"]
    assert messages[-1].content == "b.txt says bye."
    assert model.finished


def test_a_user_message_after_a_tool_step_starts_a_new_turn(tmp_path: Path) -> None:
    """Harnesses answer a bad call with a user message: the replay ends the turn, the driver sends it."""
    rec = load_recording(_write(tmp_path, FEEDBACK_SESSION))
    model = ReplayChatModel(recording=rec, profile={"max_input_tokens": 8_000})
    agent = create_agent(model, replay_tools(rec), checkpointer=InMemorySaver())
    messages = replay_into(agent, rec, {"configurable": {"thread_id": "turns"}})
    assert [m.content for m in messages if isinstance(m, HumanMessage)] == [
        "fix it",
        "Tool call error: use exactly one tool call.",
    ]
    assert messages[-1].content == "done"
    assert model.finished


def test_reply_ids_make_a_replay_the_same_messages_every_time(tmp_path: Path) -> None:
    """Evicted results are keyed by the id of the message that called the tool: stable ids, stable paths."""
    rec = load_recording(_write(tmp_path, FEEDBACK_SESSION))
    runs = []
    for thread in ("first", "second"):
        model = ReplayChatModel(recording=rec, reply_ids=thread, profile={"max_input_tokens": 8_000})
        agent = create_agent(model, replay_tools(rec), checkpointer=InMemorySaver())
        runs.append([m.id for m in replay_into(agent, rec, {"configurable": {"thread_id": thread}}) if m.type == "ai"])
    # each step, and the message that ends the first turn where the harness answered with a user message
    assert runs[0] == ["first-0", "first-1-turn-end", "first-1", "first-2"]
    assert runs[1] == [i.replace("first", "second") for i in runs[0]]
    unnamed = ReplayChatModel(recording=rec).invoke([HumanMessage("fix it")])
    assert unnamed.id is not None
    assert unnamed.id.startswith("lc_run")


async def test_shipped_session_replays_exactly_through_the_stack(shipped_recording: Recording, state_dir: Path) -> None:
    rec = shipped_recording
    model = ReplayChatModel(recording=rec, usage="received", profile={"max_input_tokens": 128_000})
    agent = create_context_agent(model, replay_tools(rec), state_dir=state_dir, system_prompt=rec.system_prompt)
    calls: list[AIMessage] = []
    messages = await areplay_into(agent, rec, {"configurable": {"thread_id": "sqlfluff"}}, on_call=calls.append)
    agent.checkpointer.conn.close()
    assert len(calls) == len(rec.steps) + 1
    assert calls[-1].content == CLOSING_TEXT
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 80
    evicted = [m for m in tool_messages if m.content != rec.outputs[m.tool_call_id]]
    # a result too large for the window went to a file at arrival: the message names it, the file holds it all
    assert len(evicted) == 1
    for message in evicted:
        path = message.response_metadata["ctxwarden"]["path"]
        assert path.startswith(f"/large_tool_results/sqlfluff/{message.tool_call_id}-")  # keyed by the call too
        assert path in message.content
        assert (state_dir / path.lstrip("/")).read_text(encoding="utf-8") == rec.outputs[message.tool_call_id]
    # usage="received" reports what this replay sent, not what the original harness was billed
    ai = [m for m in messages if isinstance(m, AIMessage)]
    assert ai[0].usage_metadata["input_tokens"] != 1742
    assert ai[-2].usage_metadata["input_tokens"] > ai[0].usage_metadata["input_tokens"]


def test_recorded_usage_is_replayed_by_default(shipped_recording: Recording) -> None:
    model = ReplayChatModel(recording=shipped_recording)
    reply = model.invoke([HumanMessage("go")])
    assert reply.usage_metadata["input_tokens"] == 1742
    assert reply.tool_calls[0]["id"] == shipped_recording.steps[0].tool_calls[0]["id"]


def test_wrong_tool_results_name_the_step(shipped_recording: Recording) -> None:
    model = ReplayChatModel(recording=shipped_recording)
    first = model.invoke([HumanMessage("go")])
    wrong = ToolMessage("out", tool_call_id="not-a-recorded-call")
    with pytest.raises(ReplayMismatchError, match=r"step 1: expected the results of step 0's tool calls"):
        model.invoke([HumanMessage("go"), first, wrong])


def test_first_call_must_end_with_the_user_message(shipped_recording: Recording) -> None:
    model = ReplayChatModel(recording=shipped_recording)
    with pytest.raises(ReplayMismatchError, match="step 0"):
        model.invoke([AIMessage("hi")])


def test_calling_past_the_end_names_the_step(tmp_path: Path) -> None:
    rec = parse_recording([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    model = ReplayChatModel(recording=rec)
    model.invoke([HumanMessage("hi")])
    model.invoke([HumanMessage("hi"), AIMessage("hello"), HumanMessage("more")])  # the closing message
    with pytest.raises(ReplayMismatchError, match=r"step 2: the recording has 1 steps"):
        model.invoke([HumanMessage("again")])


def test_replay_tool_refuses_an_unknown_call_id(shipped_recording: Recording) -> None:
    (bash,) = replay_tools(shipped_recording)
    known = shipped_recording.steps[0].tool_calls[0]
    result = bash.invoke({"type": "tool_call", "name": "bash", "args": known["args"], "id": known["id"]})
    assert result.content == shipped_recording.outputs[known["id"]]
    with pytest.raises(ReplayMismatchError, match="'made-up'"):
        bash.invoke({"type": "tool_call", "name": "bash", "args": {"command": "ls"}, "id": "made-up"})


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", r"is not valid JSON \(.* at line 1"),
        (json.dumps({"trajectory_format": "other-9"}), "trajectory_format 'other-9' is not supported"),
        (json.dumps({"info": {}}), "has no 'messages' list"),
        (json.dumps("text"), "expected a JSON object or a list of messages, found str"),
        (
            json.dumps([{"role": "assistant", "content": "x"}]),
            "message 0: an assistant message before any user",
        ),
        (
            json.dumps([{"role": "user", "content": "x"}, {"role": "robot"}]),
            "message 1: unknown role 'robot'",
        ),
        (
            json.dumps([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "o"}]),
            "message 1: tool result for 'zz', which no earlier assistant message called",
        ),
        (
            json.dumps(
                [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}],
                    },
                ]
            ),
            "message 1: tool call 'a' has arguments that are not JSON",
        ),
        (
            json.dumps(
                [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "assistant", "content": "done"},
                ]
            ),
            "message 1 calls tool 'a', and no tool message answers it",
        ),
        (json.dumps([{"role": "system", "content": "s"}]), "has no user message"),
    ],
)
def test_malformed_files_name_the_file_and_the_problem(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TrajectoryFormatError, match=expected) as caught:
        load_recording(path)
    assert str(path) in str(caught.value)


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryFormatError, match="cannot be read"):
        load_recording(tmp_path / "missing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TrajectoryFormatError, match="is not UTF-8"):
        load_recording(binary)


def test_a_gauge_note_after_the_results_still_ends_the_turn(tmp_path: Path) -> None:
    """The gauge note is a user-role message riding after the answers: where the recording goes on with the user's
    message, the results of the last step still end the turn, note or not."""
    rec = load_recording(_write(tmp_path, FEEDBACK_SESSION))
    model = ReplayChatModel(recording=rec)
    first = model.invoke([HumanMessage("fix it")])
    result = ToolMessage("a.txt", tool_call_id="c1")
    note = note_message("[context 91% full]", "high")
    ended = model.invoke([HumanMessage("fix it"), first, result, note])
    assert ended.content == TURN_END_TEXT
