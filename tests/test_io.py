"""One core, two drivers: `run` and `arun` answer a sans-I/O core's calls alike, errors included."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ctxwarden.core.io import Steps, arun, method, run


class Store:
    """A sync and async backend twin that records which path each call took."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def get(self, key: str) -> str:
        self.calls.append(f"get {key}")
        if key == "missing":
            raise KeyError(key)
        return key.upper()

    async def aget(self, key: str) -> str:
        await asyncio.sleep(0)
        self.calls.append(f"aget {key}")
        if key == "missing":
            raise KeyError(key)
        return key.upper()


def _core(store: Any, keys: list[str]) -> Steps[list[str]]:
    found = []
    for key in keys:
        try:
            found.append((yield method(store, "get", key)))
        except KeyError as exc:  # raised by the call, caught where the call stands
            found.append(f"no {exc.args[0]}")
    return found


def _nested(store: Store) -> Steps[str]:
    first = yield from _core(store, ["a"])
    second = yield from _core(store, ["missing", "b"])
    return "+".join(first + second)


async def test_both_drivers_give_the_core_the_same_answers_and_errors() -> None:
    blocking, awaited = Store(), Store()
    assert run(_core(blocking, ["a", "missing", "b"])) == ["A", "no missing", "B"]
    assert await arun(_core(awaited, ["a", "missing", "b"])) == ["A", "no missing", "B"]
    assert blocking.calls == ["get a", "get missing", "get b"]
    assert awaited.calls == ["aget a", "aget missing", "aget b"]


async def test_cores_compose_and_an_uncaught_error_leaves_the_driver() -> None:
    assert run(_nested(Store())) == await arun(_nested(Store())) == "A+no missing+B"

    def failing(store: Store) -> Steps[Any]:
        return (yield method(store, "get", "missing"))

    with pytest.raises(KeyError):
        run(failing(Store()))
    with pytest.raises(KeyError):
        await arun(failing(Store()))


class SyncOnly:
    def get(self, key: str) -> str:
        return key


def test_a_sync_only_object_works_on_the_sync_path_even_inside_a_running_loop() -> None:
    """The attribute is looked up when the call is made; the sync driver needs no event loop."""
    assert run(_core(SyncOnly(), ["x"])) == ["x"]

    async def inside() -> list[str]:
        return run(_core(SyncOnly(), ["y"]))

    assert asyncio.run(inside()) == ["y"]
