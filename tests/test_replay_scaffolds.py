"""Loaders for other scaffolds: original SWE-agent `.traj` and OpenHands event histories.

The SWE-agent loader must give the same messages as the reference conversion the SWE-agent figures were measured on
(`fixtures/sweagent-small.reference-*.json`, its output on `fixtures/sweagent-small.traj`, one per demonstration place).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwarden.errors import TrajectoryFormatError
from ctxwarden.replay import load_recording, parse_recording
from ctxwarden.replay.recording import Recording

FIXTURES = Path(__file__).parent / "fixtures"


def _shape(recording: Recording) -> dict:
    return {
        "system": recording.system_prompt,
        "users": [turn.user.content for turn in recording.turns],
        "steps": [(s.content, [(c["name"], c["args"], c["id"]) for c in s.tool_calls]) for s in recording.steps],
        "outputs": dict(recording.outputs),
    }


@pytest.mark.parametrize("place", ["system", "user"])
def test_sweagent_traj_gives_the_reference_conversions_messages(place: str) -> None:
    ours = load_recording(FIXTURES / "sweagent-small.traj", demo_in=place)  # type: ignore[arg-type]
    reference = load_recording(FIXTURES / f"sweagent-small.reference-{place}.json")
    assert _shape(ours) == _shape(reference)
    assert ours.info["demonstration"]["in"] == place


def test_sweagent_demonstration_goes_where_asked_and_tools_are_its_commands() -> None:
    in_system = load_recording(FIXTURES / "sweagent-small.traj", demo_in="system")
    in_user = load_recording(FIXTURES / "sweagent-small.traj", demo_in="user")
    marker = "--- DEMONSTRATION ---"
    assert marker in (in_system.system_prompt or "")
    assert marker not in in_system.turns[0].user.content
    assert marker in in_user.turns[0].user.content
    assert marker not in (in_user.system_prompt or "")
    assert in_user.turns[0].user.content.index(marker) < in_user.turns[0].user.content.index("ISSUE:")
    # the step without an action is not replayed; shell syntax is `bash`
    assert in_system.tool_names == ("find_file", "open", "edit", "bash", "submit")
    assert len(in_system.steps) == 5
    assert in_system.outputs["call_001"].startswith("[File: /apache__dubbo/")  # the trajectory's, not the prompt's


def test_sweagent_bad_demo_place_is_named() -> None:
    data = json.loads((FIXTURES / "sweagent-small.traj").read_text())
    with pytest.raises(TrajectoryFormatError, match=r"demo_in='middle'.*'system' or 'user'"):
        parse_recording(data, demo_in="middle")  # type: ignore[arg-type]


def test_openhands_events_become_turns_with_the_agents_own_tools() -> None:
    recording = load_recording(FIXTURES / "openhands-events.json")
    assert (recording.system_prompt or "").startswith("You are OpenHands agent")
    assert [t.user.content for t in recording.turns] == ["Fix the failing test in astropy/io/fits/card.py"]
    assert recording.tool_names == ("execute_bash", "str_replace_editor", "finish")
    first, edit, finish = recording.steps
    assert first.content == "Find the float formatter."
    assert first.tool_calls[0]["args"] == {"command": "grep -n _format_float astropy/io/fits/card.py"}
    assert edit.tool_calls[0]["args"]["new_str"] == "str(value)"  # the arguments the model sent
    assert recording.outputs["toolu_01"].startswith("1300:def _format_float(value):")
    assert "has been edited" in recording.outputs["toolu_02"]
    assert recording.outputs[finish.tool_calls[0]["id"]] == ""  # nothing answered the closing call


def test_openhands_actions_of_one_response_share_one_assistant_message() -> None:
    events = json.loads((FIXTURES / "openhands-events.json").read_text())["history"]
    second = next(e for e in events if e.get("id") == 6)
    second["tool_call_metadata"]["model_response"]["id"] = "resp-1"  # the edit now came in the grep's response
    recording = parse_recording(events)
    assert [[c["name"] for c in s.tool_calls] for s in recording.steps] == [
        ["execute_bash", "str_replace_editor"],
        ["finish"],
    ]
