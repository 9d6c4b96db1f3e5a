"""The demo of ``python -m pipelines.copy_to_s3 --demo`` (what ``make demo`` runs).

``python -m pipelines.copy_to_s3 --demo`` runs the demo end to end: it starts an embedded S3
server (moto's server mode) unless given ``--s3_endpoint_url``, generates a realistic data set
of web-shop orders inside the pipeline, copies it as Parquet and as PostgreSQL CSV with one
pipeline, then reads every object back and prints the results, the object listing and a check
that the rows read back are exactly the rows generated.

Standard Beam flags (``--runner``, ``--direct_num_workers``, ``--s3_*`` ...) pass through.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import socket
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToS3, CsvFormat, S3Config
from pipelines.default_runner import with_default_runner
from pipelines.demo_data import ORDERS_SCHEMA, SHARD_ROWS, expected_totals, orders_shard

DEMO_BUCKET = "beam-s3-sink-demo"


def parse_args(argv: Optional[Sequence[str]]) -> tuple:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.copy_to_s3",
        description="Copy a data set to S3 as Parquet or PostgreSQL CSV with beam_s3_sink.")
    parser.add_argument("--demo", action="store_true",
                        help="run the demo: generate orders, copy them as Parquet and CSV, read them back")
    parser.add_argument("--rows", type=int, default=200_000, help="rows the demo generates (default 200000)")
    parser.add_argument("--bucket", default=DEMO_BUCKET, help=f"the demo's bucket (default {DEMO_BUCKET})")
    parser.add_argument("--max_file_size", default="4MiB", help="bytes per data file (default 4MiB)")
    known, beam_args = parser.parse_known_args(argv)
    if not known.demo:
        parser.error("nothing to do: pass --demo")
    return known, beam_args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def embedded_s3() -> Iterator[str]:
    """moto's S3 server on a free loopback port, for as long as the block runs."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def run_demo(args: argparse.Namespace, beam_args: List[str], endpoint: str, config: S3Config) -> int:
    client = config.make_client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=args.bucket)
    run_id = time.strftime("%Y%m%dT%H%M%S")
    targets = {
        "parquet": f"s3://{args.bucket}/orders/{run_id}/parquet",
        "csv": f"s3://{args.bucket}/orders/{run_id}/csv",
    }
    print(f"S3 endpoint: {endpoint}")
    print(f"Generating {args.rows:,} orders and copying them to:")
    for name, uri in targets.items():
        print(f"  {name:8} {uri}")
    started = time.monotonic()
    rows = args.rows
    with beam.Pipeline(options=PipelineOptions(with_default_runner(beam_args))) as p:
        orders = (p
                  | "Shards" >> beam.Create(list(range((rows + SHARD_ROWS - 1) // SHARD_ROWS)))
                  | "Generate" >> beam.FlatMap(orders_shard, rows))
        orders | "ToParquet" >> CopyToS3(targets["parquet"], format="parquet", schema=ORDERS_SCHEMA,
                                         max_file_size=args.max_file_size, s3=config)
        orders | "ToCsv" >> CopyToS3(targets["csv"], format=CsvFormat(header=True), schema=ORDERS_SCHEMA,
                                     max_file_size=args.max_file_size, s3=config)
    elapsed = time.monotonic() - started
    print(f"\nPipeline finished in {elapsed:.1f} s.\n")

    expected = expected_totals(rows)
    ok = True
    for name, uri in targets.items():
        ok &= report_copy(client, name, uri, expected)
    print("\nAll checks passed: every generated row was read back exactly once."
          if ok else "\nCHECK FAILED: see above.")
    return 0 if ok else 1


def report_copy(client: Any, name: str, uri: str, expected: Dict[str, Any]) -> bool:
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])
    manifest_key = next(o["Key"] for o in listing if o["Key"].endswith("-manifest.json"))
    manifest = json.loads(client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    print(f"== {name}: {manifest['rows']:,} rows in {manifest['files']} file(s), "
          f"{manifest['bytes']:,} bytes, sink_id {manifest['sink_id']}")
    for item in listing:
        print(f"   {item['Size']:>12,}  s3://{bucket}/{item['Key']}")
    tables = []
    for entry in manifest["entries"]:
        key = entry["url"].split("/", 3)[3]
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if name == "parquet":
            table = pq.read_table(io.BytesIO(data))
        else:
            table = pacsv.read_csv(io.BytesIO(data), parse_options=pacsv.ParseOptions(
                newlines_in_values=True), convert_options=pacsv.ConvertOptions(
                column_types={"order_id": pa.int64(), "quantity": pa.int64()}))
        if table.num_rows != entry["meta"]["record_count"]:
            print(f"   {key}: manifest says {entry['meta']['record_count']} rows, file has {table.num_rows}")
            return False
        tables.append(table.select(["order_id", "quantity"]))
    combined = pa.concat_tables(tables)
    ids = combined.column("order_id").to_pylist()
    found = {"rows": combined.num_rows, "order_id_sum": sum(ids),
             "quantity": sum(combined.column("quantity").to_pylist())}
    distinct = len(set(ids)) == len(ids)
    good = found == expected and distinct
    print(f"   read back: {found['rows']:,} rows, distinct order ids: {distinct}, "
          f"sum(order_id)={found['order_id_sum']:,}, sum(quantity)={found['quantity']:,} "
          f"-> {'OK' if good else f'MISMATCH, expected {expected}'}")
    return good


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the demo; ``argv`` holds ``--demo``, the demo's flags and Beam's."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the embedded server's request log
    args, beam_args = parse_args(argv)
    s3_flags = S3Config.from_pipeline_options(PipelineOptions(beam_args))
    if s3_flags.endpoint_url:
        return run_demo(args, beam_args, s3_flags.endpoint_url, s3_flags)
    with embedded_s3() as endpoint:
        config = S3Config(endpoint_url=endpoint, region_name="us-east-1", access_key_id="demo",
                          secret_access_key="demo-secret", path_style=True)
        return run_demo(args, beam_args, endpoint, config)

