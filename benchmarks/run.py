"""Benchmark CopyToS3 against Beam's own file sinks and a hand-written baseline.

One run, one S3 server (moto, its own process on a free loopback port), each case in its own
process so that its peak RSS is its own. Prints wall time, rows per second and peak RSS per
case (median of ``--repeat`` runs), then the ratios the project promises::

    python benchmarks/run.py                    # 1,000,000 rows, 3 runs each, plus the RSS check
    python benchmarks/run.py --rows 200000 --repeat 1 --rss-rows 0   # a quick look

Cases (8 columns, generated inside the pipeline from shard numbers):

* ``generate``          the generating pipeline alone (the floor for every Beam case)
* ``copy_parquet``      CopyToS3, Parquet
* ``write_parquet``     beam.io.WriteToParquet to s3:// (Beam's S3 filesystem)
* ``copy_csv``          CopyToS3, CSV
* ``write_text``        a formatting Map + beam.io.WriteToText to s3://
* ``baseline_parquet``  no Beam: generate in Python, build an Arrow table, write Parquet, one put_object
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, Iterator, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHARD_ROWS = 50_000
ACCESS_KEY, SECRET_KEY, REGION = "bench", "bench-secret", "us-east-1"
CASES = ["generate", "copy_parquet", "write_parquet", "copy_csv", "write_text", "baseline_parquet"]


def schema():
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
                      ("quantity", pa.int32()), ("paid", pa.bool_()),
                      ("created", pa.timestamp("us", tz="UTC")), ("day", pa.date32()),
                      ("note", pa.string())])


_START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


_NAMES = [f"customer-{n:04d}" for n in range(1000)]
_DAYS = [datetime.date(2026, 1, 1) + datetime.timedelta(days=d) for d in range(365)]
_NOTES = [None, None, "leave at the door"]


def shard_rows(shard: int, rows: int) -> Iterator[Dict[str, Any]]:
    """One shard of the data set: cheap to make, so that the sinks' cost dominates."""
    for i in range(shard * SHARD_ROWS, min((shard + 1) * SHARD_ROWS, rows)):
        yield {"id": i, "name": _NAMES[i % 1000], "amount": (i * 7919 % 100_000) / 100,
               "quantity": i % 100, "paid": i % 10 != 0,
               "created": _START + datetime.timedelta(seconds=i), "day": _DAYS[i % 365],
               "note": _NOTES[i % 3]}


def csv_line(row: Dict[str, Any]) -> str:
    return ",".join("" if v is None else str(v) for v in row.values())


# one case, in a child process ---------------------------------------------------------------
def run_case(case: str, rows: int, endpoint: str, bucket: str) -> None:
    prefix = f"s3://{bucket}/{case}-{uuid.uuid4().hex[:8]}"
    s3_flags = [f"--s3_endpoint_url={endpoint}", f"--s3_region_name={REGION}",
                f"--s3_access_key_id={ACCESS_KEY}", f"--s3_secret_access_key={SECRET_KEY}"]
    if case == "baseline_parquet":
        import boto3
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([r for s in range(_shards(rows)) for r in shard_rows(s, rows)],
                                     schema=schema())
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                              aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        client.put_object(Bucket=bucket, Key=prefix[len(f"s3://{bucket}/"):] + "/data.parquet",
                          Body=buffer.getvalue())
        return

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_s3_sink import CopyToS3, S3Config

    config = S3Config(endpoint_url=endpoint, region_name=REGION, access_key_id=ACCESS_KEY,
                      secret_access_key=SECRET_KEY, path_style=True)
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"] + s3_flags)) as p:
        generated = (p | beam.Create(list(range(_shards(rows))))
                     | beam.FlatMap(shard_rows, rows))
        if case == "generate":
            generated | beam.combiners.Count.Globally()
        elif case == "copy_parquet":
            generated | CopyToS3(prefix, format="parquet", schema=schema(), s3=config)
        elif case == "copy_csv":
            generated | CopyToS3(prefix, format="csv", schema=schema(), s3=config)
        elif case == "write_parquet":
            generated | beam.io.WriteToParquet(prefix + "/part", schema(), file_name_suffix=".parquet")
        elif case == "write_text":
            generated | beam.Map(csv_line) | beam.io.WriteToText(prefix + "/part", file_name_suffix=".csv")
        else:
            raise SystemExit(f"unknown case {case}")


def _shards(rows: int) -> int:
    return (rows + SHARD_ROWS - 1) // SHARD_ROWS


# the driver ----------------------------------------------------------------------------------
def measure(case: str, rows: int, endpoint: str, bucket: str) -> Dict[str, float]:
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, __file__, "--case", case, "--rows", str(rows),
                              "--endpoint", endpoint, "--bucket", bucket],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"case {case} failed:\n{child.stderr.read().decode()[-3000:]}")
    return {"seconds": elapsed, "rss_mib": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rss-rows", type=int, default=4_000_000,
                        help="rows of the large CopyToS3 Parquet run for the memory check (0: skip it)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(args.case, args.rows, args.endpoint, args.bucket)
        return 0

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port, start_moto

    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        bucket = "bench"
        boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY).create_bucket(Bucket=bucket)
        cases = args.cases.split(",")
        runs: Dict[str, List[Dict[str, float]]] = {c: [] for c in cases}
        for attempt in range(args.repeat):
            for case in cases:  # interleaved, so that drift hits every case alike
                runs[case].append(measure(case, args.rows, endpoint, bucket))
                print(f"  run {attempt + 1}/{args.repeat} {case:17} {runs[case][-1]['seconds']:7.2f} s",
                      file=sys.stderr)
        median = {c: statistics.median(r["seconds"] for r in runs[c]) for c in cases}
        rss = {c: max(r["rss_mib"] for r in runs[c]) for c in cases}
        print(f"\n{args.rows:,} rows, 8 columns, DirectRunner, moto S3 on loopback, "
              f"median of {args.repeat} run(s)\n")
        print(f"{'case':18} {'seconds':>9} {'rows/s':>12} {'peak RSS MiB':>13}")
        for c in cases:
            print(f"{c:18} {median[c]:9.2f} {args.rows / median[c]:12,.0f} {rss[c]:13.0f}")
        print()
        ratios = [("copy_parquet", "write_parquet", "CopyToS3 Parquet / WriteToParquet", 0.35),
                  ("copy_csv", "write_text", "CopyToS3 CSV / WriteToText", 0.35),
                  ("copy_parquet", "baseline_parquet", "CopyToS3 Parquet / hand-written baseline", 1.25)]
        for a, b, label, target in ratios:
            if a in median and b in median:
                ratio = median[a] / median[b]
                print(f"{label:44} {ratio:5.2f}  (target <= {target})")
        if args.rss_rows:
            small = measure("copy_parquet", args.rows, endpoint, bucket)["rss_mib"]
            large = measure("copy_parquet", args.rss_rows, endpoint, bucket)["rss_mib"]
            print(f"{'peak RSS, CopyToS3 Parquet %s / %s rows' % (f'{args.rss_rows:,}', f'{args.rows:,}'):44} "
                  f"{large / small:5.2f}  ({large:.0f} / {small:.0f} MiB, target <= 1.15)")
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
