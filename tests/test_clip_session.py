"""On the demo's real session at 32k: every call fits, and every cleared or evicted byte comes back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, ToolMessage

from ctxwarden import DEFAULT_POLICY, ReplayChatModel, create_context_agent
from ctxwarden.clip import CLIP_STATE_KEY, make_recall_tool
from ctxwarden.clip.names import shown_id
from ctxwarden.clip.placeholders import RECALL_REFERENCE
from ctxwarden.clip.recoverability import check_outputs
from ctxwarden.clip.shown import last_view
from ctxwarden.core.stamp import METADATA_KEY
from ctxwarden.core.text import decode
from ctxwarden.replay import Recording, replay_tools
from ctxwarden.replay.driver import areplay_into, replay_into

WINDOW = 32_000


def _recall_all(tool: object, call_id: str, part: str, messages: list) -> str:
    text, number = "", 0
    while True:
        number += 1
        page = tool.invoke({"call_id": call_id, "part": part, "state": {"messages": messages}, "page": number})
        body, sep, note = page.rpartition("\n[ctxwarden: characters ")
        text += body if sep else page
        if not sep or "for the rest" not in note:
            return text


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_every_call_fits_and_every_placeholder_leads_back(
    shipped_recording: Recording, state_dir: Path, mode: str
) -> None:
    rec = shipped_recording
    model = ReplayChatModel(recording=rec, usage="received", profile={"max_input_tokens": WINDOW})
    agent = create_context_agent(model, replay_tools(rec), state_dir=state_dir, system_prompt=rec.system_prompt)
    config = {"configurable": {"thread_id": f"walk-{mode}"}}
    if mode == "sync":
        messages = replay_into(agent, rec, config)
        clip_state = agent.get_state(config).values[CLIP_STATE_KEY]
    else:
        messages = await areplay_into(agent, rec, config)
        clip_state = (await agent.aget_state(config)).values[CLIP_STATE_KEY]
    agent.checkpointer.conn.close()

    calls = [m for m in messages if isinstance(m, AIMessage)]
    assert len(calls) == len(rec.steps) + 1
    # what each call received, counted by the replayed model itself, stayed under the window
    assert max(m.usage_metadata["input_tokens"] for m in calls) < WINDOW
    assert max(m.response_metadata[METADATA_KEY]["input_tokens"] for m in calls) < WINDOW
    # the checkpointed thread kept every original result that was not evicted at arrival
    for message in messages:
        if isinstance(message, ToolMessage) and not message.response_metadata.get(METADATA_KEY, {}).get("evicted"):
            assert message.content == rec.outputs[message.tool_call_id]

    backend = FilesystemBackend(root_dir=state_dir, virtual_mode=True)
    recall = make_recall_tool(backend)
    view = last_view(messages, clip_state, DEFAULT_POLICY)
    walked_results = walked_args = evicted_files = 0
    for message in view:
        if isinstance(message, ToolMessage) and message.content != rec.outputs[message.tool_call_id]:
            refs = {m.group("id") for m in RECALL_REFERENCE.finditer(str(message.content))}
            assert shown_id(message.tool_call_id) in refs, message.content[:200]
            for ref in refs:  # what the placeholder names leads back to the exact original
                assert _recall_all(recall, ref, "result", messages) == rec.outputs[message.tool_call_id]
            walked_results += 1
            record = message.response_metadata.get(METADATA_KEY, {})
            if record.get("evicted"):
                path = record["path"]
                assert path in message.content
                on_disk = (state_dir / path.lstrip("/")).read_bytes()
                assert decode(on_disk) == rec.outputs[message.tool_call_id]
                evicted_files += 1
        if isinstance(message, AIMessage):
            original = {c["id"]: c["args"] for s in rec.steps for c in s.tool_calls}
            for call in message.tool_calls:
                if call["args"] != original[call["id"]]:
                    shown = " ".join(str(value) for value in call["args"].values())
                    handle = shown_id(call["id"])
                    assert f'recall(call_id="{handle}", part="args")' in shown
                    assert json.loads(_recall_all(recall, handle, "args", messages)) == original[call["id"]]
                    walked_args += 1
    assert walked_results >= 30
    assert walked_args >= 1
    assert evicted_files == 1
    assert check_outputs(view, messages, rec.outputs, backend).fraction == 1.0
