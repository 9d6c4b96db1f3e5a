"""bad_rows: the dead-letter record and its schema, the limit (a count, a percentage), the
bisection, and whole copies with ``max_bad_rows`` on the FnApiRunner against the fake (both
upload graphs): the good rows copied once, the bad ones out, counted, and the limit enforced
on the copy's total."""

from __future__ import annotations

import datetime
import decimal
import json

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_s3_sink import BadRow, CopyToS3, CopyToS3Error, CsvFormat
from beam_s3_sink.bad_rows import BadRowLimit, TooManyBadRows, bisect, element_json
from beam_s3_sink.batches import Batcher, Batches, BatchesCoder, dead_letters_of, encode_dead_letters
from beam_s3_sink.completion import MergeReports
from beam_s3_sink.messages import UploadReport

from .beam_testing import collected, pipeline
from .fakes import serve

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


# the record -----------------------------------------------------------------------------------
def test_a_bad_row_has_a_beam_schema():
    from apache_beam.typehints.schemas import named_fields_from_element_type

    fields = dict(named_fields_from_element_type(BadRow))
    assert list(fields) == ["element", "column", "reason", "sink_id", "unit"]
    coder = beam.coders.registry.get_coder(BadRow)
    row = BadRow('{"id": "x"}', "id", "no", "s1", None)
    assert isinstance(coder, beam.coders.RowCoder) and coder.decode(coder.encode(row)) == row


def test_element_json_writes_values_without_a_json_form():
    element = {
        "b": b"\x00\xff",
        "ts": datetime.datetime(2026, 12, 7, 3, 0, tzinfo=datetime.timezone.utc),
        "d": decimal.Decimal("12345678901234567890.5"),
        "inf": float("inf"),
        "nested": [{"t": datetime.time(1, 2)}],
    }
    assert json.loads(element_json(element)) == {
        "b": "AP8=",
        "ts": "2026-12-07T03:00:00+00:00",
        "d": "12345678901234567890.5",
        "inf": "Infinity",
        "nested": [{"t": "01:02:00"}],
    }


# the limit ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "given, bad, seen, allowed",
    [(0, 0, 10, True), (0, 1, 10, False), (50, 50, 100, True), (50, 51, 10**6, False), ("7", 7, 8, True)],
)
def test_a_count_limit(given, bad, seen, allowed):
    assert BadRowLimit.parse(given).allows(bad, seen) is allowed


@pytest.mark.parametrize(
    "given, bad, seen, allowed",
    [("0.1%", 100, 100_000, True), ("0.1%", 101, 100_000, False), ("10 %", 1, 10, True), ("50%", 6, 10, False)],
)
def test_a_percentage_limit_is_of_the_rows_seen(given, bad, seen, allowed):
    assert BadRowLimit.parse(given).allows(bad, seen) is allowed


@pytest.mark.parametrize("given", [-1, "x", "101%", 1.5, True, "1e3"])
def test_a_limit_that_is_neither_a_count_nor_a_percentage_is_refused(given):
    with pytest.raises(ValueError, match="max_bad_rows"):
        BadRowLimit.parse(given)


def test_the_default_limit_lets_no_bad_row_through():
    assert not BadRowLimit.parse(0).enabled and BadRowLimit.parse("0.5%").enabled
    with pytest.raises(ValueError, match="max_bad_rows"):
        CopyToS3("s3://bucket/p", schema=SCHEMA, max_bad_rows="lots")


# the bisection --------------------------------------------------------------------------------
def _convert(xs):
    if any(x < 0 for x in xs):
        raise ValueError("negative")
    return list(xs)


@pytest.mark.parametrize("bad", [[], [0], [999], [0, 1, 2], [3, 500, 501, 998]])
def test_bisection_finds_every_bad_item_and_keeps_every_good_one_once(bad):
    items = [-1 if i in bad else i for i in range(1000)]
    calls = []

    def convert(xs):
        calls.append(len(xs))
        return _convert(xs)

    good, found = bisect(items, len(items), convert, lambda xs, a, b: xs[a:b], (ValueError,))
    assert [i for i, _ in found] == bad
    assert [x for run in good for x in run] == [i for i in range(1000) if i not in bad]
    assert sum(calls) <= 1000 + 2 * 1000 * max(1, len(bad))  # runs that convert are not split


def test_bisection_stops_past_its_bound():
    items = [-1] * 10
    with pytest.raises(TooManyBadRows) as caught:
        bisect(items, 10, _convert, lambda xs, a, b: xs[a:b], (ValueError,), max_bad=3)
    assert len(caught.value.bad) == 4


# Batch ---------------------------------------------------------------------------------------
def test_the_batcher_splits_a_batch_that_fails_and_keeps_its_good_rows():
    batcher = Batcher(SCHEMA, limit=BadRowLimit(10))
    rows = [{"id": i, "name": f"n{i}"} for i in range(100)]
    rows[17] = {"id": "x", "name": "bad"}
    rows[80] = {"id": 80, "name": "n80", "extra": 1}
    batches = [b for row in rows for b in batcher.add(row)] + batcher.flush()
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == [i for i in range(100) if i not in (17, 80)]
    bad = batcher.take_bad()
    assert [(json.loads(b.element), b.column) for b in bad] == [
        ({"id": "x", "name": "bad"}, "id"),
        ({"id": 80, "name": "n80", "extra": 1}, "extra"),
    ]
    assert "'x'" in bad[0].reason and "extra" in bad[1].reason


def test_the_batcher_finds_the_bad_value_of_an_arrow_batch():
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    batcher = Batcher(schema, limit=BadRowLimit(1))
    table = pa.table({"id": pa.array([1, None, 3], pa.int64()), "name": ["a", "b", "c"]})
    batches = batcher.add(table) + batcher.flush()
    assert [i for b in batches for i in b.column("id").to_pylist()] == [1, 3]  # the good runs, as they converted
    (bad,) = batcher.take_bad()
    assert json.loads(bad.element) == {"id": None, "name": "b"} and bad.column == "id"
    assert "NOT NULL" in bad.reason


def test_the_batcher_gives_up_past_a_count_limit_in_one_bundle():
    batcher = Batcher(SCHEMA, limit=BadRowLimit(2))
    for row in [{"id": "x"}] * 3:
        batcher.add(row)
    with pytest.raises(CopyToS3Error, match="more than max_bad_rows=2 bad rows in one bundle"):
        batcher.flush()


def test_dead_letters_travel_as_a_blob_and_in_batches():
    bad = [BadRow('{"id": "x"}', "id", "no", "", None)]
    assert dead_letters_of(encode_dead_letters(bad)) == tuple(bad)
    coder = BatchesCoder()
    assert coder.decode(coder.encode(Batches(bad=bad))).bad == tuple(bad)


def test_merged_reports_keep_every_dead_letter():
    a, b = BadRow("1", "id", "r", "", None), BadRow("2", None, "r", "", None)
    merge = MergeReports()
    accumulators = [
        merge.add_input(merge.create_accumulator(), UploadReport(rows=1, dead_letters=(x,))) for x in (a, b)
    ]
    report = merge.extract_output(merge.merge_accumulators(accumulators))
    assert report.rows == 2 and sorted(report.dead_letters) == [a, b]


# whole copies ---------------------------------------------------------------------------------
ROWS = [{"id": i, "name": f"n{i}"} for i in range(300)]
BAD = {7: {"id": "x", "name": "n7"}, 150: {"id": 150, "name": "nul\x00"}, 299: {"name": "n299", "id": 2**70}}


def _rows():
    return [BAD.get(i, row) for i, row in enumerate(ROWS)]


@pytest.fixture
def copy(fake_s3, monkeypatch):
    """``rows | CopyToS3(...).with_bad_rows()`` on the FnApiRunner; (results, dead letters)."""
    config = serve(fake_s3, monkeypatch)

    def run(rows, **kwargs):
        with pipeline() as p:
            outputs = p | beam.Create(rows) | CopyToS3("s3://bucket/exports", s3=config, **kwargs).with_bad_rows()
            results, bad = collected(outputs.results), collected(outputs.bad_rows)
            assert outputs.bad_rows.element_type is BadRow
        return results, bad

    return run


def _csv_ids(fake_s3, result):
    lines = [line for f in result.files for line in fake_s3.body(f.uri[len("s3://bucket/") :]).decode().splitlines()]
    return sorted(int(line.split(",")[0]) for line in lines)


@pytest.mark.parametrize("graph", [dict(upload_graph="per_bundle"), dict(upload_graph="grouped"), dict(num_batches=3)])
def test_bad_rows_within_the_limit_are_left_out_and_output(fake_s3, copy, graph):
    (result,), bad = copy(_rows(), format=CsvFormat(), schema=SCHEMA, sink_id="s1", max_bad_rows=3, **graph)
    assert result.ok and result.rows == 297 and result.bad_rows == 3
    assert _csv_ids(fake_s3, result) == [i for i in range(300) if i not in BAD]
    assert sorted((b.column, b.sink_id, b.unit) for b in bad) == [
        ("id", "s1", None),
        ("id", "s1", None),
        ("name", "s1", None),
    ]
    assert sorted(json.loads(b.element)["name"] for b in bad) == ["n299", "n7", "nul\x00"]
    (nul,) = [b for b in bad if b.column == "name"]
    assert "cannot encode column 'name'" in nul.reason
    assert json.loads(fake_s3.body("exports/_s1-manifest.json"))["bad_rows"] == 3
    assert fake_s3.uploads == {}


@pytest.mark.parametrize("graph", [dict(upload_graph="per_bundle"), dict(upload_graph="grouped")])
def test_one_bad_row_more_fails_the_copy_and_leaves_nothing(fake_s3, copy, graph):
    (result,), bad = copy(
        _rows(), format="csv", schema=SCHEMA, sink_id="s1", max_bad_rows=2, fail_on_error=False, **graph
    )
    assert not result.ok and "more than max_bad_rows=2" in result.error and bad == []
    assert fake_s3.keys() == ["exports/_s1-INCOMPLETE"] and fake_s3.uploads == {}


def test_a_percentage_limit_is_enforced_on_the_copys_total(fake_s3, copy):
    (ok,), _ = copy(_rows(), format="csv", schema=SCHEMA, sink_id="s1", max_bad_rows="1%")  # 3 of 300
    assert ok.ok and ok.bad_rows == 3
    fake_s3.objects.clear()
    (failed,), bad = copy(_rows(), format="csv", schema=SCHEMA, sink_id="s2", max_bad_rows="0.9%", fail_on_error=False)
    assert not failed.ok and "more than max_bad_rows=0.9% allows (of 300 rows)" in failed.error and bad == []


def test_plain_copies_keep_their_output_and_count_the_bad_rows(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)
    with pipeline() as p:
        results = collected(
            p | beam.Create(_rows()) | CopyToS3("s3://bucket/e", s3=config, format="csv", schema=SCHEMA, max_bad_rows=5)
        )
    (result,) = results
    assert result.rows == 297 and result.bad_rows == 3


def test_assert_that_on_the_dead_letters(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)
    with pipeline() as p:
        rows = p | beam.Create([{"id": 1, "name": "a"}, {"id": "two", "name": "b"}])
        outputs = (
            rows | CopyToS3("s3://bucket/e", s3=config, schema=SCHEMA, sink_id="s1", max_bad_rows=1).with_bad_rows()
        )
        assert_that(
            outputs.bad_rows | beam.Map(lambda b: (json.loads(b.element), b.column, b.sink_id)),
            equal_to([({"id": "two", "name": "b"}, "id", "s1")]),
        )
        assert_that(outputs.results | beam.Map(lambda r: (r.rows, r.bad_rows)), equal_to([(1, 1)]), label="Results")


@pytest.mark.parametrize("graph", ["per_bundle", "grouped"])
def test_a_value_parquet_cannot_hold_becomes_a_dead_letter(fake_s3, copy, graph):
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns"))])  # written as microseconds
    batch = pa.record_batch({"id": [1, 2, 3], "ts": pa.array([1000, 2001, 3000], pa.timestamp("ns"))}, schema=schema)
    (result,), (bad,) = copy([batch], schema=schema, sink_id="s1", max_bad_rows=1, upload_graph=graph)
    assert result.ok and (result.rows, result.bad_rows) == (2, 1)
    assert bad.column == "ts" and json.loads(bad.element)["id"] == 2 and "cannot encode column 'ts'" in bad.reason


def test_parquet_checks_only_the_columns_it_converts():
    from beam_s3_sink import ParquetFormat

    ParquetFormat().check_values(pa.record_batch({"id": [1]}))
    with pytest.raises(ValueError, match="'ts'"):
        ParquetFormat().check_values(pa.record_batch({"ts": pa.array([1], pa.timestamp("ns"))}))
