"""Windowed and unbounded input (DESIGN.md, "Windows and streams"), and the two upload graphs.

- A bounded PCollection in any windowing is one copy: elements with their own timestamps,
  windowed into fixed, sliding and session windows, are copied into three prefixes by one
  pipeline per runner (plus a fourth copy whose ``errors`` input, in fixed windows, aborts
  it). Every row records the window it was in, so the rows read back are compared as a
  multiset with what the window arithmetic (computed here, not by Beam) says: fixed and
  session windows hold each element once, sliding windows once per window it is in.
- An unbounded ``errors`` input is refused when the pipeline is built (an unbounded input is
  a streaming copy: tests/test_streaming.py).
- ``upload_graph()`` picks the graph by runner (seen in the built graph: ``Upload/Group``
  present or not), an override forces either, and both copy exactly.
- Beam's default runner: a plain ``beam.Pipeline()`` runs on ``SwitchingDirectRunner``, which
  hands the pipeline to Prism when it finds Prism's binary in its cache
  (``~/.apache_beam/cache/prism/bin``), except for session windows; both routes copy exactly.
"""

from __future__ import annotations

import collections
import json
import math
import os
import pickle
import subprocess
import sys
import zipfile
from typing import Any, Dict, List, Sequence

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from beam_s3_sink import CopyToS3, S3Config
from beam_s3_sink.errors import CopyToS3Error
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.transform import upload_graph
from helpers import _write_pickle, data_keys, list_objects, pending_uploads, read_manifest, read_parquet

SCHEMA = pa.schema(
    [("id", pa.int64()), ("at_us", pa.int64()), ("window_start_us", pa.int64()), ("window_end_us", pa.int64())]
)
N = 40
BASE = 1_700_000_000  # seconds since the epoch
FIXED = 10  # FixedWindows(10)
SIZE, PERIOD = 10, 4  # SlidingWindows(10, 4): 2 or 3 windows per element
GAP = 5  # Sessions(5)
WINDOWINGS = ("fixed", "sliding", "sessions")
ERROR = "upstream check failed: order 17 has no customer"
#: for pipelines that are only built: nothing connects to it
OFFLINE_S3 = S3Config(endpoint_url="http://127.0.0.1:9", region_name="us-east-1")


def event_time(i: int) -> int:
    """Element ``i``'s timestamp in whole seconds: distinct, out of order, over 200 s."""
    return BASE + (i * 37) % 200


def window_fn(name: str) -> window.WindowFn:
    return {
        "fixed": window.FixedWindows(FIXED),
        "sliding": window.SlidingWindows(SIZE, PERIOD),
        "sessions": window.Sessions(GAP),
    }[name]


def expected_rows(name: str) -> collections.Counter:
    """The rows a copy of the ``name``-windowed events holds, from the window arithmetic alone:
    ``(id, at, start, end)`` once per window the element is in (microseconds)."""
    rows: collections.Counter = collections.Counter()
    for i in range(N):
        t = event_time(i)
        if name == "fixed":
            starts = [t - t % FIXED]
            size = FIXED
        elif name == "sliding":  # every k with k*PERIOD <= t < k*PERIOD + SIZE, by brute force
            size = SIZE
            starts = [
                k * PERIOD for k in range(t // PERIOD - SIZE, t // PERIOD + 1) if k * PERIOD <= t < k * PERIOD + SIZE
            ]
        else:  # a session window before any GroupByKey merges it: [t, t + gap)
            starts, size = [t], GAP
        for start in starts:
            rows[(i, t * 10**6, start * 10**6, (start + size) * 10**6)] += 1
    return rows


def test_expected_rows_follow_the_window_math():
    fixed, sliding, sessions = (expected_rows(n) for n in WINDOWINGS)
    assert sum(fixed.values()) == sum(sessions.values()) == N and max(fixed.values()) == 1
    per_element = collections.Counter(row[0] for row in sliding)
    assert set(per_element.values()) == {2, 3}  # SIZE/PERIOD = 2.5 windows per element
    assert sum(per_element.values()) == sum(math.ceil((SIZE - (event_time(i) % PERIOD)) / PERIOD) for i in range(N))


def timestamped(i: int) -> window.TimestampedValue:
    return window.TimestampedValue(i, event_time(i))


def to_row(i: int, w=beam.DoFn.WindowParam, ts=beam.DoFn.TimestampParam) -> Dict[str, int]:
    return {"id": i, "at_us": ts.micros, "window_start_us": w.start.micros, "window_end_us": w.end.micros}


def windowed_rows(events: beam.PCollection, name: str) -> beam.PCollection:
    return (
        events
        | f"{name}/Window" >> beam.WindowInto(window_fn(name))
        | f"{name}/Row" >> beam.Map(to_row).with_output_types(Dict[str, int])
    )


def build_copies(
    p: beam.Pipeline,
    bucket: str,
    s3: S3Config,
    out_dir: str,
    windowings: Sequence[str] = WINDOWINGS,
    aborted: bool = False,
    **copy_kwargs: Any,
) -> None:
    """One copy per windowing into ``bucket/<name>`` (sink id ``<name>``), its one result kept
    in ``out_dir/<name>.pickle``; with ``aborted``, one more copy of the fixed-window rows whose
    ``errors`` input (in fixed windows too) holds an error."""
    events = p | "Ids" >> beam.Create(list(range(N))) | "Timestamp" >> beam.Map(timestamped)
    copies = [(name, windowed_rows(events, name), None) for name in windowings]
    if aborted:
        errors = (
            p
            | "Errors" >> beam.Create([ERROR])
            | "ErrorTime" >> beam.Map(lambda e: window.TimestampedValue(e, BASE + 3))
            | "ErrorWindow" >> beam.WindowInto(window.FixedWindows(FIXED))
        )
        rows = copies[0][1] if copies and copies[0][0] == "fixed" else windowed_rows(events, "fixed")
        copies.append(("aborted", rows, errors))
    for name, rows, errors in copies:
        open(os.path.join(out_dir, f"{name}.pickle"), "wb").close()
        kwargs = dict(copy_kwargs, errors=errors, fail_on_error=False) if errors is not None else copy_kwargs
        result = rows | f"{name}/Copy" >> CopyToS3(
            f"s3://{bucket}/{name}", schema=SCHEMA, s3=s3, sink_id=name, **kwargs
        )
        result | f"{name}/Keep" >> beam.Map(_write_pickle, os.path.join(out_dir, f"{name}.pickle"))


def load_result(out_dir: str, name: str):
    with open(os.path.join(out_dir, f"{name}.pickle"), "rb") as f:
        data = f.read()
    assert data, f"the {name} copy emitted no result"
    return pickle.loads(data)


def check_copy(client, bucket: str, name: str, result) -> List[str]:
    """The ``name`` copy committed exactly the rows the window math expects: one result with
    their count, a manifest naming exactly the data files, no sentinel. Returns the files."""
    assert result.ok, result.error
    keys = CopyKeys(S3Location(bucket, name), name)
    objects = list_objects(client, bucket, name + "/")
    assert keys.sentinel not in objects and keys.manifest in objects
    files = data_keys(client, bucket, name + "/")
    assert files and sorted(f.uri for f in result.files) == [f"s3://{bucket}/{k}" for k in files]
    tables = [read_parquet(client, bucket, key) for key in files]
    assert all(t.schema.equals(SCHEMA) for t in tables)
    got = collections.Counter(tuple(row.values()) for t in tables for row in t.to_pylist())
    want = expected_rows(name)
    assert got == want, f"{name}: missing {want - got}, extra {got - want}"
    assert result.rows == sum(want.values()) == sum(f.rows for f in result.files)
    assert read_manifest(client, bucket, keys.manifest)["rows"] == result.rows
    return files


def check_aborted(client, bucket: str, result) -> None:
    assert not result.ok and result.rows == 0 and ERROR in result.error
    assert list_objects(client, bucket, "aborted/") == {}


def has_group_step(pipeline: beam.Pipeline) -> bool:
    """Whether the built graph holds a copy's ``Upload/Group`` GroupByKey (the grouped graph)."""
    found = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node) -> None:
            if node.full_label.endswith("/Upload/Group"):
                found.append(node.full_label)

        def visit_transform(self, node) -> None:
            self.enter_composite_transform(node)

    pipeline.visit(Visitor())
    return bool(found)


# --- every runner: the three windowings and an aborted copy, in one pipeline --------------


def test_windowed_input_copies_exactly(runner, s3_config, s3_client, bucket, tmp_path):
    with beam.Pipeline(options=PipelineOptions(runner)) as p:
        build_copies(p, bucket, s3_config, str(tmp_path), aborted=True)
    for name in WINDOWINGS:
        check_copy(s3_client, bucket, name, load_result(str(tmp_path), name))
    check_aborted(s3_client, bucket, load_result(str(tmp_path), "aborted"))
    assert pending_uploads(s3_client, bucket) == []


# --- unbounded input --------------------------------------------------------------------------


def _test_stream(p: beam.Pipeline) -> beam.PCollection:
    from apache_beam.testing.test_stream import TestStream

    return p | "Ticks" >> TestStream().add_elements([1, 2, 3]).advance_watermark_to_infinity()


def test_unbounded_errors_input_is_refused_when_built():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    rows = p | "Rows" >> beam.Create([{"id": 1}]).with_output_types(Dict[str, int])
    errors = _test_stream(p)
    with pytest.raises(CopyToS3Error, match=r"the errors PCollection of 'Ticks' is unbounded"):
        _ = rows | CopyToS3("s3://bucket/stream", schema=pa.schema([("id", pa.int64())]), s3=OFFLINE_S3, errors=errors)


def test_bounded_input_in_a_streaming_pipeline_is_accepted_when_built():
    """``--streaming`` alone makes no stream: a bounded input is one copy, its output bounded."""
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = p | "Ids" >> beam.Create(list(range(N))) | "Timestamp" >> beam.Map(timestamped)
    result = windowed_rows(events, "sliding") | CopyToS3("s3://bucket/s", schema=SCHEMA, s3=OFFLINE_S3)
    assert result.is_bounded


# --- the two upload graphs --------------------------------------------------------------------

#: what DataflowRunner's option check wants when a pipeline is made (nothing is submitted)
DATAFLOW = ["--project=my-project", "--region=us-central1", "--temp_location=gs://my-bucket/tmp"]
GRAPH_CHOICES = [
    # id, pipeline arguments, CopyToS3 keyword arguments, graph
    ("default", [], {}, "per_bundle"),  # Beam's default runner: SwitchingDirectRunner
    ("DirectRunner", ["--runner=DirectRunner"], {}, "per_bundle"),
    ("SwitchingDirectRunner", ["--runner=SwitchingDirectRunner"], {}, "per_bundle"),
    ("FnApiRunner", ["--runner=FnApiRunner"], {}, "per_bundle"),
    ("FnApiRunner-multi", ["--runner=FnApiRunner", "--direct_running_mode=multi_processing"], {}, "per_bundle"),
    ("TestDirectRunner", ["--runner=TestDirectRunner"], {}, "per_bundle"),
    # the legacy in-process runner is not of the family upload_graph() names
    ("BundleBasedDirectRunner", ["--runner=BundleBasedDirectRunner"], {}, "grouped"),
    ("PortableRunner-embed", ["--runner=PortableRunner", "--job_endpoint=embed"], {}, "grouped"),
    ("PrismRunner", ["--runner=PrismRunner"], {}, "grouped"),
    ("FlinkRunner", ["--runner=FlinkRunner"], {}, "grouped"),
    ("SparkRunner", ["--runner=SparkRunner"], {}, "grouped"),
    ("DataflowRunner", ["--runner=DataflowRunner", *DATAFLOW], {}, "grouped"),
    ("FnApiRunner-forced-grouped", ["--runner=FnApiRunner"], {"upload_graph": "grouped"}, "grouped"),
    ("PrismRunner-forced-per_bundle", ["--runner=PrismRunner"], {"upload_graph": "per_bundle"}, "per_bundle"),
    ("FlinkRunner-auto", ["--runner=FlinkRunner"], {"upload_graph": "auto"}, "grouped"),
    ("default-num_batches", [], {"num_batches": 3}, "grouped"),
    # num_batches is always grouped (by shard), whatever upload_graph says
    ("default-num_batches-per_bundle", [], {"num_batches": 3, "upload_graph": "per_bundle"}, "grouped"),
]


@pytest.mark.parametrize("args,kwargs,graph", [pytest.param(*c[1:], id=c[0]) for c in GRAPH_CHOICES])
def test_upload_graph_is_chosen_by_runner(args, kwargs, graph):
    p = beam.Pipeline(options=PipelineOptions(args))
    assert upload_graph(p, kwargs.get("upload_graph", "auto"), kwargs.get("num_batches")) == graph
    events = p | "Ids" >> beam.Create(list(range(N))) | "Timestamp" >> beam.Map(timestamped)
    _ = windowed_rows(events, "sliding") | CopyToS3("s3://bucket/g", schema=SCHEMA, s3=OFFLINE_S3, **kwargs)
    assert has_group_step(p) == (graph == "grouped")


@pytest.mark.parametrize(
    "runner,graph",
    [
        pytest.param("direct", "grouped", id="direct-grouped"),
        pytest.param("prism", "per_bundle", id="prism-per_bundle"),
    ],
    indirect=["runner"],
)
def test_forced_upload_graph_copies_exactly(runner, graph, s3_config, s3_client, bucket, tmp_path):
    with beam.Pipeline(options=PipelineOptions(runner)) as p:
        build_copies(p, bucket, s3_config, str(tmp_path), windowings=("sliding",), upload_graph=graph)
    assert has_group_step(p) == (graph == "grouped")
    check_copy(s3_client, bucket, "sliding", load_result(str(tmp_path), "sliding"))
    assert pending_uploads(s3_client, bucket) == []


# --- Beam's default runner: SwitchingDirectRunner and Prism -----------------------------------
#
# apache_beam/runners/direct/direct_runner.py (2.77): a plain beam.Pipeline() runs on
# SwitchingDirectRunner, which first offers the pipeline to PrismRunner unless a visitor finds
# something Prism is not trusted with (TestStream, a WindowInto with Sessions, unsafe triggers,
# interactive use, --update_compatibility_version, external transforms, exception-handling
# DoFns, ...); if Prism fails to start or the job ends in a failed state at once, it falls back
# (FnApiRunner, or BundleBasedDirectRunner). PrismRunner (portability/prism_runner.py) uses
# --prism_location when given; else it looks for the release zip of the SDK's version in
# PrismJobServer.BIN_CACHE = ~/.apache_beam/cache/prism/bin (expanded when Beam is imported),
# downloads it from GitHub when it is not there, unzips the binary next to it and starts it
# with --job_port P, and runs the job there with LOOPBACK SDK workers.


def prism_release_name() -> str:
    """The basename of the release zip PrismRunner wants (without ``.zip``, the binary's name)."""
    import platform

    from apache_beam.version import __version__

    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]
    return f"apache_beam-v{__version__}-prism-{platform.system().lower()}-{arch}"


def _default_route_main(spec_path: str) -> None:
    """Run in a subprocess (HOME is a temporary directory): the windowed copies on a plain
    ``beam.Pipeline()``, first fixed + sliding windows (Prism's), then session windows (not
    Prism's); writes what each run showed (its result's class, its log, its graph) as JSON."""
    import logging

    with open(spec_path) as f:
        spec = json.load(f)
    s3 = S3Config(**spec["s3"])
    records: List[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(f"{record.name}: {record.getMessage()}")

    root = logging.getLogger()  # (Beam's imports have configured it already, at WARNING)
    root.setLevel(logging.INFO)
    root.addHandler(Collect())
    runs = {}
    for run, windowings in (("prism", ("fixed", "sliding")), ("sessions", ("sessions",))):
        del records[:]
        with beam.Pipeline() as p:
            build_copies(p, spec["bucket"], s3, spec["out"], windowings=windowings)
        runs[run] = {
            "runner": type(p.runner).__name__,
            "result": f"{type(p.result).__module__}.{type(p.result).__name__}",
            "grouped": has_group_step(p),
            "log": list(records),
        }
    with open(os.path.join(spec["out"], "runs.json"), "w") as f:
        json.dump(runs, f)


def test_default_runner_hands_windowed_copies_to_prism(s3_config, s3_client, bucket, tmp_path):
    from apache_beam.runners.portability.prism_runner import PrismJobServer

    import jobservers

    prism = os.path.join(jobservers.cache_dir(), "prism", "prism")
    assert os.path.exists(prism), f"{prism} is missing: run scripts/fetch-runners.sh"
    home = tmp_path / "home"
    bin_cache = home / ".apache_beam" / "cache" / "prism" / "bin"
    name = prism_release_name()
    # where Beam looks: BIN_CACHE under the home, and the zip its download URL names
    assert PrismJobServer.BIN_CACHE == os.path.expanduser("~/.apache_beam/cache/prism/bin")
    assert PrismJobServer(PipelineOptions([])).path_to_binary().endswith(f"/{name}.zip")  # a GitHub URL
    bin_cache.mkdir(parents=True)
    with zipfile.ZipFile(bin_cache / f"{name}.zip", "w", zipfile.ZIP_STORED) as z:
        z.write(prism, arcname=name)  # the release zip's layout: the binary, named as the zip
    real_cache = os.path.expanduser("~/.apache_beam")
    before = sorted(os.walk(real_cache)) if os.path.exists(real_cache) else None

    out = tmp_path / "out"
    out.mkdir()
    spec = out / "spec.json"
    config = {
        "endpoint_url": s3_config.endpoint_url,
        "region_name": s3_config.region_name,
        "access_key_id": s3_config.access_key_id,
        "secret_access_key": s3_config.secret_access_key,
        "path_style": True,
    }
    spec.write_text(json.dumps({"s3": config, "bucket": bucket, "out": str(out)}))
    process = subprocess.Popen(
        [sys.executable, "-c", f"import test_windows; test_windows._default_route_main({str(spec)!r})"],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env={**os.environ, "HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        try:  # whatever it left running (a Prism it started) goes with its session
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-5000:]
    runs = json.loads((out / "runs.json").read_text())

    # fixed + sliding windows: Prism ran them, from the binary placed in the temporary home
    binary = str(bin_cache / name)
    on_prism = runs["prism"]
    log = "\n".join(on_prism["log"])
    assert on_prism["runner"] == "SwitchingDirectRunner"
    assert "Running pipeline with PrismRunner." in log and "Falling back" not in log
    assert f"Using cached prism binary/zip from {bin_cache / name}.zip" in log
    assert f"Prism binary path resolved to: {binary}" in log
    # Beam 2.77+ logs "... with cmd: ('<binary>', '--job_port', ...", older "Starting service with ('<binary>' '--job_port' ..."
    assert f"with cmd: ('{binary}', '--job_port'" in log or f"Starting service with ('{binary}' '--job_port'" in log
    assert "PrismRunner: Serving JobManagement" in log and "PrismRunner: pipeline done!" in log  # Prism's own
    assert on_prism["result"] == "apache_beam.runners.portability.portable_runner.PipelineResult"
    assert os.path.getsize(binary) == os.path.getsize(prism)
    assert not on_prism["grouped"], "upload_graph() sees SwitchingDirectRunner: per_bundle"
    files = {name: check_copy(s3_client, bucket, name, load_result(str(out), name)) for name in ("fixed", "sliding")}

    # session windows: not offered to Prism; the FnApiRunner ran them
    in_process = runs["sessions"]
    log = "\n".join(in_process["log"])
    assert "Running pipeline with PrismRunner." not in log and "prism binary" not in log
    assert in_process["result"] == "apache_beam.runners.portability.fn_api_runner.fn_runner.RunnerResult"
    assert not in_process["grouped"]
    files["sessions"] = check_copy(s3_client, bucket, "sessions", load_result(str(out), "sessions"))
    # per_bundle on both: Prism hands the Write stage all of a copy's rows in one bundle (at
    # this size), the FnApiRunner runs whole-input bundles: one file per copy
    assert {k: len(v) for k, v in files.items()} == {"fixed": 1, "sliding": 1, "sessions": 1}
    assert pending_uploads(s3_client, bucket) == []
    after = sorted(os.walk(real_cache)) if os.path.exists(real_cache) else None
    assert after == before, "the real ~/.apache_beam was not touched"
