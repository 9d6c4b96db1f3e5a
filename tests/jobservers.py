"""Real distributed runners for the test session: Flink, Spark and Prism job servers and an
EXTERNAL SDK worker pool, each started once per session, lazily, on free loopback ports.

``scripts/fetch-runners.sh`` (``make runners``) puts what they need into the cache; nothing is
downloaded here. A missing artifact or a server that does not come up FAILS the test that needs
it, with a message saying what to run; nothing is skipped::

    ${BEAM_S3_SINK_CACHE:-~/.cache/beam-s3-sink}
      flink/lib/*.jar ──> java ... FlinkJobServerDriver --flink-master [local] --job-port P ─┐
      spark/lib/*.jar ──> java ... SparkJobServerDriver --spark-master-url local[2] ...     ├─> job endpoint
      prism/prism     ──> prism --job_port P                                                ─┘  localhost:P
                                                    ▲
    pytest ── pipeline ── --runner=PortableRunner --job_endpoint=localhost:P
                          --environment_type=LOOPBACK   (SDK worker threads in the pytest process)
                          --environment_type=EXTERNAL --environment_config=localhost:W
                             └─> python -m apache_beam.runners.worker.worker_pool_main --service_port=W
                                 (starts one SDK worker process per worker the runner asks for)

The servers are plain child processes of the pytest process, each in its own process group
(stopped with it at the end of the session), logging to a file whose tail a failure shows.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

import grpc

#: The Beam release whose Java job servers the cache holds (Maven Central serves no newer
#: job-service module); the Python SDK under test is whatever is installed (2.77).
JOB_SERVER_VERSION = "2.62.0"

JAVA_OPENS = [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("sun.nio.ch", "java.nio", "java.lang", "java.util", "java.lang.invoke")
]

START_TIMEOUT = 180.0


def cache_dir() -> str:
    """Where ``scripts/fetch-runners.sh`` keeps the runners' classpaths and binaries."""
    return os.environ.get("BEAM_S3_SINK_CACHE") or os.path.expanduser("~/.cache/beam-s3-sink")


class RunnerSetupError(RuntimeError):
    """A runner's artifacts are missing or its server did not start (the test fails)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _artifact(*parts: str) -> str:
    path = os.path.join(cache_dir(), *parts)
    stamp = os.path.join(cache_dir(), parts[0], ".stamp")
    if not os.path.exists(path) or not os.path.exists(stamp):
        raise RunnerSetupError(
            f"{path} is missing (or its fetch did not finish): run `make runners` "
            f"(scripts/fetch-runners.sh) to fetch the Flink, Spark and Prism runners into {cache_dir()}"
        )
    return path


@dataclasses.dataclass(frozen=True)
class ServerProcess:
    """A server started for the session: its process, the address it serves, its log file."""

    name: str
    address: str
    process: subprocess.Popen
    log_path: str

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server and everything it started (its process group): TERM, then KILL."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
            except ProcessLookupError:
                pass
        else:  # the leader is gone; its children may not be
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def start_server(
    name: str, command: Sequence[str], port: int, log_dir: str, env: Optional[Dict[str, str]] = None
) -> ServerProcess:
    """Start ``command`` in its own process group and wait until its gRPC ``port`` answers."""
    log_path = os.path.join(log_dir, f"{name}.log")
    log = open(log_path, "wb")
    process = subprocess.Popen(
        list(command),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    log.close()
    server = ServerProcess(name, f"localhost:{port}", process, log_path)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RunnerSetupError(
                f"{name} exited with code {process.returncode} while starting "
                f"({' '.join(command)}); its log {log_path} ends:\n{server.log_tail()}"
            )
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=1)
            return server
        except grpc.FutureTimeoutError:
            if time.monotonic() > deadline:
                server.stop()
                raise RunnerSetupError(
                    f"{name} did not answer on port {port} within {START_TIMEOUT:.0f} s; "
                    f"its log {log_path} ends:\n{server.log_tail()}"
                ) from None
        finally:
            channel.close()


def java_job_server(name: str, runner: str, log_dir: str, extra: Sequence[str] = ()) -> ServerProcess:
    """Start Beam's Flink or Spark job server from the cached classpath (``runner``: flink|spark)."""
    lib = _artifact(runner, "lib")
    driver = {
        "flink": "org.apache.beam.runners.flink.FlinkJobServerDriver",
        "spark": "org.apache.beam.runners.spark.SparkJobServerDriver",
    }[runner]
    port = _free_port()
    command = [
        "java",
        "-Xmx2g",
        *JAVA_OPENS,
        "-cp",
        os.path.join(lib, "*"),
        driver,
        "--job-host",
        "localhost",
        "--job-port",
        str(port),
        "--artifact-port",
        "0",
        "--expansion-port",
        "0",
        *extra,
    ]
    return start_server(name, command, port, log_dir)


def flink_job_server(log_dir: str, conf_dir: Optional[str] = None, name: str = "flink") -> ServerProcess:
    """Flink's job server with an embedded MiniCluster (``[local]``); ``conf_dir`` holds a
    ``config.yaml`` for it (e.g. a restart strategy)."""
    extra = ["--flink-master", "[local]"] + (["--flink-conf-dir", conf_dir] if conf_dir else [])
    return java_job_server(name, "flink", log_dir, extra)


def spark_job_server(log_dir: str) -> ServerProcess:
    """Spark's job server with an in-process ``local[2]`` master."""
    return java_job_server("spark", "spark", log_dir, ["--spark-master-url", "local[2]"])


def prism_job_server(log_dir: str) -> ServerProcess:
    """One Prism process for the session; pipelines reach it with ``--job_endpoint``."""
    binary = _artifact("prism", "prism")
    port = _free_port()
    return start_server("prism", [binary, "--job_port", str(port), "--serve_http=false"], port, log_dir)


def worker_pool(log_dir: str, name: str = "worker-pool") -> ServerProcess:
    """Beam's EXTERNAL worker pool: it starts one SDK worker process (``python -c ...``, the
    ``python`` first on ``PATH``: this venv's) per worker the runner asks for."""
    port = _free_port()
    env = {"PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}
    command = [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main", f"--service_port={port}"]
    return start_server(name, command, port, log_dir, env)


def child_pids(pid: int) -> List[int]:
    """The direct children of process ``pid`` (from /proc)."""
    children: List[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry))
    return sorted(children)
