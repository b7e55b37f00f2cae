"""A backend that reads paths as the machine's own cannot be isolated.

`ThreadIsolatedBackend` decides by backend paths (`/large_tool_results/<thread>/...`,
`/checkpoints.sqlite`). Over `FilesystemBackend(virtual_mode=False)` the agent's tools name
files by their absolute paths instead: the isolation was built without a word, and the agent
then read, searched and overwrote `trace.sqlite` by its absolute path, while ctxwarden's own
evictions would have gone to `/large_tool_results` at the machine's root.
"""

from __future__ import annotations

from typing import Any

from deepagents.backends import CompositeBackend

from ctxwarden.errors import BuildArgumentError


def refuse_real_paths(backend: Any) -> None:
    """Raise `BuildArgumentError` when `backend` (or a backend a composite routes to) reads paths as the machine's own
    (`FilesystemBackend(virtual_mode=False)`): isolation reads backend paths, so a database was reached by its
    absolute path, and ctxwarden's own folders would be made at the machine's root."""
    pending, seen = [backend], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "virtual_mode", None) is False:
            raise BuildArgumentError(
                f"{type(current).__name__}(virtual_mode=False) reads paths as the machine's own: no thread's files and "
                "no database behind it can be kept from the agent's tools, and ctxwarden would write its folders at "
                f"the machine's root. Fix: {type(current).__name__}(root_dir=..., virtual_mode=True)."
            )
        pending += [current.default, *current.routes.values()] if isinstance(current, CompositeBackend) else []


__all__ = ["refuse_real_paths"]
