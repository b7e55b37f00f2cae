"""File names derived from thread ids, namespaces and tool-call ids: safe, bounded, collision-free.

Ids come from users and providers and can hold anything: `../`, absolute paths, NUL
bytes, very long or non-ASCII text. A component keeps only `[A-Za-z0-9._-]`, never
starts with a dot or holds `..`, and is bounded; whenever that changed the id, a hash of the
original is appended, so two different ids never share a file.
"""

from __future__ import annotations

import hashlib
import re

LARGE_RESULTS_DIR = "large_tool_results"
MAX_COMPONENT = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS = re.compile(r"\.{2,}")


def safe_component(value: str) -> str:
    """A single path component for `value` that cannot leave its directory."""
    cleaned = _DOTS.sub(".", _UNSAFE.sub("_", value)).lstrip(".") or "_"
    if cleaned == value and len(value) <= MAX_COMPONENT:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned[: MAX_COMPONENT - 13]}-{digest}"


def result_path(thread_id: str | None, namespace: str, call_id: str) -> str:
    """Backend path of an evicted result: `/large_tool_results/<thread>[/<namespace>]/<call id>`.

    The namespace separates a subagent's files from its parent's on the same thread.
    """
    parts = [LARGE_RESULTS_DIR, safe_component(thread_id or "no-thread")]
    if namespace:
        parts.append(safe_component(namespace))
    parts.append(safe_component(call_id))
    return "/" + "/".join(parts)


__all__ = ["LARGE_RESULTS_DIR", "result_path", "safe_component"]
