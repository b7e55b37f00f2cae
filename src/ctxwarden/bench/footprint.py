"""Memory the per-call path keeps: across many evicted outputs, and at the peak of one huge eviction.

Why: a context manager that keeps what it evicted (in a token cache, a memo of
measured lists, a placeholder cache) grows with every large output of a long session,
although the thread itself keeps only previews; and counting or previewing one huge
output at once can need many times its size. Both are measured in a fresh process
each, through the core middleware's own tool hook with a real filesystem backend:

- **growth**: resident memory after the first evicted 2 MB output and after the
  hundredth, each tool call followed by a model call on the growing thread, as a run does;
- **peak**: the highest resident memory while one 50 MiB output is evicted, above the
  process's level before the output existed, as a multiple of the output's size.

Resident memory is read from `/proc/self/statm` and the high-water mark from
`getrusage`, so the figures need Linux.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, cast

from deepagents.backends import FilesystemBackend
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime

from ctxwarden.core.policy import ContextPolicy
from ctxwarden.replay.scripted import scripted_model
from ctxwarden.stack.build import context_middleware

MIB = 1 << 20


def resident_bytes() -> int:
    """Resident memory of this process now (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def high_water_bytes() -> int:
    """The highest resident memory this process has had (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def log_output(size: int, seed: int = 0) -> str:
    """`size` characters of a test run's log: many ordinary lines, a few errors and a traceback in the middle."""
    line = "tests/unit/test_module_{i}.py::test_case_{j} PASSED [ {p:>3}%] checked value={v} in {t:.3f}s\n"
    parts: list[str] = []
    used, i = 0, 0
    while used < size:
        row = line.format(i=(i + seed) % 97, j=i, p=i % 100, v=i * 31 + seed, t=(i % 1000) / 997)
        if i % 50_000 == 25_000:
            row += 'Traceback (most recent call last):\n  File "src/app/core.py", line 88, in run\nValueError: bad\n'
        parts.append(row)
        used += len(row)
        i += 1
    return "".join(parts)[:size]


def _tool_request(call_id: str, state: dict[str, Any]) -> ToolCallRequest:
    call = {"name": "bash", "args": {"command": f"run {call_id}"}, "id": call_id, "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=cast(Any, None))  # type: ignore[arg-type]


def _model_request(model: Any, messages: list[BaseMessage]) -> ModelRequest[Any]:
    return ModelRequest(
        model=model,
        messages=cast(Any, list(messages)),
        system_message=SystemMessage("You are a coding agent."),
        tool_choice=None,
        tools=[],
        response_format=None,
        state=cast(Any, {"messages": list(messages)}),
        runtime=Runtime(context=None),
    )


def _answer(value: Any) -> Callable[[Any], Any]:
    """A handler that answers with `value`."""

    def handler(_request: Any) -> Any:
        return value

    return handler


def _reply(n: int) -> ModelResponse[Any]:
    return ModelResponse(result=[AIMessage("ok", id=f"reply-{n}")])


def growth(outputs: int = 100, size: int = 2_000_000) -> dict[str, Any]:
    """Resident memory after the first and after the last of `outputs` evicted outputs of `size` characters."""
    with tempfile.TemporaryDirectory(prefix="ctxwarden-footprint-") as folder:
        backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
        core = context_middleware(policy=ContextPolicy(window=200_000), backend=backend)[0]
        model = scripted_model([], window=200_000)
        messages: list[BaseMessage] = [HumanMessage("Run the checks.", id="ask")]
        levels: list[int] = []
        for n in range(outputs):
            call_id = f"call-{n}"
            ask = AIMessage("", id=f"ai-{n}", tool_calls=[{"name": "bash", "args": {"command": "x"}, "id": call_id}])
            messages.append(ask)
            output = ToolMessage(log_output(size, seed=n), tool_call_id=call_id, name="bash", id=f"tool-{n}")
            kept = core.wrap_tool_call(_tool_request(call_id, {"messages": messages}), _answer(output))
            del output
            messages.append(cast(ToolMessage, kept))
            core.wrap_model_call(_model_request(model, messages), _answer(_reply(n)))
            gc.collect()
            levels.append(resident_bytes())
    return {
        "outputs": outputs,
        "output_bytes": size,
        "after_first_mib": round(levels[0] / MIB, 1),
        "after_last_mib": round(levels[-1] / MIB, 1),
        "growth_mib": round((levels[-1] - levels[0]) / MIB, 1),
    }


def peak(size: int = 50 * MIB) -> dict[str, Any]:
    """Peak resident memory and time to evict one output of `size` characters (run in a fresh process)."""
    with tempfile.TemporaryDirectory(prefix="ctxwarden-footprint-") as folder:
        backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
        core = context_middleware(policy=ContextPolicy(window=200_000), backend=backend)[0]
        gc.collect()
        before = resident_bytes()
        output = ToolMessage(log_output(size), tool_call_id="big", name="bash", id="tool-big")
        started = time.perf_counter()
        kept = core.wrap_tool_call(_tool_request("big", {"messages": []}), _answer(output))
        took = time.perf_counter() - started
        evicted = isinstance(kept, ToolMessage) and len(str(kept.content)) < size // 100
        # the high-water mark and the resident count are sampled apart (and per-thread counters lag): never below 0
        above = max(0, max(high_water_bytes(), resident_bytes()) - before)
    return {
        "output_mib": round(size / MIB, 1),
        "seconds": round(took, 2),
        "peak_above_start_mib": round(above / MIB, 1),
        "peak_ratio": round(above / size, 2),
        "evicted": evicted,
    }


def measure_in_subprocess(what: str, **kwargs: Any) -> dict[str, Any]:
    """Run `growth` or `peak` in a fresh interpreter, so nothing earlier in this process skews its memory."""
    code = f"import json; from ctxwarden.bench import footprint; print(json.dumps(footprint.{what}(**{kwargs!r})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=1_800)
    return cast(dict[str, Any], json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    print(json.dumps({"growth": growth(), "peak": peak()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["growth", "high_water_bytes", "log_output", "measure_in_subprocess", "peak", "resident_bytes"]
