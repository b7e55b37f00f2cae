"""A throwaway Postgres for the tests: the installed server binaries, a temporary data dir, 127.0.0.1 only.

`initdb` refuses to run as root, so under root the server runs as the `postgres` user (the
Debian package creates it) with a data dir it owns. The server listens on 127.0.0.1 on a
free port (and on a unix socket inside its data dir), with durability off because it dies
with the test run; `stop()` kills it and removes the data dir. Each test gets its own
database (`create_database`), so tests never see each other's rows.

With no server binaries installed the fixture skips with the reason; `.ci/run` installs
them so CI never skips.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT_S = 60
SERVER_USER = "postgres"


def server_binaries() -> Path | None:
    """The newest installed `bin` folder holding `initdb` and `postgres`, or `None`."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    on_path = shutil.which("initdb")
    if not found and on_path:
        found = [Path(on_path).resolve().parent]
    found = [b for b in found if (b / "postgres").is_file() and (b / "pg_ctl").is_file()]
    return found[-1] if found else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One server process over a temporary data dir; see the module docstring."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.root = Path(tempfile.mkdtemp(prefix="ctxwarden-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.user = "ctxwarden"
        self._run_as: dict[str, object] = {}
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam(SERVER_USER)
            except KeyError:
                pytest.skip(f"running as root and there is no {SERVER_USER!r} user for initdb to run as")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def _run(self, *args: str) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "LANG": "C", "HOME": str(self.root)}
        done = subprocess.run(
            [str(self.binaries / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            env=env,
            cwd=self.root,
            **self._run_as,  # type: ignore[call-overload]
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stdout}\n{done.stderr}")

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--locale=C", "-N")
        for attempt in range(3):
            self.port = free_port()
            options = (
                f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "server.log"), "-w", "start"
                )
                return
            except RuntimeError:
                if attempt == 2:
                    log = (self.root / "server.log").read_text(errors="replace")[-2_000:]
                    raise RuntimeError(f"the throwaway Postgres did not start:\n{log}") from None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running throwaway Postgres for the whole test session (skips when no server binaries are installed)."""
    binaries = server_binaries()
    if binaries is None:
        pytest.skip(
            "no Postgres server binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin or on PATH; "
            "install the postgresql package to run the Postgres tests"
        )
    server = PostgresServer(binaries)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database on the throwaway server, for one test."""
    return postgres_server.create_database()
