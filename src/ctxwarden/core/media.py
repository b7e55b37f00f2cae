"""What an image or a PDF in a message costs a model call: tokens from its size, read from its own bytes.

Providers count an image by its pixels, not by its bytes and not at a flat rate: Anthropic charges about
`width × height / 750` tokens after scaling it to fit 1568 pixels and about 1,600 tokens; OpenAI's tile models
(GPT-4o, GPT-4.1, GPT-5) charge 85 tokens plus 170 per 512-pixel tile after scaling it to fit 2048 pixels and its
short side to 768, or 85 at `detail="low"`. A flat 85 per image (langchain-core's `count_tokens_approximately`,
and this meter before) counts a 1280×800 screenshot as a sixteenth of what Anthropic bills, so a thread of forty
screenshots went past a 32k window while the meter read 3,400 tokens of them.

An image is counted as the larger of the two rules, so a call stays inside the window of either provider. Its size
is read from the first bytes of its base64 data (`imagesize`, a header parser: PNG, JPEG, GIF, WebP and others);
an image whose size cannot be read (a URL, a file id, a damaged header) is counted as the largest image either
provider takes in, `UNKNOWN_IMAGE_TOKENS`.

A PDF (deepagents' `read_file` returns one as a `file` block) is billed per page, its text and a picture of it:
about 1,500 to 2,500 tokens a page at Anthropic. Tokenized as the text of its base64, a 2 MB PDF of 20 pages read
as 1.9 million tokens, and one `read_file` put a 200k window at 958%. It is counted as `PDF_PAGE_TOKENS` a page,
its pages counted in its bytes (`/Type /Page` objects, else one per `PDF_BYTES_PER_PAGE`).

Audio and video are billed by their length: Gemini counts 32 tokens a second of audio and 263 a second of video
(OpenAI's audio models fewer, Anthropic takes neither). Tokenized as the text of its base64, a two-minute MP3 of
2 MB read as 1.9 million tokens. Its length is read from its own header (`mutagen`: MP3, MP4, Ogg, FLAC, WAV and
others); a clip whose length cannot be read is counted at a low bitrate for its bytes (`AUDIO_BYTES_PER_SECOND`,
`VIDEO_BYTES_PER_SECOND`, so it is counted long rather than short), and one given by URL or file id as
`UNKNOWN_AUDIO_SECONDS` or `UNKNOWN_VIDEO_SECONDS`.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
from collections.abc import Mapping
from typing import Any

import imagesize
import mutagen
from langchain_core.messages import BaseMessage

IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})
"""Content block types that carry an image (langchain's standard block, OpenAI's `image_url` and `input_image`)."""

DOCUMENT_TYPES = frozenset({"file", "document"})
"""Content block types that can carry a PDF (langchain's standard `file` block, Anthropic's `document`)."""

AUDIO_TYPES = frozenset({"audio", "input_audio"})
"""Content block types that carry audio (langchain's standard block, OpenAI's `input_audio`)."""

VIDEO_TYPES = frozenset({"video"})
"""Content block types that carry video (langchain's standard block)."""

TYPED_BY_MIME = frozenset({"media", *DOCUMENT_TYPES})
"""Block types that carry an image, audio or video when their MIME type says so (langchain-google-genai's `media`, a
`file`)."""

AUDIO_TOKENS_PER_SECOND = 32
"""Gemini's count for a second of audio, the most of the providers that take audio."""

VIDEO_TOKENS_PER_SECOND = 263
"""Gemini's count for a second of video at its default resolution (its frames and its sound)."""

AUDIO_BYTES_PER_SECOND = 2_000
"""Audio whose length cannot be read is counted as 16 kbit/s (the rate Gemini takes audio down to): long, not short."""

VIDEO_BYTES_PER_SECOND = 12_500
"""Video whose length cannot be read is counted as 100 kbit/s, lower than any video a model is sent is encoded at."""

LOWEST_BYTES_PER_SECOND = 125
"""1 kbit/s, below any codec's rate: a length its header gives is believed up to what its bytes hold at this rate."""

UNKNOWN_AUDIO_SECONDS = 600
"""Audio given by URL or file id, whose bytes are not in the message: counted as ten minutes."""

UNKNOWN_VIDEO_SECONDS = 60
"""Video given by URL or file id: counted as a minute."""

PDF_PAGE_TOKENS = 3_000
"""What a PDF page is counted as: the most Anthropic's guide gives for one (1,500 to 3,000)."""

PDF_BYTES_PER_PAGE = 50_000
"""A PDF whose page objects are out of sight (packed in compressed object streams) is counted one page per this."""

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")

LOW_DETAIL_TOKENS = 85
"""An image sent at OpenAI's `detail="low"`: one 512-pixel tile, whatever its size."""

ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1600
ANTHROPIC_PIXELS_PER_TOKEN = 750

OPENAI_FIT = 2048
OPENAI_SHORT_SIDE = 768
OPENAI_TILE = 512
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170

UNKNOWN_IMAGE_TOKENS = ANTHROPIC_MAX_TOKENS
"""An image of unknown size: the most either rule charges for one image (OpenAI's tile rule tops at 1,445)."""

HEADER_CHARS = 65_536
"""Base64 characters decoded to find an image's size: every format's header is within the first bytes, a JPEG's
after its metadata segments (which seldom pass 48 KB). A JPEG's size not found there is looked for in the whole
image; any other data is not decoded further (50 MB of base64 that is no image costs no more than 64 KB)."""


def is_image(block: Any) -> bool:
    """Whether a content block is an image (by its type, or a `media` or `file` block by its MIME type)."""
    return _kind(block) == "image"


def is_pdf(block: Any) -> bool:
    """Whether a content block is a PDF (by its MIME type, or by its first bytes)."""
    if not isinstance(block, Mapping) or block.get("type") not in DOCUMENT_TYPES:
        return False
    source = block.get("source")
    mime = block.get("mime_type") or (source.get("media_type") if isinstance(source, Mapping) else None)
    data = block_data(block)
    return mime == "application/pdf" or (data is not None and data.startswith("JVBERi"))  # base64 of `%PDF-`


def is_audio(block: Any) -> bool:
    """Whether a content block is audio (by its type, or a `media` or `file` block by its MIME type)."""
    return _kind(block) == "audio"


def is_video(block: Any) -> bool:
    """Whether a content block is video (by its type, or a `media` or `file` block by its MIME type)."""
    return _kind(block) == "video"


def is_media(block: Any) -> bool:
    """Whether a content block is an image, a PDF, audio or video: counted by its size or its length, never as the
    text of its bytes."""
    return _kind(block) is not None or is_pdf(block)


def media_of(message: BaseMessage) -> list[Any]:
    """The image, PDF, audio and video blocks of a message's content, in order."""
    return [] if isinstance(message.content, str) else [b for b in message.content if is_media(b)]


def media_tokens(block: Mapping[str, Any]) -> int:
    """Tokens an image, PDF, audio or video block costs a call."""
    kind = _kind(block)
    if kind == "image":
        return image_tokens(block)
    if kind == "audio":
        return math.ceil(_seconds(block, AUDIO_BYTES_PER_SECOND, UNKNOWN_AUDIO_SECONDS) * AUDIO_TOKENS_PER_SECOND)
    if kind == "video":
        return math.ceil(_seconds(block, VIDEO_BYTES_PER_SECOND, UNKNOWN_VIDEO_SECONDS) * VIDEO_TOKENS_PER_SECOND)
    return pdf_tokens(block)


def _kind(block: Any) -> str | None:
    """`"image"`, `"audio"`, `"video"`, or `None` for a block that is none of them (a PDF is told by `is_pdf`)."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind in IMAGE_TYPES:
        return "image"
    if kind in AUDIO_TYPES:
        return "audio"
    if kind in VIDEO_TYPES:
        return "video"
    if kind not in TYPED_BY_MIME:
        return None
    mime = block.get("mime_type")
    major = mime.split("/", 1)[0] if isinstance(mime, str) else None
    return major if major in ("image", "audio", "video") else None


def _seconds(block: Mapping[str, Any], bytes_per_second: int, unknown: int) -> float:
    """The length of an audio or video block: read from its header, else from its bytes at `bytes_per_second`, else
    (no bytes in the message) `unknown`."""
    data = block_data(block)
    if not data:
        return unknown
    raw = _decode(data)
    size = max(len(raw), len(data) * 3 // 4)  # data that does not decode is still sent, and billed somehow
    try:
        played = mutagen.File(io.BytesIO(raw))
        length = float(played.info.length) if played is not None else 0.0
    except Exception:  # mutagen's failures on damaged or unknown data are many: the bytes still give a length
        length = 0.0
    if not (length > 0 and math.isfinite(length)):
        return size / bytes_per_second
    return min(length, size / LOWEST_BYTES_PER_SECOND)  # a header that says hours for a few kilobytes is not believed


def pdf_tokens(block: Mapping[str, Any]) -> int:
    """`PDF_PAGE_TOKENS` for each page of a PDF block; a PDF given by URL or file id counts as one page."""
    data = block_data(block)
    if not data:
        return PDF_PAGE_TOKENS
    raw = _decode(data)
    pages = len(_PDF_PAGE.findall(raw)) or math.ceil(len(raw) / PDF_BYTES_PER_PAGE)
    return PDF_PAGE_TOKENS * max(1, pages)


def image_tokens(block: Mapping[str, Any]) -> int:
    """Tokens an image block costs a call: the larger of Anthropic's and OpenAI's charge for its size."""
    if _detail(block) == "low":
        return LOW_DETAIL_TOKENS
    size = image_size(block)
    if size is None:
        return UNKNOWN_IMAGE_TOKENS
    return max(anthropic_tokens(*size), openai_tokens(*size))


def anthropic_tokens(width: int, height: int) -> int:
    """Anthropic's charge: `width × height / 750` after scaling down to fit 1568 pixels and 1,600 tokens."""
    scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height))
    scale = min(scale, math.sqrt(ANTHROPIC_MAX_TOKENS * ANTHROPIC_PIXELS_PER_TOKEN / (width * height)))
    return min(ANTHROPIC_MAX_TOKENS, math.ceil(width * scale * height * scale / ANTHROPIC_PIXELS_PER_TOKEN))


def openai_tokens(width: int, height: int) -> int:
    """OpenAI's tile charge at high detail: scaled to fit 2048 pixels, then its short side to 768, in 512 tiles."""
    fit = min(1.0, OPENAI_FIT / max(width, height))
    scale = fit * min(1.0, OPENAI_SHORT_SIDE / (min(width, height) * fit))
    tiles = math.ceil(width * scale / OPENAI_TILE) * math.ceil(height * scale / OPENAI_TILE)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles


def image_size(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """`(width, height)` of an image block whose data is inline (base64 or a `data:` URL), else `None`."""
    data = block_data(block)
    if not data:
        return None
    head = _decode(data[:HEADER_CHARS])
    size = _size_of(head)
    if size is None and head.startswith(b"\xff\xd8") and len(data) > HEADER_CHARS:  # a JPEG's metadata ran long
        size = _size_of(_decode(data))
    return size


def block_data(block: Mapping[str, Any]) -> str | None:
    """The base64 data of an image or file block, in any of the shapes langchain and the providers use."""
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":  # Anthropic's own block
        return _text(source.get("data"))
    for key in ("base64", "data"):  # langchain's standard block (v1, v0)
        if isinstance(block.get(key), str):
            return _text(block.get(key))
    audio = block.get("input_audio")
    if isinstance(audio, Mapping):  # OpenAI's `input_audio` block
        return _text(audio.get("data"))
    url = block.get("url")
    image_url = block.get("image_url")
    if isinstance(image_url, Mapping):  # OpenAI's `image_url` block
        url = image_url.get("url")
    elif isinstance(image_url, str):
        url = image_url
    file = block.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("file_data"), str):  # OpenAI's `file` block
        url = file["file_data"]
    if isinstance(url, str) and url.startswith("data:") and "," in url[:200]:
        head, _, data = url.partition(",")
        return data if head.endswith(";base64") else None
    return None


def _detail(block: Mapping[str, Any]) -> str | None:
    image_url = block.get("image_url")
    extras = block.get("extras")
    for where in (block, image_url, extras):
        if isinstance(where, Mapping) and isinstance(where.get("detail"), str):
            return str(where["detail"])
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _decode(data: str) -> bytes:
    """The bytes of base64 `data`, or of its longest decodable prefix (whitespace and a cut tail are dropped)."""
    compact = "".join(data.split()) if any(c.isspace() for c in data[:4096]) else data
    compact = compact[: len(compact) - len(compact) % 4]
    try:
        return base64.b64decode(compact)
    except (binascii.Error, ValueError):
        try:
            return base64.urlsafe_b64decode(compact)
        except (binascii.Error, ValueError):
            return b""


def _size_of(data: bytes) -> tuple[int, int] | None:
    if not data:
        return None
    width, height = imagesize.get(io.BytesIO(data))
    return (width, height) if width > 0 and height > 0 else None


__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "AUDIO_TYPES",
    "DOCUMENT_TYPES",
    "IMAGE_TYPES",
    "LOW_DETAIL_TOKENS",
    "PDF_PAGE_TOKENS",
    "UNKNOWN_IMAGE_TOKENS",
    "VIDEO_TOKENS_PER_SECOND",
    "VIDEO_TYPES",
    "anthropic_tokens",
    "block_data",
    "image_size",
    "image_tokens",
    "is_audio",
    "is_image",
    "is_media",
    "is_pdf",
    "is_video",
    "media_of",
    "media_tokens",
    "openai_tokens",
    "pdf_tokens",
]
