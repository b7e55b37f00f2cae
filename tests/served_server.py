"""The example LangGraph server, run for the tests: `langgraph dev` (in memory) on 127.0.0.1, bounded in time.

The example folder (`examples/server`: `agent.py` and `langgraph.json`) is copied into a
temporary folder and started there, as a user would start it: the server resolves the
graph path against its working directory and keeps its in-memory state under
`.langgraph_api/` there, so the repository stays clean. `AGENT_FILES` points the agent's
offloaded files and trace into the same temporary folder, where the tests read them.

The server binds 127.0.0.1 on a free port, without reload, browser, analytics or
tracing; the start is bounded (`START_TIMEOUT_S`) and a server that dies while starting
fails with the tail of its log. `stop()` ends the process group it started (TERM, then
KILL after `STOP_TIMEOUT_S`). A test module shares one server through a module-scoped
fixture over `running_server()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "server"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 15


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli() -> list[str]:
    """The `langgraph` command of this environment (the dev extra installs `langgraph-cli[inmem]`)."""
    beside = Path(sys.executable).with_name("langgraph")
    found = str(beside) if beside.is_file() else shutil.which("langgraph")
    if found is None:
        raise RuntimeError("the langgraph CLI is not installed. Fix: pip install -e '.[dev]' (it has langgraph-cli).")
    return [found]


class ServedAgent:
    """One `langgraph dev` process serving the example graph; see the module docstring."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ctxwarden-served-"))
        self.files = self.root / "agent-files"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.root / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def trace(self) -> Path:
        return self.files / "trace.sqlite"

    def start(self) -> None:
        for name in ("agent.py", "langgraph.json"):
            shutil.copy(EXAMPLE / name, self.root / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
        env.update(
            AGENT_FILES=str(self.files),
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            LANGSMITH_TRACING="false",
            PYTHONUNBUFFERED="1",
        )
        self.port = free_port()
        command = [*_cli(), "dev", "--host", "127.0.0.1", "--port", str(self.port), "--no-reload", "--no-browser"]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.process.returncode}:\n{self._tail()}")
            if self._ok():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"langgraph dev did not answer within {START_TIMEOUT_S} s:\n{self._tail()}")

    def _ok(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ok", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3_000:] if self.log.is_file() else "(no log)"

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_server() -> Iterator[ServedAgent]:
    """The example agent behind `langgraph dev`, stopped (and its folder removed) on the way out."""
    server = ServedAgent()
    try:
        server.start()
        yield server
    finally:
        server.stop()
