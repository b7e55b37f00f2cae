"""Per-call cost of the token meter on long histories, against recounting with langchain-core.

    python -m ctxwarden.bench.meter [--repeat N]

For each history size (100k, 500k and 1M tokens, with ~2k and ~13k messages) it times
a model call that appends one message: ctxwarden's `TokenMeter.measure` (warm, as on
every call after the first) against `count_tokens_approximately` over the whole
history (what the stock middlewares do per call). Also shown: the meter's cold
first count. Target: at 1M tokens the appended call is at least 20x cheaper.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from ctxwarden.core.meter import TokenMeter

SIZES = [
    (100_000, 2_000),
    (100_000, 13_000),
    (500_000, 2_000),
    (500_000, 13_000),
    (1_000_000, 2_000),
    (1_000_000, 13_000),
]
TARGET_RATIO = 20.0


def synthetic_history(tokens: int, messages: int) -> list[BaseMessage]:
    """A tool-calling conversation of about `tokens` approximate tokens in `messages` messages."""
    chars = max(4, tokens * 4 // messages)
    for _ in range(4):  # per-message overhead is fixed, so rescale the text until the total fits
        history = _history(chars, messages)
        measured = count_tokens_approximately(history)
        if abs(measured - tokens) < tokens * 0.02:
            break
        chars = max(4, int(chars * tokens / measured))
    return history


def _history(chars: int, messages: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("Fix the failing test. " + "x" * chars, id="u0")]
    i = 0
    while len(history) < messages:
        call_id = f"call_{i}"
        script = f"echo {i}; " + "y" * (chars // 2)
        history.append(
            AIMessage("", id=f"a{i}", tool_calls=[{"name": "bash", "args": {"command": script}, "id": call_id}])
        )
        history.append(ToolMessage("z" * chars, tool_call_id=call_id, id=f"t{i}"))
        i += 1
    return history[:messages]


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def bench(tokens: int, count: int, repeat: int) -> dict[str, float]:
    history = synthetic_history(tokens, count)
    system = SystemMessage("You are a coding agent. " * 50)
    meter = TokenMeter()
    started = time.perf_counter()
    meter.measure(history, system_message=system)
    cold_ms = (time.perf_counter() - started) * 1000

    grown: list[BaseMessage] = list(history)

    def append_and_measure() -> None:
        grown.append(HumanMessage(f"next {len(grown)}"))
        meter.measure(list(grown), system_message=system)

    def recount() -> None:
        count_tokens_approximately([system, *grown, HumanMessage("next")])

    meter_ms = _median_ms(append_and_measure, repeat)
    recount_ms = _median_ms(recount, max(3, repeat // 4))
    return {
        "tokens": tokens,
        "messages": count,
        "measured_tokens": count_tokens_approximately(history),
        "meter_cold_ms": cold_ms,
        "meter_append_ms": meter_ms,
        "recount_ms": recount_ms,
        "ratio": recount_ms / meter_ms if meter_ms else float("inf"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench.meter", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40, help="timed calls per size (median reported)")
    args = parser.parse_args(argv)
    counter = TokenMeter().counter_name
    print(f"token meter ({counter}) vs count_tokens_approximately, one appended message per call\n")
    header = f"{'history':>10} {'messages':>9} | {'meter cold':>11} {'meter/call':>11} | {'recount/call':>12} |"
    print(f"{header} {'speed-up':>8}")
    print("-" * 78)
    worst_at_1m = float("inf")
    for tokens, count in SIZES:
        row = bench(tokens, count, args.repeat)
        size = f"{row['measured_tokens']:>10,} {count:>9,}"
        meter_part = f"{row['meter_cold_ms']:>9.1f}ms {row['meter_append_ms']:>9.3f}ms"
        print(f"{size} | {meter_part} | {row['recount_ms']:>10.2f}ms | {row['ratio']:>7.0f}x")
        if tokens == 1_000_000:
            worst_at_1m = min(worst_at_1m, row["ratio"])
    print("(history = langchain-core's estimate; 13k messages cannot weigh less than ~245k tokens with their overhead)")
    verdict = "met" if worst_at_1m >= TARGET_RATIO else "MISSED"
    print(
        f"\ntarget: appended call >= {TARGET_RATIO:.0f}x cheaper than recounting at 1M tokens: {verdict} "
        f"(worst {worst_at_1m:.0f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
