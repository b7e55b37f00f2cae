"""A backend that routes ctxwarden's folders cannot isolate them below the route.

deepagents' `CompositeBackend` hands a route's backend the path with the route's prefix cut
off: under `routes={"/large_tool_results/": ThreadIsolatedBackend(...)}` the wrapper sees
`/<thread>/<file>`, never a private folder, and lets any thread list, read and edit another's
evicted output. Isolation reads whole paths, so it wraps the composite, not a route of it.
"""

from __future__ import annotations

from typing import Any

from deepagents.backends import CompositeBackend

from ctxwarden.errors import BuildArgumentError
from ctxwarden.stack.isolation import ThreadIsolatedBackend
from ctxwarden.stack.store_isolation import ThreadIsolatedStoreBackend

ISOLATING = (ThreadIsolatedBackend, ThreadIsolatedStoreBackend)


def refuse_isolation_under_route(backend: Any, where: str = "backend") -> None:
    """Raise `BuildArgumentError` when a `CompositeBackend` in `backend` routes a prefix to an isolating wrapper."""
    seen: set[int] = set()
    pending: list[Any] = [backend]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ThreadIsolatedBackend):  # look inside the wrapper
            pending.append(current.inner)
        if not isinstance(current, CompositeBackend):
            continue
        pending.append(current.default)
        for prefix, routed in current.routes.items():
            if isinstance(routed, ISOLATING):
                kind = type(routed).__name__
                raise BuildArgumentError(
                    f"{where}: a CompositeBackend routes {prefix!r} to {kind}, which is handed paths without that "
                    f"prefix ('/<thread>/<file>' for '/large_tool_results/') and so keeps no thread out of another's "
                    f"files. Fix: wrap the composite instead, {kind}(CompositeBackend(default=..., routes={{...}})), "
                    "with the route's backend unwrapped."
                )
            pending.append(routed)


__all__ = ["refuse_isolation_under_route"]
