"""Streaming copies (DESIGN.md, "Windows and streams"): an unbounded PCollection committed unit
by unit, on the runners that run ``TestStream`` (Beam's Python DirectRunner in streaming mode,
and Prism), into S3 and into an Iceberg table.

One scripted stream feeds every copy of a pipeline::

    watermark 0 ─▶ ON_TIME rows at 0..9 s and 20..39 s (nothing in [10, 20): an empty window)
    watermark 45 ─▶ fixed windows [0,10) [20,30) [30,40) and sessions fire
    LATE rows at 3, 4, 23, 24, 25 s (their windows have fired)
    processing time + 20 s
    rows at 50..59 s ─▶ watermark to infinity: the last windows fire, the stream ends

The copies: fixed windows without allowed lateness (late rows dropped, as Beam drops them),
fixed windows with late firings (each late pane one more unit), sliding windows (every row in
two units), session windows, the global
window with ``triggering_frequency``, and fixed windows with late firings into Iceberg. What
each unit must hold is computed here from the window arithmetic, not by Beam; every unit's
files are read back with pyarrow (and the whole prefix with DuckDB through httpfs; the table
with pyiceberg and DuckDB's ``iceberg_scan``), and each result is written once, under its unit's
id, so that a unit reported twice fails the pipeline.
"""

from __future__ import annotations

import collections
import os
import pickle
from typing import Any, Dict, List, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_stream
from apache_beam.transforms import trigger, window

from beam_s3_sink import CopyToIceberg, CopyToS3
from beam_s3_sink.keys import CopyKeys, S3Location
from helpers import data_keys, list_objects, pending_uploads, read_manifest, read_parquet

SCHEMA = pa.schema([("id", pa.int64()), ("at_s", pa.int64())])
ON_TIME = [(i, i if i < 10 else i + 10) for i in range(30)]  # (id, seconds): 0..9, 20..39
LATE = [(100, 3), (101, 4), (102, 23), (103, 24), (104, 25)]
LAST = [(200 + i, 50 + i) for i in range(10)]
FIXED, GAP, LATENESS = 10, 5, 100
SIZE, PERIOD = 10, 5  # SlidingWindows: every row in two windows
STREAM_RUNNERS = ("direct", "prism")


def events() -> test_stream.TestStream:
    def rows(pairs):
        return [window.TimestampedValue({"id": i, "at_s": t}, t) for i, t in pairs]

    return (
        test_stream.TestStream()
        .advance_watermark_to(0)
        .add_elements(rows(ON_TIME))
        .advance_watermark_to(45)
        .add_elements(rows(LATE))
        .advance_processing_time(20)
        .add_elements(rows(LAST))
        .advance_watermark_to_infinity()
    )


def fixed(late: bool) -> beam.WindowInto:
    return beam.WindowInto(
        window.FixedWindows(FIXED),
        trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)) if late else trigger.AfterWatermark(),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
        allowed_lateness=LATENESS if late else 0,
    )


def fixed_window_of(t: int) -> Tuple[int, int]:
    return (t - t % FIXED, t - t % FIXED + FIXED)


def sessions_of(pairs) -> Dict[Tuple[int, int], List[int]]:
    """Sessions of gap GAP over the (id, t) pairs, merged as Beam merges them: window -> ids."""
    merged: List[Tuple[int, int, List[int]]] = []
    for i, t in sorted(pairs, key=lambda p: p[1]):
        if merged and t < merged[-1][1]:
            start, end, ids = merged[-1]
            merged[-1] = (start, max(end, t + GAP), ids + [i])
        else:
            merged.append((t, t + GAP, [i]))
    return {(start, end): ids for start, end, ids in merged}


def expected_units(name: str) -> Dict[Tuple[Any, Any, str], List[int]]:
    """(window start, end in seconds, timing) -> ids, for each unit the copy ``name`` commits;
    late panes of one window are gathered under one LATE key."""
    units: Dict[Tuple[Any, Any, str], List[int]] = collections.defaultdict(list)
    if name == "sessions":
        for (start, end), ids in sessions_of(ON_TIME + LAST).items():
            units[(start, end, "ON_TIME")] = ids
        return dict(units)
    if name == "sliding":
        for i, t in ON_TIME + LAST:
            for start in (t - t % PERIOD - PERIOD, t - t % PERIOD):
                units[(start, start + SIZE, "ON_TIME")].append(i)
        return dict(units)
    for i, t in ON_TIME + LAST:
        units[(*fixed_window_of(t), "ON_TIME")].append(i)
    if name in ("late", "table"):
        for i, t in LATE:
            units[(*fixed_window_of(t), "LATE")].append(i)
    return dict(units)


def stream_args(name: str, request) -> List[str]:
    from conftest import runner_args

    if name == "direct":  # Beam's DirectRunner runs TestStream in streaming mode (BundleBasedDirectRunner)
        return ["--runner=DirectRunner", "--streaming"]
    return runner_args(name, request) + ["--streaming"]


def keep_result(result, out_dir: str) -> None:
    """One file per unit, made exclusively: a unit reported twice fails the pipeline."""
    name = result.unit.id if result.unit is not None else "no-unit"
    with open(os.path.join(out_dir, f"{name}.pickle"), "xb") as f:
        pickle.dump(result, f)


def load_results(out_dir: str) -> list:
    results = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name), "rb") as f:
            results.append(pickle.load(f))
    return results


@pytest.fixture(params=STREAM_RUNNERS)
def stream_runner(request) -> Tuple[str, List[str]]:
    return request.param, stream_args(request.param, request)


def test_stream_commits_each_unit_exactly_once(stream_runner, s3_config, s3_client, bucket, tmp_path, iceberg_sqlite):
    runner, args = stream_runner
    global_window = True  # triggering_frequency: event-time intervals, on every runner
    copies = ("fixed", "late", "sliding", "sessions", "table") + (("global",) if global_window else ())
    outs = {name: tmp_path / name for name in copies}
    for out in outs.values():
        out.mkdir()
    catalog = dict(iceberg_sqlite.props, name=iceberg_sqlite.name)
    table = f"streams.t{bucket.replace('-', '_')}"
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        rows = p | "Events" >> events()
        windowed = {
            "fixed": rows | "Fixed" >> fixed(late=False),
            "late": rows | "Late" >> fixed(late=True),
            "sliding": rows | "Sliding" >> beam.WindowInto(window.SlidingWindows(SIZE, PERIOD)),
            "sessions": rows
            | "Sessions"
            >> beam.WindowInto(window.Sessions(GAP), accumulation_mode=trigger.AccumulationMode.DISCARDING),
        }
        for name, pcoll in windowed.items():
            result = pcoll | f"Copy {name}" >> CopyToS3(
                f"s3://{bucket}/{name}", schema=SCHEMA, s3=s3_config, sink_id=name
            )
            result | f"Keep {name}" >> beam.Map(keep_result, str(outs[name]))
        if global_window:
            result = rows | "Copy global" >> CopyToS3(
                f"s3://{bucket}/global", schema=SCHEMA, s3=s3_config, sink_id="global", triggering_frequency=10
            )
            result | "Keep global" >> beam.Map(keep_result, str(outs["global"]))
        result = (
            rows
            | "Table window" >> fixed(late=True)
            | "Copy table" >> CopyToIceberg(table, catalog=catalog, schema=SCHEMA, sink_id="table")
        )
        result | "Keep table" >> beam.Map(keep_result, str(outs["table"]))

    for name in ("fixed", "late", "sliding", "sessions"):
        check_units(s3_client, s3_config, bucket, name, load_results(str(outs[name])))
    if global_window:
        check_global(s3_client, bucket, load_results(str(outs["global"])))
    check_table(iceberg_sqlite, table, load_results(str(outs["table"])))
    assert pending_uploads(s3_client, bucket) == []


def ids_of(tables) -> List[int]:
    return sorted(i for t in tables for i in t.column("id").to_pylist())


def check_units(client, s3, bucket: str, name: str, results: list, expected=None) -> None:
    """Each unit the window math expects (``expected``: (start, end, timing) -> ids; by default
    :func:`expected_units`), and no other, committed once: its result, its manifest naming
    exactly its files, its files holding exactly its rows."""
    keys = CopyKeys(S3Location(bucket, name), name)
    objects = list_objects(client, bucket, name + "/")
    assert all(r.ok for r in results), [r.error for r in results]
    got: Dict[Tuple[Any, Any, str], List[int]] = collections.defaultdict(list)
    for r in results:
        unit = r.unit
        assert keys.unit_manifest(unit.id) in objects and keys.unit_commit(unit.id) not in objects
        manifest = read_manifest(client, bucket, keys.unit_manifest(unit.id))
        assert manifest["unit"]["id"] == unit.id and manifest["rows"] == r.rows
        assert sorted(e["url"] for e in manifest["entries"]) == sorted(f.uri for f in r.files)
        ids = ids_of(read_parquet(client, bucket, f.uri.split("/", 3)[3]) for f in r.files)
        assert len(ids) == r.rows
        start, end = int(unit.start.timestamp()), int(unit.end.timestamp())
        assert unit.timing in ("ON_TIME", "LATE") and (unit.pane == 0) == (unit.timing == "ON_TIME")
        got[(start, end, unit.timing)] += ids
    want = {k: sorted(v) for k, v in (expected_units(name) if expected is None else expected).items()}
    assert {k: sorted(v) for k, v in got.items()} == want
    # the stream ended: no sentinel, no claim, no commit record; every data file belongs to a unit
    assert keys.sentinel not in objects and keys.claim not in objects
    assert sorted(data_keys(client, bucket, name + "/")) == sorted(
        f.uri.split("/", 3)[3] for r in results for f in r.files
    )
    assert sorted(read_prefix_with_duckdb(s3, bucket, name)) == sorted(i for v in want.values() for i in v)


def check_global(client, bucket: str, results: list, want=None) -> None:
    """The global window with ``triggering_frequency``: one unit per event-time interval, each
    once, and every row once (``want``: the ids, by default the scripted stream's but the late
    rows, which an interval, like any window without allowed lateness, drops)."""
    assert results and all(r.ok and r.unit.start is not None and r.unit.pane == 0 for r in results)
    assert len({r.unit.id for r in results}) == len(results)
    ids = ids_of(read_parquet(client, bucket, f.uri.split("/", 3)[3]) for r in results for f in r.files)
    assert ids == sorted(want if want is not None else (i for i, _ in ON_TIME + LAST))


def check_table(catalog, table: str, results: list, want=None) -> None:
    """One snapshot per unit, named by sink id and unit; the table holds every unit's rows once
    (``want``: the ids, by default the scripted stream's)."""
    from iceberg_catalogs import load, read_duckdb, read_pyiceberg

    assert all(r.ok and r.snapshot_id is not None for r in results)
    loaded = load(catalog).load_table(table)
    summaries = {s.snapshot_id: s.summary for s in loaded.snapshots()}
    assert sorted(summaries) == sorted(r.snapshot_id for r in results)
    for r in results:
        summary = summaries[r.snapshot_id]
        assert summary["beam-s3-sink.sink-id"] == "table" and summary["beam-s3-sink.unit"] == r.unit.id
        assert int(summary["added-records"]) == r.rows
    want = sorted(i for ids in expected_units("table").values() for i in ids) if want is None else sorted(want)
    assert sorted(read_pyiceberg(catalog, table).column("id").to_pylist()) == want
    assert sorted(read_duckdb(catalog, table).column("id").to_pylist()) == want


def read_prefix_with_duckdb(s3, bucket: str, prefix: str) -> List[int]:
    """Every data file under the prefix, as a reader that globs it sees them (DuckDB, httpfs)."""
    from pipelines import duckdb_s3

    con = duckdb_s3.connect(s3.endpoint_url, s3.access_key_id, s3.secret_access_key, s3.region_name)
    try:
        return [
            r[0] for r in con.execute(f"SELECT id FROM read_parquet('s3://{bucket}/{prefix}/*.parquet')").fetchall()
        ]
    finally:
        con.close()
