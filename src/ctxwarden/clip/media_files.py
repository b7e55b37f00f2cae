"""The images, PDFs, audio and video an evicted result cannot keep in view: one file each, in the result's order.

A tool can return many images at once (a video's frames, a document's pages, a browser's screenshots). Evicting only
the text left them all in the message: thirty screenshots, 41k tokens, at a 32k window, and the run ended with
`ContextStillTooLargeError`. An evicted result now keeps its images and PDFs in order while they fit its share of
the window (`clip.room`); the others are written to `<evicted file>.media/<n>-<hash>.<ext>`,
where the agent's `read_file` shows each as an image (or a PDF; audio and video are named by their format). A file
holds the exact bytes; one whose bytes
cannot be given back exactly (a URL, a file id, base64 that does not decode to the same string) is kept as its
block's JSON instead.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxwarden.clip.names import content_hash
from ctxwarden.core.media import block_data, is_audio, is_image, is_media, is_video, media_tokens

MEDIA_SUFFIX = ".media"
"""The folder beside an evicted result's file that holds the images and PDFs it could not keep in view."""

MEDIA_FILE = re.compile(
    r".*\.media/\d{3,}-[0-9a-f]{8}\.(?:png|jpg|gif|webp|pdf|wav|avi|mp3|ogg|flac|m4a|mp4|webm|json)"
)
"""The path of such a file (`media_path`): search leaves these out, they are not text."""

_FORMATS = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpg"),
    (b"GIF8", "gif"),
    (b"%PDF-", "pdf"),
    (b"ID3", "mp3"),
    (b"OggS", "ogg"),
    (b"fLaC", "flac"),
    (b"\x1aE\xdf\xa3", "webm"),
)
"""Formats told by their first bytes; RIFF files (WebP, WAV, AVI) and MP4's `ftyp` box by the bytes after
(`_format`)."""

_RIFF = {b"WEBP": "webp", b"WAVE": "wav", b"AVI ": "avi"}


def keep_in_view(blocks: Sequence[Any], budget: int) -> tuple[list[Any], list[tuple[int, Mapping[str, Any]]]]:
    """The blocks an evicted result keeps (its images and PDFs in order while they fit `budget` tokens, and every
    other block), and those it does not, each with its number among the result's images and PDFs (from 1)."""
    kept: list[Any] = []
    moved: list[tuple[int, Mapping[str, Any]]] = []
    used = number = 0
    for block in blocks:
        if not is_media(block):
            kept.append(block)
            continue
        number += 1
        tokens = media_tokens(block)
        if not moved and used + tokens <= budget:
            kept.append(block)
            used += tokens
        else:
            moved.append((number, block))  # after the first that does not fit, the rest follow it: order is kept
    return kept, moved


def media_path(folder: str, number: int, block: Mapping[str, Any]) -> str:
    """Where block `number` goes: its number, a hash of its block (other bytes never take its name), its format."""
    data = block_data(block)
    named = data if data is not None else _json(block)
    return f"{folder}/{number:03d}-{content_hash(named.encode('utf-8', 'surrogatepass'))[:8]}.{_extension(block)}"


def media_bytes(block: Mapping[str, Any]) -> bytes:
    """The bytes the file of `block` holds: its own, when they give back its base64 exactly; else its JSON."""
    exact = _exact_bytes(block)
    return exact if exact is not None else _json(block).encode("utf-8", "surrogatepass")


def media_note(folder: str, moved: Sequence[tuple[int, Mapping[str, Any]]], total: int) -> str:
    """The marker's sentence naming the images and PDFs that left the view and where each one is."""
    first, last = moved[0][0], moved[-1][0]
    kind = _kind([block for _n, block in moved], plural=first != last)
    which = f"{kind} {first}" if first == last else f"{kind} {first} to {last}"
    tokens = sum(media_tokens(block) for _n, block in moved)
    return (
        f" Its {which} of {total} ({tokens:,} tokens) {'is' if first == last else 'are'} in {folder}/, one file each, "
        "named by number "
        f'(read_file(file_path="{media_path(folder, *moved[0])}") shows {kind.removesuffix("s")} {first}).'
    )


def media_count(blocks: Sequence[Any]) -> str:
    """`1 image`, `3 PDFs`, `2 audio clips`, `4 attachments`: what a placeholder says a cleared result held."""
    return f"{len(blocks)} {_kind(blocks, plural=len(blocks) > 1)}"


def with_media(text: str, media: list[Any], room: int | None = None, filed: Sequence[str] = ()) -> str | list[Any]:
    """`text`, followed by `media` (images, PDFs) when there are any (a tool's answer can hold both): those that fit
    `room` tokens, in order, when the call has only that; `filed`, the files of those its eviction moved out, named."""
    if filed:
        folder = filed[0].rsplit("/", 1)[0]
        text += (
            f"\n[ctxwarden: {len(filed)} more of this result's images and PDFs are in {folder}/, one file each, "
            f'named by number (read_file(file_path="{filed[0]}") shows the first of them).]'
        )
    if not media:
        return text
    fit = used = 0
    for block in media:
        used += media_tokens(block)
        if room is not None and used > room:
            break
        fit += 1
    if fit == len(media):
        return [{"type": "text", "text": f"{text}\n[ctxwarden: this result's {media_count(media)} follow.]"}, *media]
    note = (
        f"\n[ctxwarden: this result holds {media_count(media)}; {fit} of them fit beside the other calls of this turn "
        "and follow. Recall it with no other call beside it to see them all.]"
    )
    return [{"type": "text", "text": text + note}, *media[:fit]]


def _kind(blocks: Sequence[Any], *, plural: bool) -> str:
    kinds = {
        "image" if is_image(b) else "audio clip" if is_audio(b) else "video" if is_video(b) else "PDF" for b in blocks
    }
    return (kinds.pop() if len(kinds) == 1 else "attachment") + ("s" if plural else "")


def _kind_of(block: Any) -> str:
    return "image" if is_image(block) else "audio clip" if is_audio(block) else "video" if is_video(block) else "PDF"


def _extension(block: Mapping[str, Any]) -> str:
    exact = _exact_bytes(block)
    return (_format(exact) if exact is not None else None) or "json"


def _format(raw: bytes) -> str | None:
    """The file extension of `raw`'s format, from its first bytes; `None` for a format not known here."""
    if raw[:4] == b"RIFF":
        return _RIFF.get(raw[8:12])
    if raw[4:8] == b"ftyp":  # an MP4 container: audio-only brands are M4A
        return "m4a" if raw[8:11] == b"M4A" else "mp4"
    if raw[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):  # an MP3 frame with no ID3 tag before it
        return "mp3"
    return next((name for magic, name in _FORMATS if raw.startswith(magic)), None)


def _exact_bytes(block: Mapping[str, Any]) -> bytes | None:
    """The bytes of an image or PDF of a known format, when encoding them again gives its base64 back exactly (else a
    file of them would not be the original)."""
    data = block_data(block)
    if not data:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode() != data or _format(raw) is None:
        return None
    return raw


def _json(block: Mapping[str, Any]) -> str:
    return json.dumps(block, sort_keys=True, ensure_ascii=False, default=str)


__all__ = [
    "MEDIA_FILE",
    "MEDIA_SUFFIX",
    "keep_in_view",
    "media_bytes",
    "media_count",
    "media_note",
    "media_path",
    "with_media",
]
