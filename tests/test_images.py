"""Images in tool results: counted by their size, as providers bill them, and recalled with their result.

A screenshot of 1280×800 costs about 1,366 tokens at Anthropic and 1,105 at OpenAI. Counted at a flat 85 (what
langchain-core's `count_tokens_approximately` charges, and this meter did), forty screenshots at a 32k window
read as 10k, so nothing was cleared and 17 of the 41 calls went out past the window. And once a screenshot's result
was cleared from the view, `recall` gave back its text only: the image the placeholder stood for was out of reach.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import PrivateAttr

from ctxwarden import Session, create_context_agent
from ctxwarden.core.counters import counter_key
from ctxwarden.core.gauge_note import is_note
from ctxwarden.core.media import (
    PDF_PAGE_TOKENS,
    UNKNOWN_IMAGE_TOKENS,
    anthropic_tokens,
    image_tokens,
    is_media,
    openai_tokens,
    pdf_tokens,
)
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.stamp import COUNT_KEY, count_record
from ctxwarden.errors import ContextStillTooLargeError
from ctxwarden.replay import ScriptedChatModel


def png(width: int, height: int) -> bytes:
    """A valid PNG of one colour (compressed, so even a large one is a few kilobytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def jpeg_after_metadata(width: int, height: int, metadata_bytes: int) -> bytes:
    """A JPEG whose size (its SOF0 segment) comes after `metadata_bytes` of APP1 segments, as a camera's EXIF does."""
    segments = b""
    while metadata_bytes > 0:
        body = bytes(min(metadata_bytes, 65_000))
        segments += b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body
        metadata_bytes -= len(body)
    frame = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + segments + b"\xff\xc0" + struct.pack(">H", len(frame) + 2) + frame + b"\xff\xd9"


SCREEN = base64.b64encode(png(1280, 800)).decode()
SCREEN_TOKENS = 1_366  # Anthropic's 1280 × 800 / 750, the larger of the two providers' charges


def test_an_image_is_counted_by_its_size_in_every_block_shape() -> None:
    shapes = [
        {"type": "image", "base64": SCREEN, "mime_type": "image/png"},
        {"type": "image", "source_type": "base64", "data": SCREEN, "mime_type": "image/png"},
        {"type": "image", "url": f"data:image/png;base64,{SCREEN}"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{SCREEN}"}},
        {"type": "image_url", "image_url": f"data:image/png;base64,{SCREEN}"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": SCREEN}},
    ]
    assert [image_tokens(block) for block in shapes] == [SCREEN_TOKENS] * len(shapes)
    low = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{SCREEN}", "detail": "low"}}
    assert image_tokens(low) == 85


def test_an_image_in_a_gemini_media_block_or_a_file_block_is_counted_by_its_size_in_the_message() -> None:
    meter = TokenMeter()
    look = HumanMessage("Look.")
    for block in (
        {"type": "media", "mime_type": "image/png", "data": SCREEN},  # langchain-google-genai's block
        {"type": "file", "base64": SCREEN, "mime_type": "image/png"},
    ):
        seen = HumanMessage([{"type": "text", "text": "Look."}, block])
        assert is_media(block)
        assert meter.message_tokens(seen) - meter.message_tokens(look) == pytest.approx(SCREEN_TOKENS, abs=8)
        # before: the text of its base64, 3,000 tokens and more for a 1280×800 screenshot


def test_the_providers_own_examples() -> None:
    assert openai_tokens(1024, 1024) == 765  # OpenAI's worked examples
    assert openai_tokens(2048, 4096) == 1105
    assert anthropic_tokens(1092, 1092) == 1590  # Anthropic's largest square sent unscaled
    assert anthropic_tokens(4000, 3000) == 1600  # scaled down to about 1,600 tokens
    assert image_tokens({"type": "image", "base64": base64.b64encode(png(200, 200)).decode()}) == 255  # one tile


def test_an_image_whose_size_cannot_be_read_is_counted_as_the_largest() -> None:
    unknown = [
        {"type": "image", "url": "https://example.com/shot.png"},
        {"type": "image", "file_id": "file-abc"},
        {"type": "image", "base64": base64.b64encode(b"not an image at all").decode()},
        {"type": "image", "base64": "%%% not base64 %%%"},
        {"type": "image", "base64": ""},
    ]
    assert [image_tokens(block) for block in unknown] == [UNKNOWN_IMAGE_TOKENS] * len(unknown)


def test_a_size_behind_large_metadata_or_line_breaks_is_still_read() -> None:
    deep = base64.b64encode(jpeg_after_metadata(3000, 2000, 150_000)).decode()
    assert image_tokens({"type": "image", "base64": deep}) == anthropic_tokens(3000, 2000)
    wrapped = "\n".join(SCREEN[i : i + 76] for i in range(0, len(SCREEN), 76))  # MIME's 76-character lines
    assert image_tokens({"type": "image", "base64": wrapped}) == SCREEN_TOKENS


def test_the_meter_counts_images_by_size_unless_told_a_flat_count() -> None:
    message = ToolMessage(
        content=[{"type": "text", "text": "screen"}, {"type": "image", "base64": SCREEN, "mime_type": "image/png"}],
        tool_call_id="c1",
    )
    text_only = ToolMessage(content=[{"type": "text", "text": "screen"}], tool_call_id="c1")
    assert TokenMeter().message_tokens(message) - TokenMeter().message_tokens(text_only) == SCREEN_TOKENS
    flat = TokenMeter(tokens_per_image=85)
    assert flat.message_tokens(message) - flat.message_tokens(text_only) == 85
    by_size = TokenMeter().carry(message)  # what the next process loads
    assert TokenMeter().message_tokens(by_size) == TokenMeter().message_tokens(message)
    assert flat.message_tokens(by_size) == flat.message_tokens(message)  # read by its own rule only: recounted


def test_counts_carried_before_images_were_counted_by_size_are_read_where_no_image_is() -> None:
    meter = TokenMeter()
    before = f"{counter_key(meter.counter)}/3/85"  # the key every count was carried under before
    text = ToolMessage(content="a plain result", tool_call_id="c1")
    old = {COUNT_KEY: count_record(4_321, before, text)}
    assert meter.message_tokens(text.model_copy(update={"response_metadata": old})) == 4_321  # read, not recounted
    shot = ToolMessage(content=[{"type": "image", "base64": SCREEN, "mime_type": "image/png"}], tool_call_id="c2")
    stale = {COUNT_KEY: count_record(88, before, shot)}  # the flat 85 a screenshot was counted at
    assert meter.message_tokens(shot.model_copy(update={"response_metadata": stale})) > SCREEN_TOKENS  # recounted


class Billing(ScriptedChatModel):
    """A provider that bills images by size (Anthropic's rule) and text at four characters a token, and refuses a
    request past `limit`."""

    limit: int = 32_000
    _billed: list[int] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        billed = sum(_billed(m) for m in messages)
        if kwargs.get("ctxwarden_agent_call"):
            self._billed.append(billed)
        if billed > self.limit:
            raise ContextOverflowError(f"prompt is too long: {billed} tokens > {self.limit} maximum")
        return super()._generate(messages, stop, run_manager, **kwargs)


def _billed(message: BaseMessage) -> int:
    blocks = [message.content] if isinstance(message.content, str) else message.content
    images = [b for b in blocks if isinstance(b, dict) and b.get("type") == "image"]
    text = sum(len(b if isinstance(b, str) else str(b.get("text", ""))) for b in blocks if b not in images)
    calls = len(json.dumps(getattr(message, "tool_calls", None) or []))
    return (text + calls) // 4 + SCREEN_TOKENS * len(images)


@tool
def screenshot(step: int) -> list[dict[str, Any]]:
    """Take a screenshot of the screen."""
    return [
        {"type": "text", "text": f"screen at step {step}"},
        {"type": "image", "base64": SCREEN, "mime_type": "image/png"},
    ]


def _agent(tmp_path: Path, replies: list[AIMessage]) -> tuple[Any, Billing]:
    model = Billing(messages=iter(replies), profile={"max_input_tokens": 32_000})
    return create_context_agent(model, [screenshot], state_dir=tmp_path, checkpointer=InMemorySaver()), model


def _shots(count: int) -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {"step": i}, "id": f"shot{i}"}]) for i in range(count)
    ]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_forty_screenshots_stay_inside_the_window_and_each_comes_back_with_recall(tmp_path: Path, run: str) -> None:
    recall = AIMessage("", tool_calls=[{"name": "recall", "args": {"call_id": "shot0"}, "id": "back"}])
    agent, model = _agent(tmp_path, [*_shots(40), recall, AIMessage("done")])
    config = {"configurable": {"thread_id": f"screens-{run}"}}
    state = {"messages": [HumanMessage("Watch the screen.")]}
    out = agent.invoke(state, config) if run == "sync" else asyncio.run(agent.ainvoke(state, config))

    assert out["messages"][-1].content == "done"
    assert len(model._billed) == 42
    assert max(model._billed) <= 32_000
    first = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "shot0")
    assert first.content[1]["base64"] == SCREEN  # the thread keeps the original whole

    recalled = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "back")
    assert isinstance(recalled.content, list)  # before: the text alone
    assert recalled.content[0]["text"].startswith("screen at step 0")
    assert [b.get("base64") for b in recalled.content[1:]] == [SCREEN]


def test_a_cleared_screenshot_names_its_image_in_the_placeholder(tmp_path: Path) -> None:
    seen: list[list[BaseMessage]] = []

    class Watching(Billing):
        def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = Watching(messages=iter([*_shots(30), AIMessage("done")]), profile={"max_input_tokens": 32_000})
    agent = create_context_agent(model, [screenshot], state_dir=tmp_path, checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("Watch.")]}, {"configurable": {"thread_id": "t"}})

    shown = next(m for m in seen[-1] if isinstance(m, ToolMessage) and m.tool_call_id == "shot0")
    assert isinstance(shown.content, str)
    assert shown.content.startswith("[cleared, ")
    assert ', 1 image: recall(call_id="shot0")]' in shown.content.splitlines()[0]


@tool
def frames(count: int) -> list[dict[str, Any]]:
    """Sample `count` frames of the video."""
    images = [{"type": "image", "base64": SCREEN, "mime_type": "image/png"} for _ in range(count)]
    return [{"type": "text", "text": f"{count} frames"}, *images]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_result_of_thirty_images_keeps_what_fits_and_files_the_rest(tmp_path: Path, run: str) -> None:
    sample = AIMessage("", tool_calls=[{"name": "frames", "args": {"count": 30}, "id": "f1"}])
    model = Billing(
        messages=iter([sample, AIMessage("looking"), AIMessage("done")]), profile={"max_input_tokens": 32_000}
    )
    agent = create_context_agent(model, [frames], state_dir=tmp_path, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"frames-{run}"}}
    state = {"messages": [HumanMessage("Sample the video.")]}
    out = agent.invoke(state, config) if run == "sync" else asyncio.run(agent.ainvoke(state, config))
    assert max(model._billed) <= 32_000  # before: ContextStillTooLargeError, refused at 41,183 tokens

    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "f1")
    text, *kept = result.content
    # as many as fit half of what the system prompt and the tool schemas leave of the window stay in view, in order
    assert [b["base64"] for b in kept] == [SCREEN] * 10
    assert f"Its images 11 to 30 of 30 ({20 * SCREEN_TOKENS:,} tokens) are in " in text["text"]
    first = re.search(r'read_file\(file_path="([^"]+\.png)"\) shows image 11', text["text"])
    assert first is not None
    folder = tmp_path / first.group(1).lstrip("/").rsplit("/", 1)[0]
    files = sorted(folder.iterdir())
    assert [f.name[:4] for f in files] == [f"{n:03d}-" for n in range(11, 31)]  # one file each, in order
    assert all(f.read_bytes() == base64.b64decode(SCREEN) for f in files)  # each the image's exact bytes

    read = AIMessage("", tool_calls=[{"name": "read_file", "args": {"file_path": first.group(1)}, "id": "r1"}])
    model.messages = iter([read, AIMessage("seen")])
    more = HumanMessage("Show me frame 2.")
    out = (
        agent.invoke({"messages": [more]}, config)
        if run == "sync"
        else asyncio.run(agent.ainvoke({"messages": [more]}, config))
    )
    shown = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert [b.get("base64") for b in shown.content if isinstance(b, dict) and b.get("type") == "image"] == [SCREEN]


def test_a_fork_gets_copies_of_the_images_and_deleting_the_thread_takes_them(tmp_path: Path) -> None:
    sample = AIMessage("", tool_calls=[{"name": "frames", "args": {"count": 15}, "id": "f1"}])
    model = Billing(messages=iter([sample, AIMessage("done")]), profile={"max_input_tokens": 16_000})
    with Session(model, [frames], state_dir=tmp_path, thread_id="source") as session:
        session.invoke("Sample the video.")
        (result,) = [m for m in session.messages if isinstance(m, ToolMessage)]
        images = result.response_metadata["ctxwarden"]["media"]
        assert len(images) == 11  # four fit half of what the system prompt and the tools leave of 16k
        assert all(p.startswith("/large_tool_results/source/f1-") for p in images)

        fork = session.fork(
            [0], thread_id="copy", model=Billing(messages=iter([]), profile={"max_input_tokens": 16_000})
        )
        (copied,) = [m for m in fork.messages if isinstance(m, ToolMessage)]
        copies = copied.response_metadata["ctxwarden"]["media"]
        assert copies == [p.replace("/source/", "/copy/", 1) for p in images]
        text = copied.content[0]["text"]
        assert copies[0] in text
        assert "are in /large_tool_results/copy/f1-" in text
        assert all((tmp_path / p.lstrip("/")).read_bytes() == base64.b64decode(SCREEN) for p in copies)
        fork.close()

        session.delete()
        assert not any((tmp_path / p.lstrip("/")).exists() for p in images)
        assert all((tmp_path / p.lstrip("/")).exists() for p in copies)  # the fork's own copies stay


def test_search_does_not_read_image_files_as_text(tmp_path: Path) -> None:
    sample = AIMessage("", tool_calls=[{"name": "frames", "args": {"count": 15}, "id": "f1"}])
    search = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "IHDR"}, "id": "s1"}])
    model = Billing(messages=iter([sample, search, AIMessage("done")]), profile={"max_input_tokens": 16_000})
    agent = create_context_agent(model, [frames], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("Sample.")]}, {"configurable": {"thread_id": "t"}})
    found = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "s1")
    assert found.content.startswith(
        "[ctxwarden: no line of this conversation matches text 'IHDR'"
    )  # before: hits in the PNGs' bytes


def pdf(pages: int, filler: int) -> bytes:
    """A PDF with `pages` page objects and `filler` bytes of content (a scanned page's image, say)."""
    objects = "".join(f"{3 + i} 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" for i in range(pages))
    return (
        f"%PDF-1.7\n2 0 obj << /Type /Pages /Count {pages} >> endobj\n{objects}".encode() + bytes(filler) + b"%%EOF\n"
    )


def test_a_pdf_is_counted_by_its_pages_not_as_the_text_of_its_bytes() -> None:
    data = base64.b64encode(pdf(20, 2_000_000)).decode()
    shapes = [
        {"type": "file", "base64": data, "mime_type": "application/pdf"},  # deepagents' read_file
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{data}", "filename": "a.pdf"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}},
    ]
    assert [pdf_tokens(block) for block in shapes] == [20 * PDF_PAGE_TOKENS] * 3
    packed = base64.b64encode(b"%PDF-1.7\n" + bytes(200_000)).decode()  # page objects in compressed streams
    assert pdf_tokens({"type": "file", "base64": packed, "mime_type": "application/pdf"}) == 5 * PDF_PAGE_TOKENS
    assert pdf_tokens({"type": "file", "url": "https://example.com/a.pdf", "mime_type": "application/pdf"}) == 3_000

    message = ToolMessage(content=[{"type": "text", "text": ""}, shapes[0]], tool_call_id="r1")
    assert TokenMeter().message_tokens(message) < 61_000  # before: 1.9 million, the text of its base64


def test_reading_a_pdf_leaves_the_window_as_it_was_sized(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "doc.pdf").write_bytes(pdf(20, 2_000_000))
    seen: list[list[BaseMessage]] = []

    class Watching(ScriptedChatModel):
        def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, stop, run_manager, **kwargs)

    read = AIMessage("", tool_calls=[{"name": "read_file", "args": {"file_path": "/doc.pdf"}, "id": "r1"}])
    model = Watching(messages=iter([read, AIMessage("read")]), profile={"max_input_tokens": 200_000})
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    agent = create_context_agent(model, [], state_dir=tmp_path / "state", backend=backend)
    agent.invoke({"messages": [HumanMessage("Read the document.")]}, {"configurable": {"thread_id": "t"}})

    after = seen[-1]
    shown = next(m for m in after if isinstance(m, ToolMessage))
    assert [b.get("type") for b in shown.content if isinstance(b, dict)][-1] == "file"  # the PDF is in view, whole
    assert not any(is_note(m) for m in after)  # before: a gauge note "958% full", and a fold
    assert len(seen) == 2  # no summarizer call


def test_a_user_message_of_forty_screenshots_gets_an_error_that_names_it(tmp_path: Path) -> None:
    screens = [{"type": "image", "base64": SCREEN, "mime_type": "image/png"}] * 40
    model = Billing(messages=iter([AIMessage("never")]), profile={"max_input_tokens": 32_000})
    agent = create_context_agent(model, [], state_dir=tmp_path, checkpointer=InMemorySaver())
    look = HumanMessage([{"type": "text", "text": "What changed between these?"}, *screens])
    with pytest.raises(ContextStillTooLargeError) as refused:
        agent.invoke({"messages": [look]}, {"configurable": {"thread_id": "t"}})
    said = str(refused.value)
    assert "The largest message it still held: user message 1 of " in said
    assert ", 40 images. Fix: that message alone takes 171% of the window" in said
    assert (
        "send it in smaller parts (fewer images at a time)" in said
    )  # before: pass a smaller window, which cannot help


@tool
def broken(count: int) -> list[dict[str, Any]]:
    """Return `count` images whose data holds a lone surrogate (bytes a tool decoded badly)."""
    return [{"type": "image", "base64": "AAAA\ud800" + SCREEN, "mime_type": "image/png"}] * count


def test_images_whose_data_is_not_base64_are_filed_as_their_exact_json(tmp_path: Path) -> None:
    sample = AIMessage("", tool_calls=[{"name": "broken", "args": {"count": 30}, "id": "b1"}])
    model = Billing(messages=iter([sample, AIMessage("done")]), profile={"max_input_tokens": 32_000}, limit=10**9)
    agent = create_context_agent(model, [broken], state_dir=tmp_path, checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})  # before: it raised
    (result,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    filed = result.response_metadata["ctxwarden"]["media"]
    assert len(filed) == 21  # unreadable, each counts as the largest image: nine fit half the room the tools leave
    block = {"type": "image", "base64": "AAAA\ud800" + SCREEN, "mime_type": "image/png"}
    exact = json.dumps(block, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert all(p.endswith(".json") and (tmp_path / p.lstrip("/")).read_bytes() == exact for p in filed)
