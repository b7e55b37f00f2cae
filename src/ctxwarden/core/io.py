"""One implementation per sync/async pair: logic written once, as a generator that yields its I/O.

Folding, eviction and the isolated backend each do the same thing on the sync and the
async path; only the calls that reach the outside (a backend, a model, a future) differ.
Written twice, the two twins drift. So the logic is a generator (a "sans-I/O" core) that
yields a `Call` wherever it needs the outside, and gets the answer back as the value of
the `yield`; `run` answers with the sync call, `arun` awaits the async one. An error
from the call is raised inside the generator at the `yield`, so its `try`/`except` and
`with` blocks behave as if the call were made in place. Cores compose with `yield from`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """One request to the outside: the blocking call and its awaitable twin (made only when the driver runs it)."""

    sync: Callable[[], Any]
    """Makes the call on the sync path."""
    async_: Callable[[], Awaitable[Any]]
    """Makes the call on the async path: returns what `arun` awaits."""


Steps = Generator[Call, Any, T]
"""A sans-I/O core: yields `Call`s, receives their answers, returns its result."""


def method(target: Any, name: str, *args: Any, **kwargs: Any) -> Call:
    """`target.name(*args, **kwargs)`, or `await target.aname(...)` on the async path.

    The attribute is looked up only when the call is made, so a sync-only (or async-only)
    object works on its own path as it would with the call written out.
    """
    return Call(
        lambda: getattr(target, name)(*args, **kwargs),
        lambda: getattr(target, f"a{name}")(*args, **kwargs),
    )


def run(core: Steps[T]) -> T:
    """Drive `core` on the sync path: each yielded `Call` is made with its blocking call.

    The driver is written once, as a coroutine; on the sync path it never awaits, so one
    `send` runs it to the end without an event loop.
    """
    driver = _drive(core, blocking=True)
    try:
        driver.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    driver.close()
    raise RuntimeError("the sync driver awaited: a blocking call was expected")  # unreachable by construction


async def arun(core: Steps[T]) -> T:
    """Drive `core` on the async path: each yielded `Call` is made with its awaitable twin."""
    return await _drive(core, blocking=False)


async def _drive(core: Steps[T], *, blocking: bool) -> T:
    try:
        request = next(core)
        while True:
            failed: BaseException | None = None
            try:
                answer = request.sync() if blocking else await request.async_()
            except BaseException as exc:  # raised inside the core, where the call stands (below, not while handled)
                failed = exc
            del request  # its arguments (a large upload) are not held while the core goes on
            request = core.send(answer) if failed is None else core.throw(failed)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


__all__ = ["Call", "Steps", "arun", "method", "run"]
