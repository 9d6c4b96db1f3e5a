"""Dry run (``validate_only=True``, CLI ``--dry-run``): every row checked, bad rows reported
with position and reason, and not one S3 request made (a proxy counts them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa

from beam_s3_sink import CsvFormat
from faultproxy import FaultProxy
from helpers import list_objects, run_copy

SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dry_run_reports_bad_rows_and_writes_nothing(s3_endpoint, s3_config, s3_client, bucket):
    rows = [{"id": i, "name": f"n{i}"} for i in range(3000)]
    rows[17] = {"id": 17, "name": "nul\x00inside"}  # CSV: PostgreSQL cannot store NUL
    rows[2500] = {"id": 2**40, "name": "too big"}  # does not fit int32
    with FaultProxy(s3_endpoint, rate=0) as proxy:
        result = run_copy(
            rows,
            uri=f"s3://{bucket}/dry",
            format=CsvFormat(),
            schema=SCHEMA,
            s3=s3_config.replace(endpoint_url=proxy.url),
            validate_only=True,
        )
        assert sum(proxy.requests.values()) == 0, f"a dry run makes no S3 request: {proxy.requests}"
    assert result.dry_run and result.rows == 3000 and result.invalid_rows == 2
    assert not result.ok and "2 of 3000 row(s) would fail" in result.error
    reasons = " | ".join(result.invalid)
    assert "NUL" in reasons and "'name'" in reasons and "nul\\x00inside" in reasons
    assert "'id'" in reasons and str(2**40) in reasons
    assert all(", row " in line and line.startswith("bundle ") for line in result.invalid)
    assert list_objects(s3_client, bucket) == {}, "no sentinel, no claim, no data file"

    clean = run_copy(
        [r for i, r in enumerate(rows) if i not in (17, 2500)],
        uri=f"s3://{bucket}/dry",
        format="parquet",
        schema=SCHEMA,
        s3=s3_config,
        validate_only=True,
    )
    assert clean.ok and clean.dry_run and clean.rows == 2998 and clean.invalid == () and clean.files == ()
    assert list_objects(s3_client, bucket) == {}


def test_cli_dry_run_from_the_shell(s3_endpoint, s3_client, bucket, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": "b\\u0000c"}\n{"id": 3, "name": "ok"}\n')
    command = [
        sys.executable,
        "-m",
        "beam_s3_sink.cli",
        "--source",
        str(source),
        "--schema",
        "id:int64,name:string",
        "--output",
        f"s3://{bucket}/p",
        "--format",
        "csv",
        "--dry-run",
        f"--s3_endpoint_url={s3_endpoint}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "3 rows checked, 1 would fail" in done.stdout
    assert "row 1: EncodeError: column 'name'" in done.stdout and "NUL" in done.stdout
    source.write_text('{"id": 1, "name": "a"}\n{"id": 3, "name": "ok"}\n')
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "2 rows checked, 0 would fail" in done.stdout
    assert list_objects(s3_client, bucket) == {}
