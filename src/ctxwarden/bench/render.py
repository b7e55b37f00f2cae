"""Rendering tool output as a terminal shows it, and the arrival of large outputs: tokens, time, memory.

Why: a render stage at arrival pays only if it cuts what a model reads by a large factor on the
outputs agents meet (progress bars, coloured logs, cursor movement) while keeping every line a
user's terminal shows at the end; and it sits on the path of every tool result, so it must cost
nothing on plain text and stay linear on huge outputs of any shape. Three tables:

- **render**: per recorded output (`tests/data/terminal`, real programs in a pseudo-terminal),
  tokens before and after rendering, the share of the final lines kept verbatim (against the
  whole recording drawn on one pyte screen), and rendering time per MB on the output repeated to
  10 MiB (`render_mib`), with how many of its lines that move the cursor between rows were
  rendered line by line instead of on a screen (`approximate_lines`: 0 is exact).
- **spinners**: one-line spinners of 10,000 frames (about 200,000 characters, within the emulator's
  budget: backspaces, npm's `CSI 2K CSI 1G`, CJK, tabs, combining accents, an emoji's variation
  selector, deleted characters), each rendered in seconds, with the line a terminal shows.
- **arrival**: one output through the core middleware's tool hook with a real filesystem
  backend (render, raw file, eviction, preview, counting), each in a fresh process: seconds,
  MB per second, and peak resident memory above the start (the peak of making the output left
  out) as a multiple of the output's UTF-8 size, for a 20 MB single line, a 50 MiB log, 20 MB
  of short lines (about 2.9 million), 20 MB of binary (a tool returning `bytes`: its `repr`,
  2.7 times the bytes, is what arrives), 10 MiB of progress bars, 2 MB of indented tracebacks (captured subprocess
  output: every line may start one), 20 MB of a log whose status line is redrawn in place every 50 lines (33,000
  screen regions), and 5 MB each of other shapes agents meet: `pytest -v` in colour, a man page, apt's status row, a
  spinner of emoji, a diff of code (every line an assignment), a flood of error lines, `pytest -v` with failures,
  and lines each redrawn once after `\\r` or after an erase.

    python -m ctxwarden.bench.render [--data tests/data/terminal] [--skip-arrival]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage

from ctxwarden.bench.footprint import MIB, _answer, _tool_request, high_water_bytes, log_output, resident_bytes
from ctxwarden.clip.terminal import full_screen_lines, render
from ctxwarden.core.meter import TokenMeter
from ctxwarden.core.policy import ContextPolicy
from ctxwarden.stack.build import context_middleware

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "terminal"


def render_rows(data: Path = DATA, render_mib: int = 10) -> list[dict[str, Any]]:
    """One row per recorded output (see the module docstring)."""
    meter = TokenMeter()
    rows = []
    for path in sorted(data.glob("*.raw")):
        raw = path.read_bytes().decode("utf-8")
        shown = render(raw).text
        lines = set(shown.split("\n"))
        final = full_screen_lines(raw)
        big = raw * (render_mib * MIB // len(raw) + 1)
        started = time.perf_counter()
        drawn = render(big)
        took = time.perf_counter() - started
        size = len(big.encode("utf-8")) / MIB
        before, after = meter.counter(raw), meter.counter(shown)
        rows.append(
            {
                "output": path.stem,
                "raw_bytes": len(raw.encode("utf-8")),
                "tokens_before": before,
                "tokens_after": after,
                "fewer_x": round(before / max(1, after), 1),
                "final_lines_kept": round(sum(1 for line in final if line in lines) / max(1, len(final)), 4),
                "ms_per_mib": round(took * 1000 / size, 1),
                "approximate_lines": drawn.approximate_lines,
            }
        )
    return rows


_ALPHABET = bytes(b"abcdefghij0123456789"[i % 20] for i in range(256))
"""Each byte value to a letter or digit: random bytes become one long line of them without a list per character."""


def _output(shape: str, size: int) -> ToolMessage:
    if shape == "single-line":
        text: Any = random.Random(0).randbytes(size).translate(_ALPHABET).decode("ascii")
    elif shape == "log":
        text = log_output(size)
    elif shape == "short-lines":  # millions of lines of a few characters: a list of them is ten times their size
        text = "".join(f"{i}\n" for i in range(size // 7))
    elif shape == "binary":
        text = repr(random.Random(0).randbytes(size))  # what langchain hands on for a tool returning bytes
    elif shape == "indented-tracebacks":  # captured subprocess output, indented: every line may start a traceback
        text = "".join(f"  Traceback (most recent call last):\n    File 'job_{i}.py'\n" for i in range(size // 56))
    elif shape == "coloured-log":  # `pytest -v --color=yes` on a large suite: six colour codes a line
        text = "".join(
            f"\x1b[32mPASSED\x1b[0m tests/test_mod_{i % 977}.py::test_case_{i} \x1b[2m[{i % 100}%]\x1b[0m\n"
            for i in range(size // 70)
        )
    elif shape == "man-page":  # `man` in a pseudo-terminal: bold and underline written by overstriking
        bold = "".join(f"{c}\b{c}" for c in "OPTIONS")
        underlined = "".join(f"_\b{c}" for c in "--format")
        line = f"{bold}\n       {underlined}=<format>\n           Pretty-print the commit logs in a given format.\n"
        text = line * (size // len(line))
    elif shape == "apt-status":  # apt's status row below its log, which scrolls in a region above it
        status = "\x1b7\x1b[24;0f\x1b[42m\x1b[30mProgress: [{:3d}%]\x1b[49m\x1b[39m \x1b8"
        updates = "".join(
            f"Setting up libfoo{i} (1.2.{i}-1) ...\n" + status.format(i % 100) for i in range(size // 110)
        )
        text = f"\x1b7\x1b[0;23r\x1b8\x1b[1A{updates}\x1b7\x1b[0;24r\x1b8\x1b[1A\x1b[J"
    elif shape == "emoji-spinner":  # one line of spinner frames, each with a variation selector (npm audit's ⚠️)
        text = "".join(f"\r⚠️ {i} vulnerabilities" for i in range(size // 23)) + "\n"
    elif shape == "status-redraws":  # a status line redrawn in place (cursor up, erase) after every 49 lines of log
        block = "".join(f"item {j:02d} ok\n" for j in range(49))
        text = "".join(f"{block}\x1b[1A\x1b[2K\rprogress: batch {i}\n" for i in range(size // 600))
    elif shape == "code-diff":  # `git diff` of code: most lines hold `=`, which test summaries hold too
        text = "".join(
            f"@@ -{i},3 +{i},3 @@\n-    total_{i} = compute(x)\n+    total_{i} = compute(x, y)\n"
            for i in range(size // 70)
        )
    elif shape == "error-flood":  # a service log where every line is an error
        text = "".join(
            f"10:00:{i % 60:02d} ERROR worker-{i % 8}: request {i} failed: timeout\n" for i in range(size // 55)
        )
    elif shape == "pytest-failures":  # `pytest -v` of a suite failing a third of its tests
        outcomes = ("FAILED", "PASSED", "PASSED")
        text = "".join(
            f"tests/test_mod_{i % 977}.py::test_case_{i} {outcomes[i % 3]} [{i % 100:3d}%]\n" for i in range(size // 50)
        )
    elif shape == "redrawn-lines":  # each line drawn, then redrawn after `\r` or after an erase (npm, wget)
        text = "".join(
            f"fetching pkg_{i}\r\x1b[2K\x1b[1Gfetched pkg_{i} \x1b[32mok\x1b[0m\n" for i in range(size // 45)
        )
    else:  # progress bars: the recorded tqdm loop, repeated
        raw = (DATA / "tqdm-loop.raw").read_bytes().decode("utf-8")
        text = (raw * (size // len(raw) + 1))[:size]
    return ToolMessage(text, tool_call_id="big", name="bash", id="tool-big")


def arrival(shape: str, size: int) -> dict[str, Any]:
    """Time and peak memory of one output of `shape` arriving through the tool hook (run in a fresh process)."""
    with tempfile.TemporaryDirectory(prefix="ctxwarden-render-") as folder:
        backend = FilesystemBackend(root_dir=folder, virtual_mode=True)
        core = context_middleware(policy=ContextPolicy(window=200_000), backend=backend, trace=False)[0]
        output = _output(shape, size)
        utf8 = len(str(output.content).encode("utf-8", "surrogatepass"))
        gc.collect()
        reset = _reset_high_water()  # the peak of making the output is not the arrival's
        before = resident_bytes()
        started = time.perf_counter()
        kept = core.wrap_tool_call(_tool_request("big", {"messages": []}), _answer(output))
        took = time.perf_counter() - started
        peak = _high_water() if reset else high_water_bytes()
        above = max(0, max(peak, resident_bytes()) - before)
        shown = len(str(kept.content)) if isinstance(kept, ToolMessage) else -1
    return {
        "shape": shape,
        "output_mib": round(utf8 / MIB, 1),
        "seconds": round(took, 2),
        "mib_per_s": round(utf8 / MIB / max(took, 1e-9), 1),
        "peak_ratio": round(above / utf8, 2),
        "shown_chars": shown,
    }


def _reset_high_water() -> bool:
    """Start this process's peak resident memory afresh (Linux: `/proc/self/clear_refs`); whether it could. Memory
    freed while the output was made is first handed back (glibc's `malloc_trim`), so it is not counted as in use
    before the arrival and then reused unseen."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _high_water() -> int:
    """The peak resident memory since `_reset_high_water` (`VmHWM`, which the reset starts afresh)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return high_water_bytes()


ARRIVALS = (
    ("single-line", 20_000_000),
    ("log", 50 * MIB),
    ("short-lines", 20_000_000),
    ("binary", 20_000_000),
    ("progress", 10 * MIB),
    ("indented-tracebacks", 2_000_000),
    ("status-redraws", 20_000_000),
    ("coloured-log", 20_000_000),
    ("emoji-spinner", 5_000_000),
    ("man-page", 5_000_000),
    ("apt-status", 5_000_000),
    ("code-diff", 5_000_000),
    ("error-flood", 5_000_000),
    ("pytest-failures", 5_000_000),
    ("redrawn-lines", 5_000_000),
)


SPINNER_FRAMES = 10_000
"""Frames of each one-line spinner: about 200,000 characters, within the emulator's budget."""

SPINNERS = {
    "backspace": lambda i: "|/-\\"[i % 4] + "\b",
    "npm": lambda i: f"\x1b[2K\x1b[1G⠋ Installing dependencies ({i})",
    "cjk": lambda i: f"\x1b[2K\x1b[1G⠋ 下载 {i}",
    "tab": lambda i: f"\x1b[2K\x1b[1G\t⠋ step {i}",
    "combining": lambda i: f"\x1b[2K\x1b[1Gcafe\u0301 {i}",
    "emoji": lambda i: f"\x1b[2K\x1b[1G⚠\ufe0f {i} vulnerabilities",
    "delete": lambda i: f"\x1b[1G\x1b[P⠋ {i}",
    "no return": lambda i: f"\t⠋ step {i}\x1b[2K",
    "delete, no erase": lambda i: f"{i % 10}\x1b[P",
}
"""One line each, as spinners write it: every frame after the cursor goes back, erasing or overwriting the last. The
last two never return: the cursor runs on to the right, the first erasing its line at each frame, the second deleting
a character where nothing follows it and erasing nothing."""


def spinner_rows(frames: int = SPINNER_FRAMES) -> list[dict[str, Any]]:
    """Seconds to render each of `SPINNERS` drawn `frames` times on one line, and the line a terminal shows."""
    rows = []
    for name, frame in SPINNERS.items():
        line = "".join(frame(i) for i in range(frames))
        started = time.perf_counter()
        shown = render(line + "\n")
        rows.append(
            {
                "spinner": name,
                "chars": len(line),
                "seconds": round(time.perf_counter() - started, 3),
                "shown": shown.text.strip(),
                "approximate_lines": shown.approximate_lines,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxwarden.bench.render", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of recorded .raw outputs")
    parser.add_argument("--skip-arrival", action="store_true", help="only the render table")
    args = parser.parse_args(argv)
    print(json.dumps({"render": render_rows(args.data)}, indent=1))
    print(json.dumps({"spinners": spinner_rows()}, indent=1, ensure_ascii=False))
    if not args.skip_arrival:
        rows = [_subprocess_arrival(shape, size) for shape, size in ARRIVALS]
        print(json.dumps({"arrival": rows}, indent=1))
    return 0


def _subprocess_arrival(shape: str, size: int) -> dict[str, Any]:
    code = f"import json; from ctxwarden.bench import render; print(json.dumps(render.arrival({shape!r}, {size})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=1_800)
    if done.returncode != 0:  # a row that fails (out of memory, say) is reported, not the end of the table
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"shape": shape, "output_bytes": size, "failed": f"exit {done.returncode}: {last}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["ARRIVALS", "SPINNERS", "arrival", "main", "render_rows", "spinner_rows"]
