"""Audio and video are counted by their length, as providers bill them, and kept exact wherever they go."""

from __future__ import annotations

import base64
import io
import math
import re
import struct
import wave
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxwarden import context_report, create_context_agent
from ctxwarden.core.gauge_note import is_note
from ctxwarden.core.media import (
    AUDIO_BYTES_PER_SECOND,
    AUDIO_TOKENS_PER_SECOND,
    LOWEST_BYTES_PER_SECOND,
    UNKNOWN_AUDIO_SECONDS,
    UNKNOWN_VIDEO_SECONDS,
    VIDEO_TOKENS_PER_SECOND,
    media_tokens,
)
from ctxwarden.core.meter import TokenMeter
from ctxwarden.replay import ScriptedChatModel
from views import Views


def mp3(seconds: float) -> bytes:
    """An MP3 of `seconds` (MPEG-1 Layer III frames at 128 kbit/s and 44.1 kHz, silent)."""
    frame = bytes([0xFF, 0xFB, 0x90, 0x00]) + bytes(413)
    return frame * math.ceil(seconds * 44_100 / 1_152)


def wav(seconds: float, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(bytes(2 * int(rate * seconds)))
    return out.getvalue()


def mp4(seconds: float) -> bytes:
    """An MP4 of `seconds` at 100 kbit/s: the boxes that say its length (`ftyp`, `moov` with its `mvhd`) and the bytes
    of its frames (`mdat`)."""

    def box(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + kind + body

    header = box(b"mvhd", bytes(4) + struct.pack(">IIII", 0, 0, 1_000, int(seconds * 1_000)) + bytes(80))
    frames = box(b"mdat", bytes(int(seconds * 12_500)))
    return box(b"ftyp", b"isom" + bytes(4) + b"isomiso2") + box(b"moov", header) + frames


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_audio_and_video_are_counted_by_their_length_in_every_block_shape() -> None:
    voice, clip = b64(mp3(120)), b64(mp4(7))
    audio_tokens = 120 * AUDIO_TOKENS_PER_SECOND
    shapes = {
        "langchain audio": ({"type": "audio", "base64": voice, "mime_type": "audio/mpeg"}, audio_tokens),
        "OpenAI input_audio": ({"type": "input_audio", "input_audio": {"data": voice, "format": "mp3"}}, audio_tokens),
        "Gemini media": ({"type": "media", "mime_type": "audio/mp3", "data": voice}, audio_tokens),
        "file of audio": ({"type": "file", "base64": voice, "mime_type": "audio/mpeg"}, audio_tokens),
        "WAV": ({"type": "audio", "base64": b64(wav(3)), "mime_type": "audio/wav"}, 3 * AUDIO_TOKENS_PER_SECOND),
        "video": ({"type": "video", "base64": clip, "mime_type": "video/mp4"}, 7 * VIDEO_TOKENS_PER_SECOND),
    }
    meter = TokenMeter()
    asked = HumanMessage("Transcribe this.")
    for name, (block, expected) in shapes.items():
        assert media_tokens(block) == pytest.approx(expected, rel=0.01), name  # an MP3's length is estimated
        with_clip = HumanMessage([{"type": "text", "text": "Transcribe this."}, block])
        # before: the base64 read as text, 330,000 tokens for the two minutes of silent MP3
        assert meter.message_tokens(with_clip) - meter.message_tokens(asked) == pytest.approx(expected, rel=0.01), name


def test_a_clip_whose_length_cannot_be_read_is_counted_long_rather_than_short() -> None:
    noise = b64(bytes(range(256)) * 80)  # 20,480 bytes of no known format
    assert media_tokens({"type": "audio", "base64": noise, "mime_type": "audio/ogg"}) == math.ceil(
        20_480 / AUDIO_BYTES_PER_SECOND * AUDIO_TOKENS_PER_SECOND
    )
    not_base64 = "@" * 40_000  # sent as it is, and billed somehow: never free
    assert media_tokens({"type": "audio", "base64": not_base64}) == 30_000 // AUDIO_BYTES_PER_SECOND * 32
    lying = bytearray(wav(1))  # a WAV header that says one sample a second: 16,000 seconds of audio in 32 KB
    lying[24:28] = struct.pack("<I", 1)
    assert media_tokens({"type": "audio", "base64": b64(bytes(lying))}) == math.ceil(
        len(lying) / LOWEST_BYTES_PER_SECOND * AUDIO_TOKENS_PER_SECOND
    )  # what its bytes can hold at 1 kbit/s, not nine hours
    by_url = {"type": "audio", "url": "https://example.com/call.mp3"}
    assert media_tokens(by_url) == UNKNOWN_AUDIO_SECONDS * AUDIO_TOKENS_PER_SECOND
    assert media_tokens({"type": "video", "file_id": "file-1"}) == UNKNOWN_VIDEO_SECONDS * VIDEO_TOKENS_PER_SECOND


def test_a_voice_note_of_two_minutes_is_answered_with_the_note_whole(tmp_path: Path) -> None:
    voice = b64(mp3(120))  # 1.9 MB: read as text, 330,000 tokens, past a 200k window
    model = ScriptedChatModel(messages=iter([AIMessage("It says hello.")]), profile={"max_input_tokens": 200_000})
    views = Views()  # after ctxwarden's middleware: what the model is sent
    agent = create_context_agent(model, [], state_dir=tmp_path, checkpointer=InMemorySaver(), middleware=[views])
    note = HumanMessage([{"type": "text", "text": "What does it say?"}, {"type": "audio", "base64": voice}])
    note.content[1]["mime_type"] = "audio/mpeg"
    out = agent.invoke({"messages": [note]}, {"configurable": {"thread_id": "voice"}})

    assert out["messages"][-1].content == "It says hello."
    assert not any(is_note(m) for m in views.views[0])  # before: "your context window is 167% full", and a fold due
    sent = [m for m in views.views[0] if isinstance(m, HumanMessage)]
    assert sent[-1].content[1]["base64"] == voice  # the model heard the note, byte for byte
    assert out["messages"][0].content == note.content  # and the thread keeps it exact
    report = context_report(agent, {"configurable": {"thread_id": "voice"}})
    assert report.to_dict()["categories"]["user messages"] == pytest.approx(120 * AUDIO_TOKENS_PER_SECOND, rel=0.01)


@tool
def record(seconds: int) -> list[dict[str, Any]]:
    """Record `seconds` of each of the 20 microphones."""
    # as `file` blocks: LangGraph's tool node turns a result's `audio` blocks into the text of their JSON
    clips = [{"type": "file", "base64": b64(mp3(seconds)), "mime_type": "audio/mpeg"} for _ in range(20)]
    return [{"type": "text", "text": f"20 clips of {seconds} s"}, *clips]


def test_a_result_of_more_clips_than_fit_keeps_what_fits_and_files_the_rest_as_audio(tmp_path: Path) -> None:
    listen = AIMessage("", tool_calls=[{"name": "record", "args": {"seconds": 30}, "id": "r1"}])
    model = ScriptedChatModel(messages=iter([listen, AIMessage("done")]), profile={"max_input_tokens": 32_000})
    agent = create_context_agent(model, [record], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("Record.")]}, {"configurable": {"thread_id": "mics"}})

    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    text, *kept = result.content
    assert 0 < len(kept) < 20  # 20 × 30 s is 19,200 tokens: what fits its share of 32k stays in view
    said = re.search(r"Its audio clips (\d+) to 20 of 20 \(([\d,]+) tokens\) are in ", text["text"])
    assert said is not None
    assert int(said.group(1)) == len(kept) + 1
    first = re.search(r'read_file\(file_path="([^"]+\.mp3)"\) shows audio clip ', text["text"])
    assert first is not None  # named by its format, not `.json`
    folder = tmp_path / first.group(1).lstrip("/").rsplit("/", 1)[0]
    files = sorted(folder.iterdir())
    assert len(files) == 20 - len(kept)
    assert all(f.suffix == ".mp3" and f.read_bytes() == mp3(30) for f in files)  # each the clip's exact bytes
