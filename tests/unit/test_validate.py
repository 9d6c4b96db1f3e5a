"""validate (dry run): reports, their merge, and the check of rows and Arrow batches."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.util import assert_that, equal_to

from beam_s3_sink.config import S3Config
from beam_s3_sink.formats import CsvFormat, ParquetFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.validate import MAX_SHOWN, ValidationReport, _result, merge_validation, validate_rows
from beam_s3_sink.validate import _ValidateFn as ValidateFn
from beam_s3_sink.writer import WriteSettings

from .beam_testing import collected, pipeline

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])
KEYS = CopyKeys(S3Location("b", "p"), "s1")


def test_merge_sums_and_keeps_the_first_few_sorted():
    a = ValidationReport(5, 2, ("b", "d"))
    b = ValidationReport(3, MAX_SHOWN, tuple(f"c{i:02d}" for i in range(MAX_SHOWN)))
    merged = a.merge(b)
    assert (merged.rows, merged.invalid_rows) == (8, 2 + MAX_SHOWN)
    assert merged.invalid == tuple(sorted(a.invalid + b.invalid))[:MAX_SHOWN]
    assert merge_validation([a, b]) == merged and merge_validation([b, a]) == merged
    assert merge_validation([]) == ValidationReport()


def check(rows, fmt=CsvFormat(), layout=Layout()):
    with pipeline() as p:
        reports = collected(
            p
            | beam.Create(rows, reshuffle=False)
            | beam.ParDo(ValidateFn(WriteSettings(KEYS, S3Config(), fmt, SCHEMA, 2**30, layout)))
            | beam.CombineGlobally(merge_validation)
        )
    (report,) = reports
    return report


def test_bad_rows_are_counted_and_named_with_their_position():
    rows = [{"id": 1, "day": "a"}, {"id": "x", "day": "a"}, {"id": 3, "day": "nul\x00"}, 7]
    report = check(rows)
    assert (report.rows, report.invalid_rows) == (4, 3)
    text = " | ".join(report.invalid)
    assert "row 1: " in text and "column 'id' expects int64" in text and "NUL" in text and "row 3: " in text


def test_partition_values_are_checked():
    report = check(
        [{"id": 1, "day": None}, {"id": 2, "day": 5}], fmt=ParquetFormat(), layout=Layout(partition_by=("day",))
    )
    assert (report.rows, report.invalid_rows) == (2, 1)  # NULL is the default partition; 5 is no string
    # rows are converted to the schema before they are partitioned: the column's type names it
    assert "row 1: RowError: column 'day' expects string, but a row holds 5" in report.invalid[0]


def test_arrow_batches_are_checked_whole_then_row_by_row():
    good = pa.record_batch({"id": [1, 2], "day": ["a", "b"]})
    bad = pa.record_batch({"id": [1, 2], "day": ["a", "b\x00"]})
    report = check([good, bad])
    assert (report.rows, report.invalid_rows) == (4, 1)


def test_the_result_of_a_dry_run():
    result = _result(ValidationReport(10, 1, ("bundle x, row 3: bad",)), KEYS, KEYS.location.uri)
    assert (result.dry_run, result.rows, result.ok, result.invalid_rows) == (True, 10, False, 1)
    assert result.error == "dry run: 1 of 10 row(s) would fail the copy; the first: bundle x, row 3: bad"
    assert (result.uri, result.sink_id, result.invalid) == ("s3://b/p", "s1", ("bundle x, row 3: bad",))
    clean = _result(ValidationReport(10, 0, ()), KEYS, KEYS.location.uri)
    assert clean.ok and clean.dry_run and clean.error is None and clean.rows == 10


def test_validate_rows_in_a_pipeline_gives_one_result():
    settings = WriteSettings(KEYS, S3Config(), CsvFormat(), SCHEMA, 2**30)
    with pipeline() as p:
        out = (
            p
            | beam.Create([{"id": 1, "day": "a"}, {"id": "x", "day": "a"}])
            | validate_rows(settings)
            | beam.Map(lambda r: (r.dry_run, r.rows, r.invalid_rows, r.ok))
        )
        assert_that(out, equal_to([(True, 2, 1, False)]))


def test_a_tables_partitions_are_checked_by_its_transforms():
    from beam_s3_sink.iceberg_commit import iceberg_schema
    from beam_s3_sink.table_layout import TableLayout

    layout = TableLayout.of(*reversed(iceberg_schema(SCHEMA, ["bucket(4, id)", "truncate(2, day)"])))
    report = check(
        [{"id": i, "day": ["", None, "abc"][i % 3]} for i in range(9)] + [{"id": "x"}], ParquetFormat(), layout
    )
    assert (report.rows, report.invalid_rows) == (10, 1)
    assert "row 9: " in report.invalid[0] and "column 'id' expects int64" in report.invalid[0]
