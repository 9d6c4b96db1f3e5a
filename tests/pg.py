"""A throwaway PostgreSQL cluster for the tests: ``initdb`` in a temp dir, ``postgres`` on a free
loopback port with its socket in the same dir, removed when the session ends.

PostgreSQL refuses to run as root (as CI does), so as root the cluster belongs to an
unprivileged user (``nobody`` unless ``PG_USER`` says otherwise) and both programs run under
``runuser``; otherwise they run as the current user. The binaries come from ``PG_BIN``, else
the newest ``/usr/lib/postgresql/*/bin``, else ``PATH``. Failing to start is an error, never a
skip: ``make test`` installs the server first (``scripts/ensure-postgres.sh``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, List, Optional

__all__ = ["PostgresServer", "postgres_server"]


@dataclass(frozen=True)
class PostgresServer:
    """A running cluster: connect with ``psycopg.connect(server.dsn)``."""

    host: str
    port: int
    user: str
    dbname: str = "postgres"

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}"


def find_bin_dir() -> str:
    """The directory holding ``initdb`` and ``postgres``; raises if there is none."""
    candidates: List[str] = []
    if os.environ.get("PG_BIN"):
        candidates.append(os.environ["PG_BIN"])
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
        reverse=True,
    )
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(os.path.dirname(initdb))
    for directory in candidates:
        if all(os.access(os.path.join(directory, exe), os.X_OK) for exe in ("initdb", "postgres")):
            return directory
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, postgres) not found in PG_BIN, /usr/lib/postgresql/*/bin "
        "or PATH; run `make postgres` (scripts/ensure-postgres.sh) or set PG_BIN"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_server() -> Iterator[PostgresServer]:
    """Start a cluster, yield it, and stop and remove it afterwards (a generator for a fixture)."""
    bin_dir = find_bin_dir()
    root = tempfile.mkdtemp(prefix="beam-s3-sink-pg-")
    data, log = os.path.join(root, "data"), os.path.join(root, "postgres.log")
    prefix: List[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam(os.environ.get("PG_USER", "nobody"))
        os.chmod(root, 0o755)
        os.chown(root, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", owner.pw_name, "--"]
        user = owner.pw_name
    else:
        user = pwd.getpwuid(os.geteuid()).pw_name
    process: Optional[subprocess.Popen] = None
    try:
        done = subprocess.run(
            prefix
            + [
                os.path.join(bin_dir, "initdb"),
                "-D",
                data,
                "-U",
                user,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=root,
        )
        if done.returncode:
            raise RuntimeError(f"initdb failed ({done.returncode}):\n{done.stdout}")
        port = _free_port()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                prefix
                + [
                    os.path.join(bin_dir, "postgres"),
                    "-D",
                    data,
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={root}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "timezone=UTC",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
            )
        server = PostgresServer("127.0.0.1", port, user)
        _wait_ready(server, process, log)
        yield server
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(server: PostgresServer, process: subprocess.Popen, log: str) -> None:
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited with code {process.returncode}:\n{_tail(log)}")
        try:
            psycopg.connect(server.dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections within 60 s:\n{_tail(log)}") from None
            time.sleep(0.2)


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"
