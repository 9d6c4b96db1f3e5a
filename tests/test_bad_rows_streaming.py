"""Dead letters in a stream (``max_bad_rows``, per unit), with Beam's streaming test idioms:
a ``TestStream`` that puts good, bad and late rows in one window, and ``assert_that`` on the
dead-letter output, on the runners that run ``TestStream`` (the DirectRunner in streaming mode,
and Prism).

    watermark 0 ─▶ window [0,10): 8 good rows, 2 bad (a string id, a NUL the CSV cannot hold)
                   window [10,20): 5 good rows
                   window [20,30): 3 bad rows, 1 good (more than max_bad_rows=2: the unit fails)
    watermark 35 ─▶ [0,10) [10,20) [20,30) fire
    LATE into [0,10): 1 good row, 1 bad row (allowed lateness: one more unit, or two)
    watermark to infinity

Each committed unit holds exactly its good rows; each dead letter names its column and its
unit; the unit with one bad row too many commits nothing and outputs no dead letter; a pane of
bad rows only commits nothing either (no result) but outputs its dead letters. The same rows go
into an Iceberg table (``CopyToIceberg``), where Parquet holds the NUL: only the string ids are
dead letters there, and every unit commits.

Then a 15 s ``PeriodicImpulse`` stream (test_streaming_runners.py's) on Prism and on Flink with
one bad row in every 50, in 5 s windows, ``max_bad_rows=10``: every unit lands exactly its
window's good rows, counts its bad ones (result and manifest), and each bad row is one dead
letter carrying its unit.
"""

from __future__ import annotations

import json
from typing import List, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from beam_s3_sink import CopyToIceberg, CopyToS3, CsvFormat
from helpers import pending_uploads, read_manifest
from test_streaming import keep_result, load_results, stream_args

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
GOOD = [(i, i % 10) for i in range(8)] + [(10 + i, 10 + i) for i in range(5)] + [(30, 21)]
BAD = [("x", 1, "id"), (9, 2, "name"), ("y", 22, "id"), ("z", 23, "id"), (33, 24, "name")]
LATE_GOOD, LATE_BAD = (40, 5), ("late", 6, "id")
NUL = "nul\x00"


def _row(i, t, bad_column=None):
    return window.TimestampedValue({"id": i, "name": NUL if bad_column == "name" else f"n{i}"}, t)


def events() -> test_stream.TestStream:
    return (
        test_stream.TestStream()
        .advance_watermark_to(0)
        .add_elements([_row(i, t) for i, t in GOOD] + [_row(i, t, c) for i, t, c in BAD])
        .advance_watermark_to(35)
        .add_elements([_row(*LATE_GOOD), _row(*LATE_BAD)])
        .advance_watermark_to_infinity()
    )


def window_of(unit_id: str) -> str:
    """``19700101T000000Z-19700101T000010Z`` of a unit id (its pane left out)."""
    return unit_id.rsplit("-p", 1)[0]


W0, W2 = "19700101T000000Z-19700101T000010Z", "19700101T000020Z-19700101T000030Z"


@pytest.fixture(params=("direct", "prism"))
def stream_runner(request) -> Tuple[str, List[str]]:
    return request.param, stream_args(request.param, request)


def test_dead_letters_of_a_stream_carry_their_unit(
    stream_runner, s3_config, s3_client, bucket, tmp_path, iceberg_sqlite
):
    _, args = stream_runner
    out, table_out = tmp_path / "results", tmp_path / "table"
    out.mkdir()
    table_out.mkdir()
    catalog = dict(iceberg_sqlite.props, name=iceberg_sqlite.name)
    table = f"badstreams.t{bucket.replace('-', '_')}"
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        rows = (
            p
            | "Events" >> events()
            | "Fixed"
            >> beam.WindowInto(
                window.FixedWindows(10),
                trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
                allowed_lateness=100,
            )
        )
        copy = CopyToS3(
            f"s3://{bucket}/dl",
            format=CsvFormat(),
            schema=SCHEMA,
            s3=s3_config,
            sink_id="dl",
            max_bad_rows=2,
            fail_on_error=False,
        )
        outputs = rows | "Copy" >> copy.with_bad_rows()
        _ = outputs.results | "Keep" >> beam.Map(keep_result, str(out))
        letters = outputs.bad_rows | "Letters" >> beam.Map(
            lambda b: (json.loads(b.element)["id"], b.column, window_of(b.unit), b.sink_id)
        )
        expected = [("x", "id", W0, "dl"), (9, "name", W0, "dl"), ("late", "id", W0, "dl")]
        assert_that(letters, equal_to(expected))
        # Into a table (Parquet holds a NUL): only the string ids are bad, 2 in [20,30) is within the limit.
        into_table = CopyToIceberg(table, catalog=catalog, schema=SCHEMA, sink_id="dlt", max_bad_rows=2)
        table_outputs = rows | "CopyTable" >> into_table.with_bad_rows()
        _ = table_outputs.results | "KeepTable" >> beam.Map(keep_result, str(table_out))
        table_letters = table_outputs.bad_rows | "TableLetters" >> beam.Map(
            lambda b: (json.loads(b.element)["id"], b.column, window_of(b.unit), b.sink_id)
        )
        expected = [("x", "id", W0, "dlt"), ("y", "id", W2, "dlt"), ("z", "id", W2, "dlt"), ("late", "id", W0, "dlt")]
        assert_that(table_letters, equal_to(expected), label="TableDeadLetters")

    results = load_results(str(out))
    failed = [r for r in results if not r.ok]
    assert [window_of(r.unit.id) for r in failed] == [W2]
    assert "more than max_bad_rows=2 allows" in failed[0].error
    committed = {r.unit.id: r for r in results if r.ok}
    on_time = committed[f"{W0}-p0"]
    assert (on_time.rows, on_time.bad_rows) == (8, 2)
    assert sum(r.rows for r in committed.values()) == 8 + 5 + 1  # [0,10) and its late row, [10,20)
    # The late rows make one pane, or two (as the runner bundles them): a pane of bad rows
    # only commits nothing and reports no result, but outputs its dead letter (asserted above).
    assert sum(r.bad_rows for r in committed.values()) in (2, 3)
    for unit_id, result in committed.items():
        manifest = read_manifest(s3_client, bucket, f"dl/_dl-{unit_id}.manifest.json")
        assert manifest["bad_rows"] == result.bad_rows and manifest["rows"] == result.rows
    assert pending_uploads(s3_client, bucket) == []

    from iceberg_catalogs import read_pyiceberg

    table_results = load_results(str(table_out))
    assert all(r.ok for r in table_results), [r.error for r in table_results]
    good = sorted([i for i, _ in GOOD] + [i for i, _, c in BAD if c == "name"] + [LATE_GOOD[0]])
    assert sorted(read_pyiceberg(iceberg_sqlite, table).column("id").to_pylist()) == good
    assert sum(r.bad_rows for r in table_results) in (3, 4)  # the late bad row: its own pane, or not


# A PeriodicImpulse stream on Prism and Flink, with bad rows in every window ------------------------
BAD_EVERY = 50  # id i % 50 == 7 is a bad row (a string id): 5 in each 5 s window of 250 rows


class ToRowWithBad(beam.DoFn):
    """test_streaming_runners.ToRow, with every ``BAD_EVERY``-th row made bad (its id a string)."""

    def __init__(self, impulse) -> None:
        from test_streaming_runners import ToRow

        self._to_row = ToRow(impulse)

    def process(self, t, at=beam.DoFn.TimestampParam):
        for row in self._to_row.process(t, at):
            if row["id"] % BAD_EVERY == 7:
                row = {"id": f"bad-{row['id']}", "at_us": row["at_us"]}
            yield row


def keep_letter(letter, out_dir: str) -> None:
    import os
    import pickle
    import uuid

    with open(os.path.join(out_dir, uuid.uuid4().hex + ".pickle"), "xb") as f:
        pickle.dump(letter, f)


@pytest.mark.parametrize("runner_name", ["prism", "flink"])
def test_a_periodic_stream_with_bad_rows_lands_each_units_good_rows(
    runner_name, request, s3_config, s3_client, bucket, tmp_path
):
    from conftest import runner_args
    from test_streaming_runners import (
        PRISM_QUIET_S,
        WINDOW_S,
        Impulse,
        flink_streaming,
        one_per_unit,
        run_stream,
    )
    from test_streaming_runners import (
        SCHEMA as IMPULSE_SCHEMA,
    )

    source_s = 15
    if runner_name == "prism":
        args, server = runner_args("prism", request) + ["--streaming"], None
    else:
        args = runner_args("flink", request) + flink_streaming(source_s)
        server = request.getfixturevalue("flink_job_server")
    impulse = Impulse.from_now(source_s, PRISM_QUIET_S if runner_name == "prism" else 0)
    results_dir, letters_dir = tmp_path / "results", tmp_path / "letters"
    results_dir.mkdir()
    letters_dir.mkdir()

    def build(p):
        rows = p | "Impulse" >> impulse.source() | "Rows" >> beam.ParDo(ToRowWithBad(impulse))
        windowed = rows | "Fixed" >> beam.WindowInto(window.FixedWindows(WINDOW_S))
        copy = CopyToS3(f"s3://{bucket}/dl", schema=IMPULSE_SCHEMA, s3=s3_config, sink_id="dl", max_bad_rows=10)
        outputs = windowed | "Copy" >> copy.with_bad_rows()
        _ = outputs.results | "Keep" >> beam.Map(keep_result, str(results_dir))
        _ = outputs.bad_rows | "KeepLetters" >> beam.Map(keep_letter, str(letters_dir))

    run_stream(args, build, 240, server, restarts_fail=runner_name == "flink")

    results, again = one_per_unit(load_results(str(results_dir)))
    assert again == 0 and all(r.ok for r in results), [r.error for r in results]
    units = impulse.unit_ids()  # unit id -> the ids in its window
    bad = {u: [i for i in ids if i % BAD_EVERY == 7] for u, ids in units.items()}
    by_unit = {r.unit.id: r for r in results}
    assert sorted(by_unit) == sorted(units)
    for unit_id, result in by_unit.items():
        good = [i for i in units[unit_id] if i % BAD_EVERY != 7]
        assert (result.rows, result.bad_rows) == (len(good), len(bad[unit_id])), unit_id
        manifest = read_manifest(s3_client, bucket, f"dl/_dl-{unit_id}.manifest.json")
        assert (manifest["rows"], manifest["bad_rows"]) == (len(good), len(bad[unit_id]))
    letters = load_results(str(letters_dir))
    got = sorted((b.unit, int(json.loads(b.element)["id"].split("-")[1])) for b in letters)
    assert got == sorted((u, i) for u, ids in bad.items() for i in ids)  # each once, with its unit
    assert {(b.column, b.sink_id) for b in letters} == {("id", "dl")}
    assert pending_uploads(s3_client, bucket) == []
