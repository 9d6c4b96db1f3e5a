"""Benchmark CopyToS3 against Beam's own file sinks and a hand-written baseline.

One run, one S3 server (moto, its own process on a free loopback port), each case in its own
process so that its peak RSS is its own. Prints wall time, rows per second and peak RSS per
case (median of ``--repeat`` runs), then the ratios the project promises::

    python benchmarks/run.py                    # 1,000,000 rows, 3 runs each, plus the RSS check
    python benchmarks/run.py --rows 200000 --repeat 1 --rss-rows 0   # a quick look
    python benchmarks/run.py --suite lineitem   # TPC-H lineitem, Arrow batches (see lineitem_main)

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


# the lineitem suite: Arrow batches from local Parquet ----------------------------------------
LINEITEM_CASES = ["duckdb", "write_dataset", "read_batched", "beam_batched", "copy_batches", "copy_rows", "cli"]
LINEITEM_LABELS = {
    "duckdb": "DuckDB COPY (FROM read_parquet) TO 's3://' (httpfs)",
    "write_dataset": "pyarrow.dataset.write_dataset to S3FileSystem",
    "read_batched": "Beam ReadFromParquetBatched -> Count (the read alone)",
    "beam_batched": "Beam ReadFromParquetBatched -> WriteToParquetBatched",
    "copy_batches": "CopyToS3, batches from ReadFromParquetBatched",
    "copy_rows": "CopyToS3, rows from ReadFromParquet",
    "cli": "python -m pipelines.copy_to_s3 --source lineitem.parquet",
}


def lineitem_file(scale: str) -> str:
    """TPC-H lineitem at ``scale``, made once by ``tpchgen-cli`` (benchmarks/requirements.txt) and
    cached under ``${BEAM_S3_SINK_CACHE:-~/.cache/beam-s3-sink}/tpch/sf<scale>/``."""
    cache = os.environ.get("BEAM_S3_SINK_CACHE", os.path.expanduser("~/.cache/beam-s3-sink"))
    folder = os.path.join(cache, "tpch", f"sf{scale}")
    path = os.path.join(folder, "lineitem.parquet")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        tool = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
        if not os.path.exists(tool):
            raise SystemExit(f"{tool} is missing: run {sys.executable} -m pip install -r benchmarks/requirements.txt")
        subprocess.run([tool, "parquet", "-s", scale, "--tables", "lineitem", "--output-dir", folder], check=True)
    return path


DUCKDB_VERSION = "1.5.5"  # the newest duckdb with a duckdb-extension-httpfs wheel of the same version


def duckdb_dir() -> str:
    """duckdb and its httpfs extension wheel of the same version, installed apart from the project
    venv (``pip install --target``, benchmarks/requirements-duckdb.txt), once, into the cache."""
    cache = os.environ.get("BEAM_S3_SINK_CACHE", os.path.expanduser("~/.cache/beam-s3-sink"))
    target = os.path.join(cache, "bench", f"duckdb-{DUCKDB_VERSION}")
    if not os.path.isdir(os.path.join(target, "duckdb_extension_httpfs")):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", target, "-r",
                        os.path.join(ROOT, "benchmarks", "requirements-duckdb.txt")], check=True)
    return target


def _httpfs_extension() -> str:
    """The httpfs extension shipped in the duckdb-extension-httpfs wheel (nothing downloaded at run time)."""
    import glob

    import duckdb
    import duckdb_extension_httpfs

    found = glob.glob(os.path.join(os.path.dirname(duckdb_extension_httpfs.__file__), "extensions",
                                   f"v{duckdb.__version__}", "httpfs.duckdb_extension"))
    if not found:
        raise SystemExit(f"duckdb-extension-httpfs=={duckdb.__version__} is not installed "
                         "(pip install -r benchmarks/requirements.txt)")
    return found[0]


def run_lineitem_case(case: str, path: str, endpoint: str, bucket: str) -> None:
    """One lineitem case, in this (child) process: ``path`` copied to ``s3://bucket/<case>-<id>/``."""
    prefix = f"{case}-{uuid.uuid4().hex[:8]}"
    host = endpoint.split("://", 1)[1]
    if case == "duckdb":
        sys.path.insert(0, duckdb_dir())
        import duckdb

        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        con.execute(f"LOAD '{_httpfs_extension()}'")
        con.execute(f"CREATE SECRET (TYPE s3, KEY_ID '{ACCESS_KEY}', SECRET '{SECRET_KEY}', REGION '{REGION}', "
                    f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)")
        con.execute(f"COPY (FROM read_parquet('{path}')) TO 's3://{bucket}/{prefix}/data.parquet' (FORMAT parquet)")
        return
    if case == "write_dataset":
        import pyarrow.dataset as ds
        from pyarrow.fs import S3FileSystem

        fs = S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                          endpoint_override=host, scheme="http")
        ds.write_dataset(ds.dataset(path, format="parquet"), f"{bucket}/{prefix}", format="parquet",
                         filesystem=fs)
        return
    s3_flags = [f"--s3_endpoint_url={endpoint}", f"--s3_region_name={REGION}",
                f"--s3_access_key_id={ACCESS_KEY}", f"--s3_secret_access_key={SECRET_KEY}"]
    if case == "cli":
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_DEFAULT_REGION": REGION}
        subprocess.run([sys.executable, "-m", "pipelines.copy_to_s3", "--source", path,
                        "--output", f"s3://{bucket}/{prefix}", *s3_flags, *_cli_flags()],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        return
    import apache_beam as beam
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_s3_sink import CopyToS3, S3Config

    schema = pq.read_schema(path)
    config = S3Config(endpoint_url=endpoint, region_name=REGION, access_key_id=ACCESS_KEY,
                      secret_access_key=SECRET_KEY, path_style=True)
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"] + s3_flags)) as p:
        if case == "read_batched":
            p | beam.io.ReadFromParquetBatched(path) | beam.Map(lambda t: t.num_rows) | beam.CombineGlobally(sum)
        elif case == "beam_batched":
            (p | beam.io.ReadFromParquetBatched(path)
             | beam.io.WriteToParquetBatched(f"s3://{bucket}/{prefix}/part", schema, file_name_suffix=".parquet"))
        elif case == "copy_batches":
            p | beam.io.ReadFromParquetBatched(path) | CopyToS3(f"s3://{bucket}/{prefix}", schema=schema, s3=config)
        elif case == "copy_rows":
            p | beam.io.ReadFromParquet(path) | CopyToS3(f"s3://{bucket}/{prefix}", schema=schema, s3=config)
        else:
            raise SystemExit(f"unknown case {case}")


def _cli_flags() -> List[str]:
    return os.environ.get("BENCH_CLI_FLAGS", "").split()


def _tree_rss_mib(pid: int) -> float:
    """The resident memory of ``pid`` and all its descendants now, in MiB (from /proc)."""
    children: Dict[int, List[int]] = {}
    rss: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21])
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo += children.get(current, [])
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure_tree(argv: List[str]) -> Dict[str, float]:
    """Run ``argv``; wall time and the peak RSS of its whole process tree (sampled every 0.1 s)."""
    import threading

    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss_mib(child.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.monotonic() - started
    done.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[3:5]} failed:\n{child.stderr.read().decode()[-3000:]}")
    return {"seconds": elapsed, "rss_mib": max(peak[0], usage.ru_maxrss / 1024)}


def _empty_bucket(client: Any, bucket: str) -> None:
    """Delete every object (moto keeps them in memory) and abort every upload."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", ())]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})
    for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", ()):
        client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


def lineitem_main(args: argparse.Namespace) -> int:
    """The lineitem suite: each case in its own process, ``--repeat`` runs interleaved, medians,
    peak RSS of each process tree, the ratios of issue 14, and the RSS flatness check (copy_batches
    and beam_batched at scale factors ``--rss-scales``)."""
    import boto3
    import pyarrow.parquet as pq

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port, start_moto

    path = lineitem_file(args.scale)
    duckdb_dir()
    meta = pq.ParquetFile(path).metadata
    cases = args.cases.split(",") if args.cases else LINEITEM_CASES
    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY)
        bucket = "bench"
        client.create_bucket(Bucket=bucket)

        def one(case: str, file: str) -> Dict[str, float]:
            argv = [sys.executable, __file__, "--suite", "lineitem", "--case", case, "--input", file,
                    "--endpoint", endpoint, "--bucket", bucket]
            try:
                figures = measure_tree(argv)
            except SystemExit as exc:  # moto, loaded, sometimes fails a request: one more try
                print(f"  {case} failed, trying once more: {str(exc)[-300:]}", file=sys.stderr)
                _empty_bucket(client, bucket)
                figures = measure_tree(argv)
            _empty_bucket(client, bucket)
            return figures

        runs: Dict[str, List[Dict[str, float]]] = {c: [] for c in cases}
        for attempt in range(args.repeat):
            for case in cases:
                runs[case].append(one(case, path))
                print(f"  run {attempt + 1}/{args.repeat} {case:14} {runs[case][-1]['seconds']:7.2f} s "
                      f"{runs[case][-1]['rss_mib']:6.0f} MiB", file=sys.stderr, flush=True)
        median = {c: statistics.median(r["seconds"] for r in runs[c]) for c in cases}
        rss = {c: max(r["rss_mib"] for r in runs[c]) for c in cases}
        print(f"\nTPC-H lineitem SF{args.scale} ({meta.num_rows:,} rows, {meta.num_columns} columns, "
              f"{meta.num_row_groups} row groups, {os.path.getsize(path) / 2**20:.0f} MiB), local Parquet -> "
              f"moto S3 on loopback, {os.cpu_count()} cores, median of {args.repeat} run(s)\n")
        print(f"| way | seconds | rows/s | peak RSS MiB | × DuckDB |\n| --- | ---: | ---: | ---: | ---: |")
        for c in cases:
            ratio = f"{median[c] / median['duckdb']:.2f}" if "duckdb" in median else ""
            print(f"| {LINEITEM_LABELS[c]} | {median[c]:.1f} | {meta.num_rows / median[c]:,.0f} | {rss[c]:.0f} | {ratio} |")
        print()
        targets = [("copy_batches", "write_dataset", "CopyToS3 batches / write_dataset", 1.25),
                   ("copy_batches", "beam_batched", "CopyToS3 batches / WriteToParquetBatched", 0.4),
                   ("cli", "duckdb", "CLI / DuckDB COPY", 1.5)]
        for a, b, label, target in targets:
            if a in median and b in median:
                ratio = median[a] / median[b]
                print(f"{label:44} {ratio:5.2f}  (target <= {target}: {'met' if ratio <= target else 'NOT met'})")
        if "copy_batches" in rss and "beam_batched" in rss:
            print(f"{'peak RSS CopyToS3 batches / WriteToParquetBatched':44} {rss['copy_batches'] / rss['beam_batched']:5.2f}"
                  f"  ({rss['copy_batches']:.0f} / {rss['beam_batched']:.0f} MiB, target <= 1)")
        if args.rss_scales:
            small_scale, large_scale = args.rss_scales.split(",")
            for case in ("copy_batches", "beam_batched"):
                small = one(case, lineitem_file(small_scale))["rss_mib"]
                large = one(case, lineitem_file(large_scale))["rss_mib"]
                print(f"{'peak RSS ' + case + f' SF{large_scale} / SF{small_scale}':44} {large / small:5.2f}"
                      f"  ({large:.0f} / {small:.0f} MiB, target <= 1.15 for copy_batches)")
    finally:
        server.terminate()
        server.wait(10)
    return 0


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
    parser.add_argument("--cases", default=None, help="comma-separated cases (default: all of the suite)")
    parser.add_argument("--suite", choices=("rows", "lineitem"), default="rows",
                        help="rows: the generated 8-column suite; lineitem: TPC-H lineitem from Parquet")
    parser.add_argument("--scale", default="1", help="lineitem: the TPC-H scale factor")
    parser.add_argument("--rss-scales", default="0.5,2", help="lineitem: the two scale factors of the RSS check ('' skips)")
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.suite == "lineitem":
        if args.case:
            run_lineitem_case(args.case, args.input, args.endpoint, args.bucket)
            return 0
        return lineitem_main(args)
    if args.case:
        run_case(args.case, args.rows, args.endpoint, args.bucket)
        return 0
    args.cases = args.cases or ",".join(CASES)

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
