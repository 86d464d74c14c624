"""Throwaway servers on loopback for the tests and the evals: a Postgres cluster (`initdb` into a temporary
directory, `pg_ctl` on a free port) and a Chroma server (`chroma run`). Each is stopped and removed by `stop()`.

Postgres refuses to run as root, so as root (CI) the cluster is run as the unprivileged user `nobody`, in a
directory it owns. The binaries come from the Debian `postgresql` package (`/usr/lib/postgresql/<version>/bin`),
which `.ci/run` installs when it is missing.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

POSTGRES_ROOT = Path("/usr/lib/postgresql")
START_TIMEOUT_S = 60
UNPRIVILEGED_USER = "nobody"


class ServerUnavailable(Exception):
    """The server's binaries are missing or it did not start; the message says which and how to fix it."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_binaries() -> Path | None:
    """The newest installed server's bin directory."""
    found = sorted((p.parent for p in POSTGRES_ROOT.glob("*/bin/initdb")), key=lambda b: int(b.parent.name))
    return found[-1] if found else None


class PostgresCluster:
    """A fresh cluster: `url` reaches its `postgres` database as the superuser, without a password (trust on
    loopback only). `durable=False` turns fsync off: for tests, where only bot processes are killed, never the
    database; the evals measure with the defaults."""

    def __init__(self, *, durable: bool = False):
        binaries = postgres_binaries()
        if binaries is None:
            raise ServerUnavailable(f"no Postgres server under {POSTGRES_ROOT}: apt-get install -y postgresql "
                                    "(bash .ci/run does)")
        self._bin = binaries
        self.directory = Path(tempfile.mkdtemp(prefix="gdprbot-postgres-"))
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam(UNPRIVILEGED_USER)
            os.chown(self.directory, nobody.pw_uid, nobody.pw_gid)
            self._as_user = ["runuser", "-u", UNPRIVILEGED_USER, "--"]
        self.port = free_port()
        data, self.log_path = self.directory / "data", self.directory / "postgres.log"
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        try:
            self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions")
            self._run("pg_ctl", "-D", str(data), "-l", str(self.log_path), "-w", "-t", str(START_TIMEOUT_S), "-o",
                      options, "start")
        except (subprocess.CalledProcessError, OSError) as exc:
            self.stop()
            raise ServerUnavailable(f"Postgres did not start ({exc}); see {self.log_path}") from exc
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"gdprbot_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self) -> None:
        data = self.directory / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run([*self._as_user, str(self._bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, check=False, timeout=START_TIMEOUT_S)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([*self._as_user, str(self._bin / program), *args], check=True, capture_output=True,
                       cwd=self.directory, timeout=START_TIMEOUT_S)


class ChromaServer:
    """`chroma run` on a free loopback port, storing under `path` (a new temporary directory by default)."""

    def __init__(self, path: Path | None = None):
        from core.dense import open_chroma

        chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
        self._temporary = path is None
        self.path = Path(path or tempfile.mkdtemp(prefix="gdprbot-chroma-"))
        self.port = free_port()
        self.host = "127.0.0.1"
        self._process = subprocess.Popen([chroma, "run", "--path", str(self.path), "--host", self.host, "--port",
                                          str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                open_chroma(Path("unused"), self.host, self.port).heartbeat()
                return
            except Exception:  # not listening yet: chromadb raises a different error for each way of that
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self.stop()
                    raise ServerUnavailable("chroma run did not start") from None
                time.sleep(0.3)

    def client(self):
        from core.dense import open_chroma

        return open_chroma(Path("unused"), self.host, self.port)

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)


__all__ = ["ChromaServer", "PostgresCluster", "ServerUnavailable", "free_port", "postgres_binaries"]
