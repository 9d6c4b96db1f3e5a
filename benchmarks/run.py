"""Benchmark CopyToS3 against Beam's own file sinks and a hand-written baseline.

One run, one S3 server (moto, its own process on a free loopback port), each case in its own
process so that its peak RSS is its own. Prints wall time, CPU time (its process's user +
system), rows per second and peak RSS per case (median of ``--repeat`` runs), then the ratios
the project promises::

    python benchmarks/run.py                    # 1,000,000 rows, 3 runs each, plus the RSS check
    python benchmarks/run.py --rows 200000 --repeat 1 --rss-rows 0   # a quick look
    python benchmarks/run.py --runner flink     # the same cases on one Flink job server (LOOPBACK, parallelism 2)
    python benchmarks/run.py --file-counts      # data files per runner and parallelism, default options
    python benchmarks/run.py --suite lineitem   # TPC-H lineitem, Arrow batches (see lineitem_main)
    python benchmarks/run.py --suite fixed      # the fixed cost: CLI and DuckDB COPY of 10 rows (see fixed_main)
    python benchmarks/run.py --streaming        # a 1,000,000-row, 60 s stream on one Flink job server
    python benchmarks/run.py --streaming --rows 100000 --stream-seconds 20   # a quick look

``--runner flink`` starts one Flink job server (``FlinkJobServerDriver``, an embedded
MiniCluster) from ``$BEAM_S3_SINK_CACHE/flink/lib`` or ``/tmp/warm/flink/lib`` on a free port,
or uses ``--job-endpoint HOST:PORT``; every case runs on it with ``--environment_type=LOOPBACK
--parallelism=2`` (``--parallelism``). It prints the same ratios and ``CopyToS3`` minus
generate-only per million rows, and the number of data files of each copy.

Cases (8 columns, generated inside the pipeline from shard numbers):

* ``generate``          the generating pipeline alone (the floor for every Beam case)
* ``copy_parquet``      CopyToS3, Parquet
* ``copy_parquet_zstd`` CopyToS3, Parquet with zstd (the codec of ``copy_iceberg``: Iceberg's default)
* ``write_parquet``     beam.io.WriteToParquet to s3:// (Beam's S3 filesystem)
* ``copy_csv``          CopyToS3, CSV
* ``copy_csv_bad_rows`` CopyToS3, CSV with ``max_bad_rows=1`` (every batch screened; no row is bad)
* ``write_text``        a formatting Map + beam.io.WriteToText to s3://
* ``baseline_parquet``  no Beam: generate in Python, build an Arrow table, write Parquet, one put_object
* ``copy_iceberg``      CopyToIceberg into a new table of a pyiceberg SQL catalog (SQLite in a temp
                        dir), warehouse on the same moto server
* ``pyiceberg_append``  no Beam: the rows built into one Arrow table in Python, then pyiceberg's
                        ``Table.append`` into a new table of the same kind of catalog and store
* ``copy_delta``        CopyToDelta into a new Delta Lake table on the same moto server
* ``write_deltalake``   no Beam: the rows built into one Arrow table in Python, then
                        ``deltalake.write_deltalake`` into a new table on the same store (Snappy,
                        the codec of ``copy_delta`` and ``copy_parquet``)

``--streaming`` (Flink, as ``--runner flink``, plus ``--streaming``; no checkpointing: a
PeriodicImpulse job ends by itself after its stop timestamp): ``PeriodicImpulse`` fires
``--impulses-per-second`` (1,000) for ``--stream-seconds`` (60), starting 8 s after the case's
pipeline is built; a ``FlatMap`` expands each impulse into its block of the ``--rows`` rows (the
8 columns above, each row in the impulse's timestamp), in ``FixedWindows(10)``. Cases:

* ``stream_generate``   the stream alone, its rows counted per window (the floor)
* ``stream_copy``       CopyToS3, Parquet, one unit per window
* ``stream_write``      ``beam.io.fileio.WriteToFiles`` with a pyarrow Parquet ``FileSink`` to
                        s3:// (Beam's ``WriteToParquet`` fails on a stream on Flink: see
                        docs/benchmarks.md)

A ``Map`` after each records ``time.time()`` when a window's output comes out (a per-window
count, a ``CopyToResult`` with its ``unit.end``, a ``FileResult`` with its window, the file
renamed into place by then). Per case: wall time, rows per second of wall time and of stream
time (the stream's start to its last output), the median and max delay from a window's end (or
the stream's stop, if earlier) to its output, CPU seconds of the case's process and of the S3
and job servers; then every copy is read back (pyarrow): every row id exactly once, each in a
file of its own window, and for CopyToS3 one unit per window with the stream's rows.

The Iceberg ratios (issues 29, 34): ``copy_iceberg`` minus ``copy_parquet_zstd`` (the same copy
with the same codec) is what the table adds (loading the catalog, creating the table, the
commit), less pyiceberg's import, measured apart in the same run in a process that has imported
Beam, pyarrow and boto3 already (target: at most 1 s plus 10 ms per data file); and
``copy_iceberg`` / ``pyiceberg_append`` (target: at most 0.8). The lineitem suite has the same
cases and ratios, against ``copy_batches_zstd``.

The Delta ratios (issue 36): ``copy_delta`` minus ``copy_parquet`` (lineitem: ``copy_batches``;
both Snappy) is what the table adds (opening it, the commit), less deltalake's import, measured
apart as pyiceberg's (target: at most 1 s plus 10 ms per data file); and ``copy_delta`` /
``write_deltalake`` (target: at most 0.8).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHARD_ROWS = 50_000
ACCESS_KEY, SECRET_KEY, REGION = "bench", "bench-secret", "us-east-1"
CASES = [
    "generate",
    "copy_parquet",
    "copy_parquet_zstd",
    "write_parquet",
    "copy_csv",
    "copy_csv_bad_rows",
    "write_text",
    "baseline_parquet",
    "copy_iceberg",
    "pyiceberg_append",
    "copy_delta",
    "write_deltalake",
]
NO_BEAM_CASES = ("baseline_parquet", "pyiceberg_append", "write_deltalake")


def schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("amount", pa.float64()),
            ("quantity", pa.int32()),
            ("paid", pa.bool_()),
            ("created", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("note", pa.string()),
        ]
    )


_START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


_NAMES = [f"customer-{n:04d}" for n in range(1000)]
_DAYS = [datetime.date(2026, 1, 1) + datetime.timedelta(days=d) for d in range(365)]
_NOTES = [None, None, "leave at the door"]


def shard_rows(shard: int, rows: int) -> Iterator[Dict[str, Any]]:
    """One shard of the data set."""
    return rows_between(shard * SHARD_ROWS, min((shard + 1) * SHARD_ROWS, rows))


def rows_between(first: int, stop: int) -> Iterator[Dict[str, Any]]:
    """Rows ``first`` to ``stop - 1`` of the data set: cheap to make, so that the sinks' cost dominates."""
    for i in range(first, stop):
        yield {
            "id": i,
            "name": _NAMES[i % 1000],
            "amount": (i * 7919 % 100_000) / 100,
            "quantity": i % 100,
            "paid": i % 10 != 0,
            "created": _START + datetime.timedelta(seconds=i),
            "day": _DAYS[i % 365],
            "note": _NOTES[i % 3],
        }


def csv_line(row: Dict[str, Any]) -> str:
    return ",".join("" if v is None else str(v) for v in row.values())


# Apache Iceberg ------------------------------------------------------------------------------
def iceberg_catalog(endpoint: str, folder: str, warehouse: str) -> Dict[str, str]:
    """pyiceberg properties of a SQL catalog on SQLite in ``folder``, its warehouse ``warehouse``
    on the benchmark's S3 server: what ``copy_iceberg`` and ``pyiceberg_append`` both use."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": warehouse,
        "s3.endpoint": endpoint,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION,
        "s3.path-style-access": "true",
    }


def pyiceberg_append(catalog: Dict[str, str], name: str, table: Any) -> None:
    """pyiceberg alone: create table ``name`` from the Arrow table's schema, then one
    ``Table.append``. The table has no codec property: both pyiceberg and ``CopyToIceberg``
    write Iceberg's default, zstd, so that both encode the same Parquet."""
    from pyiceberg.catalog import load_catalog

    loaded = load_catalog("default", **catalog)
    loaded.create_namespace(tuple(name.split(".")[:-1]))
    created = loaded.create_table(name, schema=table.schema)
    created.append(table)


PYICEBERG_IMPORT = """
import apache_beam, boto3, pyarrow, time
start = time.perf_counter()
import pyiceberg.catalog.sql, pyiceberg.io.pyarrow, pyiceberg.table, pyiceberg.transforms
print(time.perf_counter() - start)
"""


def pyiceberg_import_seconds(repeat: int = 3) -> float:
    """The median time to import what ``CopyToIceberg`` imports of pyiceberg, in a fresh process
    that has imported Beam, pyarrow and boto3 already (as a copy's process has)."""
    times = [
        float(
            subprocess.run([sys.executable, "-c", PYICEBERG_IMPORT], check=True, capture_output=True, text=True).stdout
        )
        for _ in range(repeat)
    ]
    return statistics.median(times)


def iceberg_ratios(median: Dict[str, float], runs: Dict[str, List[Dict[str, float]]], base: str) -> None:
    """Print the Iceberg ratios where their cases ran: what the table adds to the ``base`` copy
    (``<base>_zstd`` when it ran: the same codec), less pyiceberg's import (at most 1 s + 10 ms
    per data file), and ``CopyToIceberg`` / pyiceberg (at most 0.8)."""
    base = base + "_zstd" if base + "_zstd" in median else base
    if "copy_iceberg" in median and base in median:
        files = int(runs["copy_iceberg"][-1].get("files", 0))
        limit = 1 + 0.01 * files
        extra = median["copy_iceberg"] - median[base]
        imported = pyiceberg_import_seconds()
        print(f"{'pyiceberg import, s (measured apart)':44} {imported:5.2f}")
        print(
            f"{'copy_iceberg - ' + base + ' - import, s':44} {extra - imported:5.2f}  ({files} data files: "
            f"target <= 1 + 0.01 x {files} = {limit:.2f} s: {'met' if extra - imported <= limit else 'NOT met'}; "
            f"{extra:.2f} s with the import)"
        )
    if "copy_iceberg" in median and "pyiceberg_append" in median:
        ratio = median["copy_iceberg"] / median["pyiceberg_append"]
        print(
            f"{'CopyToIceberg / pyiceberg Table.append':44} {ratio:5.2f}  "
            f"(target <= 0.8: {'met' if ratio <= 0.8 else 'NOT met'})"
        )


# Delta Lake ----------------------------------------------------------------------------------
def write_deltalake(endpoint: str, uri: str, table: Any) -> None:
    """delta-rs alone: ``write_deltalake`` of the Arrow table into a new table at ``uri`` on the
    benchmark's S3 server, Snappy (as ``CopyToDelta`` writes), with the storage options
    ``CopyToDelta`` uses (``conditional_put=etag``)."""
    from deltalake import WriterProperties
    from deltalake import write_deltalake as write

    from beam_s3_sink.delta_commit import storage_options

    write(
        uri,
        table,
        storage_options=storage_options(s3_config(endpoint)),
        writer_properties=WriterProperties(compression="SNAPPY"),
    )


DELTALAKE_IMPORT = """
import apache_beam, boto3, pyarrow, time
start = time.perf_counter()
import deltalake, deltalake.transaction
print(time.perf_counter() - start)
"""


def import_seconds(code: str, repeat: int = 3) -> float:
    """The median time ``code`` prints (an import it times), each run in a fresh process."""
    times = [
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
        for _ in range(repeat)
    ]
    return statistics.median(times)


def delta_ratios(median: Dict[str, float], runs: Dict[str, List[Dict[str, float]]], base: str) -> None:
    """Print the Delta ratios where their cases ran: what the table adds to the ``base`` copy
    (the same codec, Snappy), less deltalake's import (at most 1 s + 10 ms per data file), and
    ``CopyToDelta`` / ``write_deltalake`` (at most 0.8)."""
    if "copy_delta" in median and base in median:
        files = int(runs["copy_delta"][-1].get("files", 0))
        limit = 1 + 0.01 * files
        extra = median["copy_delta"] - median[base]
        imported = import_seconds(DELTALAKE_IMPORT)
        print(f"{'deltalake import, s (measured apart)':44} {imported:5.2f}")
        print(
            f"{'copy_delta - ' + base + ' - import, s':44} {extra - imported:5.2f}  ({files} data files: "
            f"target <= 1 + 0.01 x {files} = {limit:.2f} s: {'met' if extra - imported <= limit else 'NOT met'}; "
            f"{extra:.2f} s with the import)"
        )
    if "copy_delta" in median and "write_deltalake" in median:
        ratio = median["copy_delta"] / median["write_deltalake"]
        print(
            f"{'CopyToDelta / write_deltalake':44} {ratio:5.2f}  "
            f"(target <= 0.8: {'met' if ratio <= 0.8 else 'NOT met'})"
        )


def beam_s3_flags(endpoint: str) -> List[str]:
    """Beam's S3 filesystem options for the benchmark's S3 server (the ``s3://`` of Beam's sinks)."""
    return [
        f"--s3_endpoint_url={endpoint}",
        f"--s3_region_name={REGION}",
        f"--s3_access_key_id={ACCESS_KEY}",
        f"--s3_secret_access_key={SECRET_KEY}",
    ]


def s3_config(endpoint: str) -> Any:
    """The ``S3Config`` of a copy to the benchmark's S3 server."""
    from beam_s3_sink import S3Config

    return S3Config(
        endpoint_url=endpoint,
        region_name=REGION,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        path_style=True,
    )


def s3_client(endpoint: str) -> Any:
    """A boto3 client of the benchmark's S3 server."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


# runners ----------------------------------------------------------------------------------
def _cache_dir() -> str:
    return os.environ.get("BEAM_S3_SINK_CACHE") or os.path.expanduser("~/.cache/beam-s3-sink")


def runner_lib(name: str) -> str:
    """The classpath directory of a job server: the project's cache, else /tmp/warm."""
    for base in (_cache_dir(), "/tmp/warm"):
        lib = os.path.join(base, name, "lib")
        if glob.glob(os.path.join(lib, "*.jar")):
            return lib
    raise SystemExit(
        f"no {name} job server jars in {_cache_dir()}/{name}/lib or /tmp/warm/{name}/lib; run scripts/fetch-runners.sh"
    )


def prism_binary() -> str:
    for path in (os.path.join(_cache_dir(), "prism", "prism"), "/tmp/warm/prism/prism"):
        if os.access(path, os.X_OK):
            return path
    raise SystemExit("no Prism binary; run scripts/fetch-runners.sh")


def start_job_server(name: str, log: Any, spark_master: str = "local[2]") -> "tuple[subprocess.Popen, str]":
    """Start a Flink or Spark job server on a free loopback port; return it and its endpoint."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port
    from jobservers import JAVA_OPENS  # on Java 17, Flink streaming (Kryo copying a java.util list) needs them

    port = free_port()
    lib = os.path.join(runner_lib(name), "*")
    if name == "flink":
        command = [
            "java",
            *JAVA_OPENS,
            "-cp",
            lib,
            "org.apache.beam.runners.flink.FlinkJobServerDriver",
            "--flink-master",
            "[local]",
        ]
    else:
        command = [
            "java",
            *JAVA_OPENS,
            "-cp",
            lib,
            "org.apache.beam.runners.spark.SparkJobServerDriver",
            "--spark-master-url",
            spark_master,
        ]
    command += ["--job-host", "127.0.0.1", "--job-port", str(port), "--artifact-port", "0", "--expansion-port", "0"]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    import socket

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{name} job server exited with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{name} job server did not start within 120 s")


def runner_flags(runner: str, job_endpoint: str = "", parallelism: int = 2) -> List[str]:
    """Beam pipeline arguments for one runner of the benchmark."""
    if runner == "direct":
        return ["--runner=DirectRunner"]
    if runner == "multiprocess":
        return [
            "--runner=DirectRunner",
            "--direct_running_mode=multi_processing",
            f"--direct_num_workers={parallelism}",
        ]
    if runner == "prism":
        return [
            "--runner=PrismRunner",
            f"--prism_location={prism_binary()}",
            "--environment_type=LOOPBACK",
            f"--parallelism={parallelism}",
        ]
    return [
        "--runner=PortableRunner",
        f"--job_endpoint={job_endpoint}",
        "--environment_type=LOOPBACK",
        f"--parallelism={parallelism}",
        "--job_server_timeout=86400",  # Beam's default (300 s) gives a longer stream up after 5 minutes
    ]


# one case, in a child process ---------------------------------------------------------------
def run_case(case: str, rows: int, endpoint: str, bucket: str, runner_args: List[str]) -> None:
    prefix = f"s3://{bucket}/{case}-{uuid.uuid4().hex[:8]}"
    s3_flags = beam_s3_flags(endpoint)
    if case in NO_BEAM_CASES:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([r for s in range(_shards(rows)) for r in shard_rows(s, rows)], schema=schema())
        if case == "pyiceberg_append":
            with tempfile.TemporaryDirectory(prefix="bench-catalog-") as folder:
                pyiceberg_append(iceberg_catalog(endpoint, folder, prefix), "bench.rows", table)
            return
        if case == "write_deltalake":
            write_deltalake(endpoint, prefix, table)
            return
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        client = s3_client(endpoint)
        client.put_object(Bucket=bucket, Key=prefix[len(f"s3://{bucket}/") :] + "/data.parquet", Body=buffer.getvalue())
        return

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_s3_sink import CopyToDelta, CopyToIceberg, CopyToS3, ParquetFormat

    config = s3_config(endpoint)
    folder = tempfile.TemporaryDirectory(prefix="bench-catalog-")  # copy_iceberg's catalog
    with folder, beam.Pipeline(options=PipelineOptions(runner_args + s3_flags)) as p:
        generated = p | beam.Create(list(range(_shards(rows)))) | beam.FlatMap(shard_rows, rows)
        if case == "generate":
            generated | beam.combiners.Count.Globally()
        elif case in ("copy_parquet", "copy_csv", "copy_parquet_zstd"):
            fmt = ParquetFormat(compression="zstd") if case == "copy_parquet_zstd" else case[len("copy_") :]
            generated | CopyToS3(prefix, format=fmt, schema=schema(), s3=config) | beam.Map(_print_files)
        elif case == "copy_csv_bad_rows":
            copy = CopyToS3(prefix, format="csv", schema=schema(), s3=config, max_bad_rows=1)
            generated | copy | beam.Map(_print_files)
        elif case == "copy_iceberg":
            (
                generated
                | CopyToIceberg("bench.rows", catalog=iceberg_catalog(endpoint, folder.name, prefix), schema=schema())
                | beam.Map(_print_files)
            )
        elif case == "copy_delta":
            generated | CopyToDelta(prefix, schema=schema(), s3=config) | beam.Map(_print_files)
        elif case == "write_parquet":
            generated | beam.io.WriteToParquet(prefix + "/part", schema(), file_name_suffix=".parquet")
        elif case == "write_text":
            generated | beam.Map(csv_line) | beam.io.WriteToText(prefix + "/part", file_name_suffix=".csv")
        else:
            raise SystemExit(f"unknown case {case}")


def _print_files(result: Any) -> None:
    """A copy's data files, from its CopyToResult (the LOOPBACK worker and the DirectRunner
    run in this process, so this reaches the driver's stdout): no listing after the
    pipeline, which the other cases do not pay for either."""
    print(json.dumps({"files": len(result.files), "bytes": sum(f.bytes for f in result.files)}), flush=True)


def _shards(rows: int) -> int:
    return (rows + SHARD_ROWS - 1) // SHARD_ROWS


# the streaming suite: a PeriodicImpulse stream on Flink -------------------------------------
STREAM_CASES = ["stream_generate", "stream_copy", "stream_write"]
STREAM_LABELS = {
    "stream_generate": "generate only, rows counted per window (the floor)",
    "stream_copy": "CopyToS3 Parquet, a unit per window",
    "stream_write": "beam.io.fileio.WriteToFiles, a Parquet FileSink",
}
#: the figures of a streaming run that the table gives the median of
STREAM_FIGURES = ("seconds", "rss_mib", "cpu_s", "stream_seconds", "delay_median", "delay_max", "windows", "files")
WINDOW_SECONDS = 10
#: seconds from building a case's pipeline to its stream's first impulse, for the job to start
STREAM_LEAD = 8.0
#: seconds a streaming case may take beyond its stream's lead and length before it is killed
STREAM_GRACE = 300
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Stream:
    """The stream every streaming case reads: ``impulses`` impulses ``interval`` seconds apart
    from ``start`` (epoch seconds), impulse ``k`` expanded into rows ``k * rows // impulses`` up
    to the next impulse's first, each row in the impulse's timestamp."""

    rows: int
    impulses: int
    start: float
    interval: float

    @classmethod
    def of(cls, rows: int, seconds: float, rate: float, start: float) -> "Stream":
        """``rows`` rows in ``rate`` impulses a second for ``seconds`` from ``start``."""
        return cls(rows, round(seconds * rate), start, 1 / rate)

    @classmethod
    def starting_soon(cls, rows: int, seconds: float, rate: float) -> "Stream":
        """The stream starts ``STREAM_LEAD`` seconds from now, half a millisecond past a whole
        one: no impulse is within a rounding error of a window's bounds, so the window of a row
        can be worked out again from its id."""
        return cls.of(rows, seconds, rate, (int((time.time() + STREAM_LEAD) * 1000) + 0.5) / 1000)

    @property
    def stop(self) -> float:
        return self.start + self.impulses * self.interval

    def rows_at(self, moment: float) -> Iterator[Dict[str, Any]]:
        """The rows of the impulse at ``moment`` (PeriodicImpulse's element: its timestamp)."""
        index = round((moment - self.start) / self.interval)
        return rows_between(self._first_row(index), self._first_row(index + 1))

    def _first_row(self, index: int) -> int:
        return min(index, self.impulses) * self.rows // self.impulses

    def window_ends(self) -> Any:
        """Per row id, the end of its window (epoch microseconds), as a numpy array."""
        import numpy as np

        moments = np.round((self.start + self.interval * np.arange(self.impulses)) * 1e6).astype(np.int64)
        window = WINDOW_SECONDS * 1_000_000
        firsts = np.arange(self.impulses + 1, dtype=np.int64) * self.rows // self.impulses
        return np.repeat((moments // window + 1) * window, np.diff(firsts))


def run_stream_case(case: str, stream: Stream, endpoint: str, bucket: str, runner_args: List[str]) -> None:
    """One streaming case, in this (child) process. Each window's output is recorded by a ``Map``
    (in the LOOPBACK worker, this process): the window's end, ``time.time()`` when it was output,
    and what it holds; the records are printed at the end, one JSON line, for the driver."""
    import apache_beam as beam
    from apache_beam.io import fileio
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    from apache_beam.transforms.window import FixedWindows
    from apache_beam.utils.windowed_value import WindowedValue

    from beam_s3_sink import CopyToS3

    class CountInBundle(beam.DoFn):
        """The rows of each window in a bundle, out at the bundle's end: a combiner lifted by
        hand, as Beam lifts none in a streaming portable pipeline (a ``Count`` would send every
        row through Flink's ``GroupByKey``: 24 s of median delay at 1,000,000 rows, not a floor)."""

        def start_bundle(self) -> None:
            self.counts: Dict[Any, int] = {}

        def process(self, row: Any, window: Any = beam.DoFn.WindowParam) -> None:
            self.counts[window] = self.counts.get(window, 0) + 1

        def finish_bundle(self) -> Iterator[Any]:
            for window, rows in self.counts.items():
                yield WindowedValue(rows, window.max_timestamp(), [window])

    def record_count(rows: int, path: str, window: Any = beam.DoFn.WindowParam) -> None:
        _record(path, end=window.end.micros, rows=rows)

    def record_file(written: Any, path: str) -> None:  # a FileResult names the file in the folder
        _record(path, end=written.window.end.micros, files=[f"{prefix}/{written.file_name}"])

    def record_unit(result: Any, path: str) -> None:
        end = (result.unit.end - _EPOCH) // datetime.timedelta(microseconds=1)
        files = [f.uri for f in result.files]
        _record(path, end=end, rows=result.rows, unit=result.unit.id, files=files, error=result.error)

    prefix = f"s3://{bucket}/{case}-{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile(prefix="bench-windows-", suffix=".jsonl") as records:
        with beam.Pipeline(options=PipelineOptions(runner_args + beam_s3_flags(endpoint))) as p:
            windowed = (
                p
                | PeriodicImpulse(stream.start, stream.stop, stream.interval)
                | "Rows" >> beam.FlatMap(stream.rows_at)
                | beam.WindowInto(FixedWindows(WINDOW_SECONDS))
            )
            if case == "stream_generate":
                counts = windowed | beam.ParDo(CountInBundle()) | beam.CombineGlobally(sum).without_defaults()
                counts | beam.Map(record_count, records.name)
            elif case == "stream_copy":
                copied = windowed | CopyToS3(prefix, format="parquet", schema=schema(), s3=s3_config(endpoint))
                copied | beam.Map(record_unit, records.name)
            elif case == "stream_write":
                written = windowed | fileio.WriteToFiles(
                    prefix, file_naming=fileio.default_file_naming("part", ".parquet"), sink=parquet_file_sink
                )
                written | beam.Map(record_file, records.name)
            else:
                raise SystemExit(f"unknown case {case}")
        windows = [json.loads(line) for line in records.read().decode().splitlines()]
    print(json.dumps({"start": stream.start, "prefix": prefix, "windows": windows}), flush=True)


def parquet_file_sink(destination: Any) -> Any:
    """A ``fileio.FileSink`` writing Parquet (Beam ships none; ``WriteToParquet`` fails on a
    stream on Flink, see docs/benchmarks.md): pyarrow's ``ParquetWriter`` (Snappy, as
    ``CopyToS3``) on the file Beam's filesystem opened, a row group per 65,536 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam.io import fileio

    class ParquetSink(fileio.FileSink):
        def open(self, fh: Any) -> None:
            self._writer, self._rows = pq.ParquetWriter(fh, schema()), []

        def write(self, record: Dict[str, Any]) -> None:
            self._rows.append(record)
            if len(self._rows) >= 65_536:
                self._write_rows()

        def flush(self) -> None:
            if self._rows:
                self._write_rows()
            self._writer.close()

        def _write_rows(self) -> None:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=schema()))
            self._rows = []

    return ParquetSink()


def _record(path: str, **fields: Any) -> None:
    """Append one window's record, stamped with the time now, to the file at ``path``."""
    with open(path, "a") as f:
        f.write(json.dumps({"at": time.time(), **fields}) + "\n")


def stream_suite(
    args: argparse.Namespace, endpoint: str, bucket: str, flags: List[str], where: str, servers: Dict[str, int]
) -> int:
    """The streaming cases, each in its own process on the job server of ``flags``, ``--repeat``
    runs interleaved; each copy read back and checked; a table of medians and the ratios.
    ``servers``: the processes (S3, and the job server when this run started it) whose CPU
    time each case is charged with."""
    client = s3_client(endpoint)
    cases = args.cases.split(",")
    pace = ["--stream-seconds", str(args.stream_seconds), "--impulses-per-second", str(args.impulses_per_second)]
    timeout = STREAM_LEAD + args.stream_seconds + STREAM_GRACE
    for case in cases:  # a 2 s stream of each first: the job server's JIT warms up for every case alike
        measure(case, 2000, endpoint, bucket, flags + ["--streaming"], ["--stream-seconds", "2"], timeout)
    _empty_bucket(client, bucket)
    runs: Dict[str, List[Dict[str, Any]]] = {c: [] for c in cases}
    for attempt in range(args.repeat):
        for case in cases:
            before = {name: _cpu_seconds(pid) for name, pid in servers.items()}
            run = measure(case, args.rows, endpoint, bucket, flags + ["--streaming"], pace, timeout)
            run.update({f"cpu_{name}": _cpu_seconds(pid) - before[name] for name, pid in servers.items()})
            stream = Stream.of(args.rows, args.stream_seconds, args.impulses_per_second, run["start"])
            runs[case].append(stream_figures(case, run, stream, client, bucket))
            _empty_bucket(client, bucket)
            figures = runs[case][-1]
            print(
                f"  run {attempt + 1}/{args.repeat} {case:16} {figures['seconds']:6.1f} s, delays "
                f"{' '.join(f'{d:.2f}' for d in figures['delays'])} s, {figures['rows_read']:,} rows read back: "
                f"{'; '.join(figures['problems'] + figures['notes']) or 'ok'}",
                file=sys.stderr,
            )
    figures = STREAM_FIGURES + tuple(f"cpu_{name}" for name in servers)
    median = {c: {k: statistics.median(r[k] for r in runs[c]) for k in figures} for c in cases}
    print(
        f"\n{args.rows:,} rows, 8 columns, PeriodicImpulse {args.impulses_per_second:g}/s for "
        f"{args.stream_seconds:g} s, FixedWindows({WINDOW_SECONDS}), {where}, --streaming, moto S3 on "
        f"loopback, median of {args.repeat} run(s)\n"
    )
    columns = ["wall s", "rows/s of wall time", "stream s", "rows/s of stream time", "delay median s"]
    columns += ["delay max s", "windows", "data files", "peak RSS MiB", "CPU s case"]
    columns += [f"CPU s {name}" for name in servers]
    print("| case | " + " | ".join(columns) + " |\n| --- |" + " ---: |" * len(columns))
    for c in cases:
        m = median[c]
        print(
            f"| {STREAM_LABELS[c]} | {m['seconds']:.1f} | {args.rows / m['seconds']:,.0f} | {m['stream_seconds']:.1f} "
            f"| {args.rows / m['stream_seconds']:,.0f} | {m['delay_median']:.2f} | {m['delay_max']:.2f} "
            f"| {m['windows']:.0f} | {m['files']:.0f} | {m['rss_mib']:.0f} | {m['cpu_s']:.1f} |"
            + "".join(f" {m['cpu_' + name]:.1f} |" for name in servers)
        )
    print()
    if "stream_copy" in median and "stream_write" in median:
        copy, write = median["stream_copy"], median["stream_write"]
        for label, key, of_rate in (
            ("rows/s of wall time", "seconds", True),
            ("rows/s of stream time", "stream_seconds", True),
            ("median delay", "delay_median", False),
            ("max delay", "delay_max", False),
        ):
            ratio = write[key] / copy[key] if of_rate else copy[key] / write[key]
            print(f"{'CopyToS3 / WriteToFiles, ' + label:50} {ratio:5.2f}")
    if "stream_copy" in median and "stream_generate" in median:
        extra = median["stream_copy"]["delay_median"] - median["stream_generate"]["delay_median"]
        print(f"{'CopyToS3 median delay - generate-only, s':50} {extra:5.2f}")
    for c in cases:  # the last run's RSS over time and delay per window: flat, and no backlog
        last = runs[c][-1]
        flat = rss_flatness(last["rss_timeline"])
        if flat is not None:
            print(f"{c + ', peak RSS end / a quarter in':50} {flat:5.2f}  (target <= 1.15: flat)")
            print(
                f"  RSS MiB every {RSS_SAMPLE_SECONDS:.0f} s: " + " ".join(f"{m:.0f}" for _, m in last["rss_timeline"])
            )
        print(f"  {c} delay per window, s: " + " ".join(f"{d:.1f}" for d in last["delays"]))
    failed = [f"{c}: {p}" for c in cases for r in runs[c] for p in r["problems"]]
    for problem in failed:
        print(f"CHECK FAILED {problem}")
    for note in sorted({f"{c}: {n}" for c in cases for r in runs[c] for n in r["notes"]}):
        print(f"note {note}")
    return 1 if failed else 0


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_figures(case: str, run: Dict[str, Any], stream: Stream, client: Any, bucket: str) -> Dict[str, Any]:
    """A streaming run's figures and checks. A window's delay runs from the moment its last row
    could exist (its end, or the stream's stop if earlier) to its last output; stream seconds
    from the stream's start to the last output of all."""
    by_end: Dict[int, List[Dict[str, Any]]] = {}
    for record in run["windows"]:
        by_end.setdefault(record["end"], []).append(record)
    delays = [max(r["at"] for r in rs) - min(end / 1e6, stream.stop) for end, rs in sorted(by_end.items())]
    last = max((r["at"] for r in run["windows"]), default=float("nan"))
    checked = check_stream(case, stream, by_end, client, bucket, run["prefix"])
    return {
        **{k: v for k, v in run.items() if k in ("seconds", "rss_mib", "rss_timeline") or k.startswith("cpu_")},
        "stream_seconds": last - stream.start,
        "delays": delays,
        "delay_median": statistics.median(delays or [float("nan")]),
        "delay_max": max(delays or [float("nan")]),
        "windows": len(by_end),
        **checked,
    }


def check_stream(
    case: str, stream: Stream, by_end: Dict[int, List[Dict[str, Any]]], client: Any, bucket: str, prefix: str
) -> Dict[str, Any]:
    """Read a streaming case's output back: the rows of each window against the stream's, every
    row id exactly once, each in a file of its own window; for CopyToS3 also one unit per window,
    no error, and no data file the units do not name. ``problems`` are failures (rows lost or
    doubled, a CopyToS3 window wrong); ``notes`` what is only worth saying."""
    import numpy as np
    import pyarrow.parquet as pq

    ends = stream.window_ends()
    expected = {int(end): int(n) for end, n in zip(*np.unique(ends, return_counts=True))}
    problems: List[str] = []
    notes: List[str] = []
    got: Dict[int, int] = {}
    files = {uri: end for end, records in by_end.items() for r in records for uri in r.get("files", ())}
    if case == "stream_generate":
        got = {end: sum(r["rows"] for r in records) for end, records in by_end.items()}
        rows_read = sum(got.values())
    else:
        seen = np.zeros(stream.rows, dtype=np.int64)
        misplaced = 0
        for uri, end in files.items():
            key = uri[len(f"s3://{bucket}/") :]
            ids = pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=key)["Body"].read()), columns=["id"])
            ids = ids.column("id").to_numpy()
            seen += np.bincount(ids, minlength=stream.rows)
            misplaced += int((ends[ids] != end).sum())
            got[end] = got.get(end, 0) + len(ids)
        rows_read = int(seen.sum())
        if (seen == 0).any() or (seen > 1).any():
            problems.append(f"{int((seen == 0).sum())} row ids missing, {int((seen > 1).sum())} more than once")
        if misplaced:
            (problems if case == "stream_copy" else notes).append(f"{misplaced} rows in another window's file")
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.split("/", 3)[3])
        listed = {
            f"s3://{bucket}/{o['Key']}"
            for page in pages
            for o in page.get("Contents", ())
            if o["Key"].endswith(".parquet") and "/.temp" not in o["Key"]
        }
        if listed - set(files):
            problems.append(f"{len(listed - set(files))} data files that no output names")
    if rows_read != stream.rows:
        problems.append(f"{rows_read:,} rows read back, {stream.rows:,} generated")
    if case == "stream_copy":
        errors = [r["error"] for records in by_end.values() for r in records if r["error"]]
        twice = [end for end, records in by_end.items() if len(records) != 1]
        problems += [f"unit error: {e}" for e in errors]
        if twice:
            problems.append(f"{len(twice)} windows committed more than once")
    wrong = sorted(set(expected) ^ set(got)) + [e for e in expected if e in got and got[e] != expected[e]]
    if wrong:
        target = problems if case != "stream_write" else notes
        target.append(
            "windows differ from the stream's: "
            + ", ".join(f"{_moment(e)} {got.get(e, 0)} rows, expected {expected.get(e, 0)}" for e in wrong[:5])
        )
    return {"rows_read": rows_read, "files": len(files), "problems": problems, "notes": notes}


def _moment(micros: int) -> str:
    """A window's end, for a message: ``03:46:20``."""
    return (_EPOCH + datetime.timedelta(microseconds=micros)).strftime("%H:%M:%S")


# the lineitem suite: Arrow batches from local Parquet ----------------------------------------
LINEITEM_CASES = [
    "duckdb",
    "write_dataset",
    "read_batched",
    "beam_batched",
    "copy_batches",
    "copy_batches_zstd",
    "copy_batches_csv",
    "copy_batches_csv_bad_rows",
    "copy_rows",
    "cli",
    "copy_iceberg",
    "pyiceberg_append",
    "copy_delta",
    "write_deltalake",
]
LINEITEM_LABELS = {
    "duckdb": "DuckDB COPY (FROM read_parquet) TO 's3://' (httpfs)",
    "write_dataset": "pyarrow.dataset.write_dataset to S3FileSystem",
    "read_batched": "Beam ReadFromParquetBatched -> Count (the read alone)",
    "beam_batched": "Beam ReadFromParquetBatched -> WriteToParquetBatched",
    "copy_batches": "CopyToS3, batches from ReadFromParquetBatched",
    "copy_batches_zstd": "CopyToS3 with zstd (Iceberg's codec), batches from ReadFromParquetBatched",
    "copy_batches_csv": "CopyToS3 to CSV, batches from ReadFromParquetBatched",
    "copy_batches_csv_bad_rows": "CopyToS3 to CSV with max_bad_rows=1 (every batch checked), batches",
    "copy_rows": "CopyToS3, rows from ReadFromParquet",
    "cli": "beam-s3-copy --source lineitem.parquet (python -m beam_s3_sink.cli)",
    "copy_iceberg": "CopyToIceberg (SQLite catalog), batches from ReadFromParquetBatched",
    "pyiceberg_append": "pyarrow.parquet.read_table + pyiceberg Table.append (SQLite catalog)",
    "copy_delta": "CopyToDelta, batches from ReadFromParquetBatched",
    "write_deltalake": "pyarrow.parquet.read_table + deltalake.write_deltalake",
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
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--target",
                target,
                "-r",
                os.path.join(ROOT, "benchmarks", "requirements-duckdb.txt"),
            ],
            check=True,
        )
    return target


def _httpfs_extension() -> str:
    """The httpfs extension shipped in the duckdb-extension-httpfs wheel (nothing downloaded at run time)."""
    import glob

    import duckdb
    import duckdb_extension_httpfs

    found = glob.glob(
        os.path.join(
            os.path.dirname(duckdb_extension_httpfs.__file__),
            "extensions",
            f"v{duckdb.__version__}",
            "httpfs.duckdb_extension",
        )
    )
    if not found:
        raise SystemExit(
            f"duckdb-extension-httpfs=={duckdb.__version__} is not installed "
            "(pip install -r benchmarks/requirements.txt)"
        )
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
        con.execute(
            f"CREATE SECRET (TYPE s3, KEY_ID '{ACCESS_KEY}', SECRET '{SECRET_KEY}', REGION '{REGION}', "
            f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )
        con.execute(f"COPY (FROM read_parquet('{path}')) TO 's3://{bucket}/{prefix}/data.parquet' (FORMAT parquet)")
        return
    if case == "pyiceberg_append":
        import pyarrow.parquet as pq

        with tempfile.TemporaryDirectory(prefix="bench-catalog-") as folder:
            catalog = iceberg_catalog(endpoint, folder, f"s3://{bucket}/{prefix}")
            pyiceberg_append(catalog, "bench.lineitem", pq.read_table(path))
        return
    if case == "write_deltalake":
        import pyarrow.parquet as pq

        write_deltalake(endpoint, f"s3://{bucket}/{prefix}", pq.read_table(path))
        return
    if case == "write_dataset":
        import pyarrow.dataset as ds
        from pyarrow.fs import S3FileSystem

        fs = S3FileSystem(
            access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, endpoint_override=host, scheme="http"
        )
        ds.write_dataset(ds.dataset(path, format="parquet"), f"{bucket}/{prefix}", format="parquet", filesystem=fs)
        return
    s3_flags = beam_s3_flags(endpoint)
    if case == "cli":
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }
        subprocess.run(
            [
                sys.executable,
                "-m",
                "beam_s3_sink.cli",
                "--source",
                path,
                "--output",
                f"s3://{bucket}/{prefix}",
                *s3_flags,
                *_cli_flags(),
            ],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return
    import apache_beam as beam
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_s3_sink import CopyToDelta, CopyToIceberg, CopyToS3, ParquetFormat

    schema = pq.read_schema(path)
    config = s3_config(endpoint)
    folder = tempfile.TemporaryDirectory(prefix="bench-catalog-")  # copy_iceberg's catalog
    with folder, beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"] + s3_flags)) as p:
        if case == "read_batched":
            p | beam.io.ReadFromParquetBatched(path) | beam.Map(lambda t: t.num_rows) | beam.CombineGlobally(sum)
        elif case == "beam_batched":
            (
                p
                | beam.io.ReadFromParquetBatched(path)
                | beam.io.WriteToParquetBatched(f"s3://{bucket}/{prefix}/part", schema, file_name_suffix=".parquet")
            )
        elif case in ("copy_batches", "copy_batches_zstd"):
            fmt = ParquetFormat(compression="zstd" if case == "copy_batches_zstd" else "snappy")
            copy = CopyToS3(f"s3://{bucket}/{prefix}", format=fmt, schema=schema, s3=config)
            p | beam.io.ReadFromParquetBatched(path) | copy | beam.Map(_print_files)
        elif case in ("copy_batches_csv", "copy_batches_csv_bad_rows"):
            bad = 1 if case == "copy_batches_csv_bad_rows" else 0
            copy = CopyToS3(f"s3://{bucket}/{prefix}", format="csv", schema=schema, s3=config, max_bad_rows=bad)
            p | beam.io.ReadFromParquetBatched(path) | copy | beam.Map(_print_files)
        elif case == "copy_iceberg":
            catalog = iceberg_catalog(endpoint, folder.name, f"s3://{bucket}/{prefix}")
            copy = CopyToIceberg("bench.lineitem", catalog=catalog, schema=schema)
            p | beam.io.ReadFromParquetBatched(path) | copy | beam.Map(_print_files)
        elif case == "copy_delta":
            copy = CopyToDelta(f"s3://{bucket}/{prefix}", schema=schema, s3=config)
            p | beam.io.ReadFromParquetBatched(path) | copy | beam.Map(_print_files)
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
    """Run ``argv``; wall time, the peak RSS of its whole process tree (sampled every 0.1 s), and
    what the case printed as its last JSON line (a copy's data files)."""
    import threading

    out = tempfile.TemporaryFile()
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, cwd=ROOT)
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
    with out:
        out.seek(0)
        lines = [line for line in out.read().decode().splitlines() if line.startswith("{")]
    result = {"seconds": elapsed, "rss_mib": max(peak[0], usage.ru_maxrss / 1024)}
    if lines:
        result.update(json.loads(lines[-1]))
    return result


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
    peak RSS of each process tree, the ratios of issues 14, 29 and 36, and the RSS flatness check
    (copy_batches and beam_batched at scale factors ``--rss-scales``)."""
    import pyarrow.parquet as pq

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port, start_moto

    path = lineitem_file(args.scale)
    cases = args.cases.split(",") if args.cases else LINEITEM_CASES
    if "duckdb" in cases:
        duckdb_dir()
    meta = pq.ParquetFile(path).metadata
    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = s3_client(endpoint)
        bucket = "bench"
        client.create_bucket(Bucket=bucket)

        def one(case: str, file: str) -> Dict[str, float]:
            argv = [
                sys.executable,
                __file__,
                "--suite",
                "lineitem",
                "--case",
                case,
                "--input",
                file,
                "--endpoint",
                endpoint,
                "--bucket",
                bucket,
            ]
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
                print(
                    f"  run {attempt + 1}/{args.repeat} {case:16} {runs[case][-1]['seconds']:7.2f} s "
                    f"{runs[case][-1]['rss_mib']:6.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
        median = {c: statistics.median(r["seconds"] for r in runs[c]) for c in cases}
        rss = {c: max(r["rss_mib"] for r in runs[c]) for c in cases}
        print(
            f"\nTPC-H lineitem SF{args.scale} ({meta.num_rows:,} rows, {meta.num_columns} columns, "
            f"{meta.num_row_groups} row groups, {os.path.getsize(path) / 2**20:.0f} MiB), local Parquet -> "
            f"moto S3 on loopback, {os.cpu_count()} cores, median of {args.repeat} run(s)\n"
        )
        print("| way | seconds | rows/s | peak RSS MiB | × DuckDB |\n| --- | ---: | ---: | ---: | ---: |")
        for c in cases:
            ratio = f"{median[c] / median['duckdb']:.2f}" if "duckdb" in median else ""
            print(
                f"| {LINEITEM_LABELS[c]} | {median[c]:.1f} | {meta.num_rows / median[c]:,.0f} | {rss[c]:.0f} | {ratio} |"
            )
        print()
        targets = [
            ("copy_batches", "write_dataset", "CopyToS3 batches / write_dataset", 1.25),
            ("copy_batches", "beam_batched", "CopyToS3 batches / WriteToParquetBatched", 0.4),
            ("cli", "duckdb", "CLI / DuckDB COPY", 1.5),
        ]
        for a, b, label, target in targets:
            if a in median and b in median:
                ratio = median[a] / median[b]
                print(f"{label:44} {ratio:5.2f}  (target <= {target}: {'met' if ratio <= target else 'NOT met'})")
        iceberg_ratios(median, runs, "copy_batches")
        delta_ratios(median, runs, "copy_batches")
        if "copy_batches" in rss and "beam_batched" in rss:
            print(
                f"{'peak RSS CopyToS3 batches / WriteToParquetBatched':44} {rss['copy_batches'] / rss['beam_batched']:5.2f}"
                f"  ({rss['copy_batches']:.0f} / {rss['beam_batched']:.0f} MiB, target <= 1)"
            )
        if args.rss_scales:
            small_scale, large_scale = args.rss_scales.split(",")
            for case in ("copy_batches", "beam_batched"):
                small = one(case, lineitem_file(small_scale))["rss_mib"]
                large = one(case, lineitem_file(large_scale))["rss_mib"]
                print(
                    f"{'peak RSS ' + case + f' SF{large_scale} / SF{small_scale}':44} {large / small:5.2f}"
                    f"  ({large:.0f} / {small:.0f} MiB, target <= 1.15 for copy_batches)"
                )
    finally:
        server.terminate()
        server.wait(10)
    return 0


# the fixed-cost suite: the start of a copy, on a 10-row file ---------------------------------
#: What the fixed-cost suite times in a fresh process, besides the two copies: the package's
#: import, Beam's (the floor of every Beam pipeline's start), and the command's modules as the
#: command imports them (Beam without pandas, pymongo, bson: beam_s3_sink.cli.NOT_IMPORTED).
FIXED_IMPORTS = {
    "import beam_s3_sink": "import beam_s3_sink",
    "import apache_beam": "import apache_beam",
    "import the CLI's modules": "import sys, beam_s3_sink.cli as c\n"
    "if hasattr(c, 'NOT_IMPORTED'): sys.meta_path.insert(0, c._NotImported(frozenset(c.NOT_IMPORTED)))\n"
    "c._import_command() if hasattr(c, '_import_command') else __import__('beam_s3_sink.cli.command')",
}


def _timed(argv: List[str], env: Dict[str, str]) -> Tuple[float, float]:
    """Run ``argv`` from the repository's root (its output discarded): wall and CPU seconds
    (user + system, its threads included)."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[1:4]} failed:\n{child.stderr.read().decode()[-3000:]}")
    child.stderr.close()
    return elapsed, usage.ru_utime + usage.ru_stime


def fixed_main(args: argparse.Namespace) -> int:
    """The fixed-cost suite (issue 37): what a copy costs before its first row. A 10-row Parquet
    file (the rows suite's 8 columns) copied to one moto server by the CLI (``python -m
    beam_s3_sink.cli``, its own process) and by DuckDB's ``COPY`` (a process that imports duckdb,
    loads httpfs and copies: the lineitem suite's ``duckdb`` case), ``--repeat`` (5) runs of each,
    interleaved, after one run of each that is not counted; the medians of wall and CPU time,
    the difference of the walls (target: at most 1.0 s), and the import times of the package and
    of Beam in a fresh process. Every process runs with its bytecode cached (``__pycache__`` under
    the cache, not the tree), as an installed package's: compiling the package's sources is
    0.1 s of its own."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port, start_moto

    sys.path.insert(0, duckdb_dir())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        PYTHONPYCACHEPREFIX=os.path.join(_cache_dir(), "bench", "pycache"),
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_DEFAULT_REGION=REGION,
    )
    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    folder = tempfile.TemporaryDirectory(prefix="bench-fixed-")
    try:
        path = os.path.join(folder.name, "ten.parquet")
        pq.write_table(pa.Table.from_pylist(list(rows_between(0, 10)), schema=schema()), path)
        bucket = "bench"
        s3_client(endpoint).create_bucket(Bucket=bucket)

        def argv(case: str) -> List[str]:
            if case == "cli":
                output = f"s3://{bucket}/cli-{uuid.uuid4().hex[:8]}"
                cli = [sys.executable, "-m", "beam_s3_sink.cli", "--source", path, "--output", output]
                return cli + beam_s3_flags(endpoint) + _cli_flags()
            if case == "duckdb":
                lineitem = [sys.executable, __file__, "--suite", "lineitem", "--case", "duckdb", "--input", path]
                return lineitem + ["--endpoint", endpoint, "--bucket", bucket]
            if case == "cli --help":
                return [sys.executable, "-m", "beam_s3_sink.cli", "--help"]
            return [sys.executable, "-c", FIXED_IMPORTS[case]]

        cases = ["cli", "duckdb", "cli --help", *FIXED_IMPORTS]
        for case in cases:  # bytecode compiled and cached, the OS's file cache warm
            _timed(argv(case), env)
        runs: Dict[str, List[Tuple[float, float]]] = {c: [] for c in cases}
        for attempt in range(args.repeat):
            for case in cases:  # interleaved, so that drift hits every case alike
                runs[case].append(_timed(argv(case), env))
                wall, cpu = runs[case][-1]
                print(
                    f"  run {attempt + 1}/{args.repeat} {case:20} {wall:6.2f} s, CPU {cpu:5.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(10)
        folder.cleanup()
    wall = {c: statistics.median(r[0] for r in runs[c]) for c in cases}
    cpu = {c: statistics.median(r[1] for r in runs[c]) for c in cases}
    print(
        f"\n10 rows, 8 columns, local Parquet -> moto S3 on loopback, {os.cpu_count()} cores, "
        f"median of {args.repeat} run(s), a fresh process each\n"
    )
    labels = {
        "cli": "beam-s3-copy (python -m beam_s3_sink.cli)",
        "duckdb": "DuckDB COPY (python: import duckdb, httpfs)",
        "cli --help": "beam-s3-copy --help",
        **{c: c for c in FIXED_IMPORTS},
    }
    print("| process | wall s | CPU s |\n| --- | ---: | ---: |")
    for c in cases:
        print(f"| {labels[c]} | {wall[c]:.2f} | {cpu[c]:.2f} |")
    print()
    extra = wall["cli"] - wall["duckdb"]
    print(f"{'CLI - DuckDB COPY, wall s':44} {extra:5.2f}  (target <= 1.0: {'met' if extra <= 1.0 else 'NOT met'})")
    modules = wall["cli"] - wall["import the CLI's modules"]
    print(f"{'CLI - import of its modules, wall s':44} {modules:5.2f}  (planning and running the copy)")
    return 0


# the driver ----------------------------------------------------------------------------------
def measure(
    case: str,
    rows: int,
    endpoint: str,
    bucket: str,
    runner_args: List[str] = ("--runner=DirectRunner",),
    extra: List[str] = (),
    timeout: Optional[float] = None,
) -> Dict[str, Any]:
    """Run one case in its own process (``extra``: more arguments for it; killed after
    ``timeout`` seconds): wall seconds, peak RSS, CPU seconds, and what the case printed last
    as a JSON line (a copy's data files)."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--case",
                case,
                "--rows",
                str(rows),
                "--endpoint",
                endpoint,
                "--bucket",
                bucket,
                "--runner-args",
                json.dumps(list(runner_args)),
                *extra,
            ],
            stdout=out,
            stderr=err,
        )
        killer = threading.Timer(timeout, child.kill) if timeout else None
        if killer is not None:
            killer.start()
        timeline: List[Tuple[float, float]] = []  # (seconds since the start, the case's tree RSS MiB)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(RSS_SAMPLE_SECONDS):
                timeline.append((time.monotonic() - started, _tree_rss_mib(child.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.monotonic() - started
        done.set()
        sampler.join()
        if killer is not None:
            killer.cancel()
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            killed = f" (killed after {timeout:.0f} s)" if timeout and elapsed >= timeout else ""
            raise SystemExit(f"case {case} failed{killed}:\n{err.read().decode()[-3000:]}")
        out.seek(0)
        lines = [line for line in out.read().decode().splitlines() if line.startswith("{")]
    result = {
        "seconds": elapsed,
        "rss_mib": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_timeline": timeline,
    }
    if lines:
        result.update(json.loads(lines[-1]))
    return result


RSS_SAMPLE_SECONDS = 30.0
"""How often :func:`measure` samples the RSS of a case's process tree (the streaming suite
prints it over time: a stream of ten minutes must hold it flat)."""


def rss_flatness(timeline: List[Tuple[float, float]]) -> Optional[float]:
    """The RSS of the run's last sample over its RSS a quarter of the way in (after start-up),
    or None for a run too short to tell (fewer than four samples)."""
    if len(timeline) < 4:
        return None
    return timeline[-1][1] / timeline[len(timeline) // 4][1]


FILE_COUNT_RUNS = [("direct", 1), ("multiprocess", 2), ("flink", 2), ("flink", 4), ("spark", 2), ("prism", 2)]


def merge_benchmark(n: int = 100_000) -> float:
    """Seconds to merge ``n`` one-file bundle reports the way CombineGlobally does."""
    from beam_s3_sink.completion import MergeReports
    from beam_s3_sink.messages import PendingFile, UploadReport

    reports = [UploadReport(files=(PendingFile(f"k{i}", "u", ((1, "e"),), 1, 1),), rows=1, bytes=1) for i in range(n)]
    combine = MergeReports()
    started = time.monotonic()
    accumulators = []
    for chunk in range(0, n, 1000):  # partial combines, as a runner does per bundle
        acc = combine.create_accumulator()
        for report in reports[chunk : chunk + 1000]:
            acc = combine.add_input(acc, report)
        accumulators.append(acc)
    merged = combine.extract_output(combine.merge_accumulators(accumulators))
    elapsed = time.monotonic() - started
    assert len(merged.files) == n and merged.rows == n
    return elapsed


def file_counts(args: argparse.Namespace, endpoint: str, bucket: str, log: Any) -> None:
    """Data files of a default-options CopyToS3 Parquet copy on every runner and parallelism."""
    servers: Dict[str, Any] = {}
    results = []
    try:
        for runner, parallelism in FILE_COUNT_RUNS:
            job_endpoint = ""
            if runner in ("flink", "spark"):
                key = runner if runner == "flink" else f"spark-{parallelism}"
                if key not in servers:
                    servers[key] = start_job_server(runner, log, spark_master=f"local[{parallelism}]")
                job_endpoint = servers[key][1]
            flags = runner_flags(runner, job_endpoint, parallelism)
            for case in args.cases.split(","):
                if not case.startswith("copy_"):
                    continue
                run = measure(case, args.rows, endpoint, bucket, flags)
                results.append((runner, parallelism, case, run))
                print(
                    f"  {runner:12} p={parallelism} {case:13} {run['seconds']:7.2f} s  {run['files']} files",
                    file=sys.stderr,
                )
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(30)
    print(f"\n{args.rows:,} rows, 8 columns, default options (max_file_size 256 MiB)\n")
    print(
        f"{'runner':14} {'parallelism':>11} {'case':13} {'files':>6} {'files/worker':>12} "
        f"{'mean MiB':>9} {'seconds':>8}"
    )
    for runner, parallelism, case, run in results:
        mean = run["bytes"] / max(1, run["files"]) / 2**20
        print(
            f"{runner:14} {parallelism:11} {case:13} {run['files']:6} {run['files'] / parallelism:12.1f} "
            f"{mean:9.2f} {run['seconds']:8.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=None, help="runs per case (default 3; 1 on Flink)")
    parser.add_argument(
        "--rss-rows",
        type=int,
        default=None,
        help="rows of the large CopyToS3 Parquet run for the memory check (0: skip it; "
        "default 4,000,000 on the DirectRunner, 0 on Flink)",
    )
    parser.add_argument("--cases", default=None)
    parser.add_argument("--runner", choices=["direct", "flink"], default="direct")
    parser.add_argument("--job-endpoint", default="", help="use this Flink job server instead of starting one")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--file-counts",
        action="store_true",
        help="count the data files of a copy on every runner (direct, 2 processes, "
        "Flink 2 and 4, Spark local[2], Prism)",
    )
    parser.add_argument(
        "--merge-reports", type=int, default=100_000, help="also time merging this many bundle reports (0: skip)"
    )
    parser.add_argument(
        "--suite",
        choices=("rows", "lineitem", "fixed"),
        default="rows",
        help="rows: the generated 8-column suite; lineitem: TPC-H lineitem from Parquet; "
        "fixed: the fixed cost, the CLI and DuckDB COPY on a 10-row file",
    )
    parser.add_argument("--scale", default="1", help="lineitem: the TPC-H scale factor")
    parser.add_argument(
        "--rss-scales", default="0.5,2", help="lineitem: the two scale factors of the RSS check ('' skips)"
    )
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="the streaming suite on Flink: a PeriodicImpulse stream in fixed windows (see above)",
    )
    parser.add_argument("--stream-seconds", type=float, default=60, help="streaming: how long the stream runs")
    parser.add_argument("--impulses-per-second", type=float, default=1000, help="streaming: impulses a second")
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--bucket", help=argparse.SUPPRESS)
    parser.add_argument("--runner-args", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.suite == "lineitem":
        if args.case:
            run_lineitem_case(args.case, args.input, args.endpoint, args.bucket)
            return 0
        args.repeat = args.repeat or 3
        return lineitem_main(args)
    if args.suite == "fixed":
        args.repeat = args.repeat or 5
        return fixed_main(args)
    if args.case in STREAM_CASES:
        stream = Stream.starting_soon(args.rows, args.stream_seconds, args.impulses_per_second)
        run_stream_case(args.case, stream, args.endpoint, args.bucket, json.loads(args.runner_args))
        return 0
    if args.case:
        run_case(
            args.case,
            args.rows,
            args.endpoint,
            args.bucket,
            json.loads(args.runner_args) if args.runner_args else ["--runner=DirectRunner"],
        )
        return 0
    if args.streaming:
        args.runner = "flink"
        args.cases = args.cases or ",".join(STREAM_CASES)
    flink = args.runner == "flink"
    if args.repeat is None:
        args.repeat = 1 if flink else 3
    if args.rss_rows is None:
        args.rss_rows = 0 if flink or args.file_counts else 4_000_000
    if args.cases is None:
        args.cases = (
            "copy_parquet,copy_csv"
            if args.file_counts
            else ",".join(c for c in CASES if not (flink and c in NO_BEAM_CASES))
        )

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from conftest import free_port, start_moto

    port = free_port()
    server = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    job_server = None
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"beam-s3-sink-bench-{os.getpid()}.log"), "wb")
    try:
        bucket = "bench"
        client = s3_client(endpoint)
        client.create_bucket(Bucket=bucket)
        if args.file_counts:
            file_counts(args, endpoint, bucket, log)
            return 0
        flags = runner_flags("direct")
        where = "DirectRunner"
        if flink:
            job_endpoint = args.job_endpoint
            if not job_endpoint:
                job_server, job_endpoint = start_job_server("flink", log)
            flags = runner_flags("flink", job_endpoint, args.parallelism)
            where = f"Flink job server {job_endpoint}, LOOPBACK, parallelism {args.parallelism}"
        if flink and not args.streaming:  # (the streaming suite warms up with streams)
            measure("generate", 1000, endpoint, bucket, flags)  # warm the job server's JIT once
        if args.streaming:
            servers = {"S3": server.pid, **({"Flink": job_server.pid} if job_server is not None else {})}
            return stream_suite(args, endpoint, bucket, flags, where, servers)
        cases = args.cases.split(",")
        runs: Dict[str, List[Dict[str, float]]] = {c: [] for c in cases}
        for attempt in range(args.repeat):
            for case in cases:  # interleaved, so that drift hits every case alike
                runs[case].append(measure(case, args.rows, endpoint, bucket, flags))
                files = f"  {runs[case][-1]['files']} files" if "files" in runs[case][-1] else ""
                print(
                    f"  run {attempt + 1}/{args.repeat} {case:17} {runs[case][-1]['seconds']:7.2f} s, "
                    f"CPU {runs[case][-1]['cpu_s']:6.2f} s{files}",
                    file=sys.stderr,
                )
        median = {c: statistics.median(r["seconds"] for r in runs[c]) for c in cases}
        rss = {c: max(r["rss_mib"] for r in runs[c]) for c in cases}
        cpu = {c: statistics.median(r["cpu_s"] for r in runs[c]) for c in cases}  # the case's process, not moto's
        print(f"\n{args.rows:,} rows, 8 columns, {where}, moto S3 on loopback, median of {args.repeat} run(s)\n")
        print(f"{'case':18} {'seconds':>9} {'CPU s':>7} {'rows/s':>12} {'peak RSS MiB':>13} {'data files':>11}")
        for c in cases:
            files = runs[c][-1].get("files", "")
            print(f"{c:18} {median[c]:9.2f} {cpu[c]:7.2f} {args.rows / median[c]:12,.0f} {rss[c]:13.0f} {files:>11}")
        print()
        ratios = [
            ("copy_parquet", "write_parquet", "CopyToS3 Parquet / WriteToParquet", 0.35),
            ("copy_csv", "write_text", "CopyToS3 CSV / WriteToText", 0.35),
            ("copy_parquet", "baseline_parquet", "CopyToS3 Parquet / hand-written baseline", 1.25),
        ]
        for a, b, label, target in ratios:
            if a in median and b in median:
                ratio = median[a] / median[b]
                print(f"{label:44} {ratio:5.3f}  (target <= {target}: {'met' if ratio <= target else 'NOT met'})")
        iceberg_ratios(median, runs, "copy_parquet")
        delta_ratios(median, runs, "copy_parquet")
        for case in ("copy_parquet", "copy_csv"):
            if case in median and "generate" in median:
                extra = (median[case] - median["generate"]) / (args.rows / 1e6)
                print(
                    f"{case + ' - generate, s per million rows':44} {extra:5.2f}" + ("  (target <= 5)" if flink else "")
                )
        if args.rss_rows:
            small = measure("copy_parquet", args.rows, endpoint, bucket, flags)["rss_mib"]
            large = measure("copy_parquet", args.rss_rows, endpoint, bucket, flags)["rss_mib"]
            print(
                f"{'peak RSS, CopyToS3 Parquet %s / %s rows' % (f'{args.rss_rows:,}', f'{args.rows:,}'):44} "
                f"{large / small:5.2f}  ({large:.0f} / {small:.0f} MiB, target <= 1.15)"
            )
        if args.merge_reports:
            seconds = merge_benchmark(args.merge_reports)
            print(f"{'merging %s bundle reports, seconds' % f'{args.merge_reports:,}':44} {seconds:5.2f}  (target < 1)")
    finally:
        if job_server is not None:
            job_server.terminate()
            job_server.wait(30)
        server.terminate()
        server.wait(10)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
