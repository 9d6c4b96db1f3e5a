"""A copy killed with ``kill -9`` while its parts upload: nothing visible, an exact rerun by
sink id, a clear refusal for another copy, and the clean-up command (``--abort``).

The copy runs in a process of its own (``tests/copy_worker.py``, DirectRunner in-process)
on a slowly generated data set; the test polls ListMultipartUploads/ListParts and kills the
process once the first parts have landed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from beam_s3_sink import CommittedCopyError, abort_copy
from beam_s3_sink.keys import CopyKeys, S3Location
from copy_worker import slow_row
from helpers import data_keys, get_bytes, list_objects, pending_uploads, run_copy

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = 120_000  # about 25 MB of CSV: several 8 MiB parts


def start_and_kill(tmp_path, endpoint: str, bucket: str, prefix: str, sink_id: str, client) -> int:
    """Start a slow copy in its own process; kill -9 it once parts have landed; the parts seen."""
    job = tmp_path / f"{sink_id}.json"
    job.write_text(
        json.dumps(
            {
                "endpoint": endpoint,
                "bucket": bucket,
                "rows": ROWS,
                "slow": 0.05,
                "copies": [[prefix, sink_id]],
                "format": "csv",
            }
        )
    )
    process = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "copy_worker.py"), str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    parts = 0
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not parts:
            assert process.poll() is None, f"the copy ended before parts landed: {process.communicate()}"
            for upload in client.list_multipart_uploads(Bucket=bucket, Prefix=prefix + "/").get("Uploads", ()):
                parts += len(
                    client.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]).get("Parts", ())
                )
            time.sleep(0.1)
        assert parts, "no part landed within 240 s"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
    assert process.returncode == -signal.SIGKILL
    return parts


def rows_of(client, bucket: str, prefix: str) -> list:
    lines = [
        line.split(",")
        for key in data_keys(client, bucket, prefix)
        for line in get_bytes(client, bucket, key).decode().splitlines()
    ]
    return sorted((int(i), name, float(amount)) for i, name, amount in lines)


def expected_lines() -> list:
    return sorted((r["id"], r["name"], r["amount"]) for r in map(lambda i: slow_row(i, 0), range(ROWS)))


def copy_kwargs(bucket, prefix, sink_id, s3_config, **extra):
    import pyarrow as pa

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
    return dict(
        uri=f"s3://{bucket}/{prefix}",
        format="csv",
        schema=schema,
        sink_id=sink_id,
        s3=s3_config,
        generate=(lambda i: slow_row(i, 0), ROWS),
        **extra,
    )


def test_killed_copy_leaves_nothing_visible_and_a_rerun_is_exact(s3_endpoint, s3_config, s3_client, bucket, tmp_path):
    prefix, sink_id = "crashed", "nightly"
    keys = CopyKeys(S3Location(bucket, prefix), sink_id)
    parts = start_and_kill(tmp_path, s3_endpoint, bucket, prefix, sink_id, s3_client)
    assert parts >= 1
    objects = list_objects(s3_client, bucket, prefix + "/")
    assert data_keys(s3_client, bucket, prefix) == [], "no data file of the killed copy is visible"
    assert keys.sentinel in objects, "the sentinel says the copy is incomplete"
    assert json.loads(get_bytes(s3_client, bucket, keys.claim))["sink_id"] == sink_id
    assert pending_uploads(s3_client, bucket), "the killed copy's uploads are still pending"

    # Another copy into the path is refused, naming the incomplete copy and the clean-up.
    other = run_copy(**copy_kwargs(bucket, prefix, "someone-else", s3_config, fail_on_error=False))
    assert not other.ok
    assert "'nightly'" in other.error
    assert f"beam-s3-copy --abort nightly --output s3://{bucket}/{prefix}" in other.error
    assert list_objects(s3_client, bucket, prefix + "/") == objects, "the refused copy wrote nothing"

    # A rerun with the same sink id finishes the copy exactly.
    result = run_copy(**copy_kwargs(bucket, prefix, sink_id, s3_config))
    assert result.ok and result.rows == ROWS
    assert rows_of(s3_client, bucket, prefix) == expected_lines()
    assert pending_uploads(s3_client, bucket) == [], "no pending multipart upload is left"
    after = list_objects(s3_client, bucket, prefix + "/")
    assert sorted(after) == sorted([keys.manifest] + data_keys(s3_client, bucket, prefix)), (
        f"no stray object (sentinel, claim): {sorted(after)}"
    )
    assert sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in data_keys(s3_client, bucket, prefix)]


def test_abort_removes_what_a_killed_copy_left_and_nothing_else(s3_endpoint, s3_config, s3_client, bucket, tmp_path):
    prefix = "aborted"
    start_and_kill(tmp_path, s3_endpoint, bucket, prefix, "victim", s3_client)
    left = list_objects(s3_client, bucket, prefix + "/")
    # A finished copy of another sink id in the same path (if_exists="append" shares paths).
    keep = run_copy(
        [{"id": 1, "name": "kept", "amount": 1.0}],
        **{k: v for k, v in copy_kwargs(bucket, prefix, "kept", s3_config).items() if k != "generate"},
        if_exists="append",
    )
    kept = {k: v for k, v in list_objects(s3_client, bucket, prefix + "/").items() if k not in left}
    assert keep.ok and len(kept) == 2
    # A committed copy is refused without force.
    with pytest.raises(CommittedCopyError, match="--force"):
        abort_copy(f"s3://{bucket}/{prefix}", "kept", s3=s3_config)

    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_config.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_config.secret_access_key,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "beam_s3_sink.cli",
            "--abort",
            "victim",
            "--output",
            f"s3://{bucket}/{prefix}",
            f"--s3_endpoint_url={s3_endpoint}",
            "--s3_region_name=us-east-1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=os.path.dirname(HERE),
    )
    assert done.returncode == 0, done.stderr
    assert "copy 'victim'" in done.stdout and "aborted" in done.stdout
    assert f"deleted s3://{bucket}/{prefix}/_victim-INCOMPLETE" in done.stdout
    assert f"deleted s3://{bucket}/{prefix}/_CLAIM" in done.stdout
    assert list_objects(s3_client, bucket, prefix + "/") == kept, "only the victim's objects were removed"
    assert pending_uploads(s3_client, bucket) == []
    assert keep.ok

    # Nothing left: a second abort removes nothing; a new copy into the path may start.
    again = abort_copy(f"s3://{bucket}/{prefix}", "victim", s3=s3_config)
    assert again.deleted == () and again.aborted == ()
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "beam_s3_sink.cli",
            "--abort",
            "kept",
            "--output",
            f"s3://{bucket}/{prefix}",
            f"--s3_endpoint_url={s3_endpoint}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=os.path.dirname(HERE),
    )
    assert refused.returncode == 2 and "--force" in refused.stderr
    forced = abort_copy(f"s3://{bucket}/{prefix}", "kept", s3=s3_config, force=True)
    assert forced.committed and list_objects(s3_client, bucket, prefix + "/") == {}
