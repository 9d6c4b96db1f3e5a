"""Shared fixtures: a real S3 server (moto in server mode, its own process, on a free
loopback port), a fresh bucket per test, and the Beam runners every pipeline test runs on:
three in this process, and Flink, Spark and Prism job servers started once per session the
first time a test needs them (tests/jobservers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from typing import Dict, Iterator, List, Optional

import boto3
import pytest
import requests

from beam_s3_sink import S3Config

# Worker processes (multi_processing DirectRunner, Beam's stager) import the tests' helpers
# by name, as a remote worker would import user code: put them on their path.
_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_HERE, os.path.dirname(_HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key-never-shown"
REGION = "us-east-1"

#: Runners that run in this process. "direct" names the FnApiRunner, which is what Beam 2.77's
#: DirectRunner falls back to after first trying Prism (a failed download here, every pipeline).
LOCAL_RUNNERS = {
    "direct": ["--runner=FnApiRunner"],
    "multiprocess": ["--runner=FnApiRunner", "--direct_running_mode=multi_processing",
                     "--direct_num_workers=2"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}
#: Runners on a job server of the session (tests/jobservers.py), with parallelism 2: Flink with
#: SDK workers in this process (LOOPBACK) and with an EXTERNAL pool of two worker processes,
#: Spark (local[2]), Prism.
DISTRIBUTED_RUNNERS = ("flink", "flink-external", "spark", "prism")
RUNNERS = sorted([*LOCAL_RUNNERS, *DISTRIBUTED_RUNNERS])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto(port: int, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start moto's S3 server in its own process and wait until it answers.

    ``env`` adds environment variables for the server, e.g. ``INITIAL_NO_AUTH_ACTION_COUNT``
    to make it check signatures and IAM policies after that many requests."""
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with code {process.returncode}")
        try:
            requests.get(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return process
        except requests.RequestException:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("moto server did not start within 30 s")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    port = free_port()
    process = start_moto(port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def s3_config(s3_endpoint: str) -> S3Config:
    return S3Config(endpoint_url=s3_endpoint, region_name=REGION, access_key_id=ACCESS_KEY,
                    secret_access_key=SECRET_KEY, path_style=True, max_attempts=3)


@pytest.fixture(scope="session")
def s3_client(s3_config: S3Config):
    return s3_config.make_client()


@pytest.fixture
def bucket(s3_client) -> str:
    name = f"test-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return name


def runner_args(name: str, request: Optional[pytest.FixtureRequest] = None) -> List[str]:
    """Pipeline arguments for runner ``name``; a distributed runner needs the test's ``request``
    (its job server is a session fixture, started on first use)."""
    if name in LOCAL_RUNNERS:
        return list(LOCAL_RUNNERS[name])
    if request is None:
        raise ValueError(f"runner {name!r} needs the test's request to start its job server")
    if name == "prism":
        return ["--runner=PrismRunner", f"--job_endpoint={request.getfixturevalue('prism_job_server').address}",
                "--environment_type=LOOPBACK"]
    server = request.getfixturevalue("spark_job_server" if name == "spark" else "flink_job_server")
    args = ["--runner=PortableRunner", f"--job_endpoint={server.address}", "--parallelism=2"]
    if name == "flink-external":
        pool = request.getfixturevalue("worker_pool")
        return args + ["--environment_type=EXTERNAL", f"--environment_config={pool.address}",
                       "--sdk_worker_parallelism=2"]
    return args + ["--environment_type=LOOPBACK"]


@pytest.fixture(params=RUNNERS)
def runner(request) -> List[str]:
    """Beam pipeline arguments for each runner the package must work on."""
    return runner_args(request.param, request)


@pytest.fixture(scope="session")
def runner_logs(tmp_path_factory) -> str:
    """Where the session's job servers and worker pool write their logs."""
    return str(tmp_path_factory.mktemp("runner-logs"))


@pytest.fixture(scope="session")
def flink_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam 2.62's Flink job server with an embedded MiniCluster, for the session."""
    import jobservers

    yield from _serve(lambda: jobservers.flink_job_server(runner_logs))


@pytest.fixture(scope="session")
def spark_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam 2.62's Spark job server on a local[2] master, for the session."""
    import jobservers

    yield from _serve(lambda: jobservers.spark_job_server(runner_logs))


@pytest.fixture(scope="session")
def prism_job_server(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """One Prism process shared by every Prism pipeline of the session."""
    import jobservers

    yield from _serve(lambda: jobservers.prism_job_server(runner_logs))


@pytest.fixture(scope="session")
def worker_pool(runner_logs: str) -> Iterator["jobservers.ServerProcess"]:
    """Beam's EXTERNAL SDK worker pool (worker processes started on the runner's demand)."""
    import jobservers

    yield from _serve(lambda: jobservers.worker_pool(runner_logs))


def _serve(start) -> Iterator["jobservers.ServerProcess"]:
    import jobservers

    try:
        server, failure = start(), None
    except jobservers.RunnerSetupError as exc:
        server, failure = None, str(exc)
    if failure:
        pytest.fail(failure, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster (tests/pg.py); fails, never skips, when it cannot start."""
    from pg import postgres_server

    yield from postgres_server()
