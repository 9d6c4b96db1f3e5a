"""stats: per-file column statistics, from the batches (CSV/text) or the Parquet footer."""

from __future__ import annotations

import datetime
import decimal
import io

import pyarrow as pa
import pyarrow.parquet as pq

from beam_s3_sink.formats.stats import (
    MAX_TEXT,
    ColumnStats,
    StatsCounter,
    parquet_footer_stats,
    stats_from_json,
    stats_json,
)


def counted(*batches):
    counter = StatsCounter(batches[0].schema)
    for batch in batches:
        counter.add(batch)
    return {s.column: (s.null_count, s.min, s.max) for s in counter.result()}


def test_counts_over_batches():
    a = pa.record_batch({"i": [3, None], "s": ["m", "z"], "f": [1.5, float("nan")]})
    b = pa.record_batch({"i": [-1, 7], "s": [None, "a"], "f": [float("nan"), -2.0]})
    assert counted(a, b) == {"i": (1, -1, 7), "s": (1, "a", "z"), "f": (0, -2.0, 1.5)}


def test_values_are_json_ready():
    batch = pa.record_batch(
        {
            "d": [datetime.date(2024, 1, 2), datetime.date(2023, 5, 6)],
            "t": pa.array([datetime.datetime(2024, 1, 1, 12)] * 2, pa.timestamp("us")),
            "dec": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25")], pa.decimal128(5, 2)),
            "b": [True, False],
            "inf": [float("inf"), 1.0],
        }
    )
    assert counted(batch) == {
        "d": (0, "2023-05-06", "2024-01-02"),
        "t": (0, "2024-01-01T12:00:00", "2024-01-01T12:00:00"),
        "dec": (0, "-2.25", "1.50"),
        "b": (0, False, True),
        "inf": (0, 1.0, "inf"),
    }


def test_no_min_max_for_long_text_binary_nested_only_nan_or_all_null():
    batch = pa.record_batch(
        {
            "long": ["x" * (MAX_TEXT + 1), "a"],
            "bin": [b"a", None],
            "l": [[1], None],
            "nan": [float("nan"), float("nan")],
            "null": pa.array([None, None], pa.int8()),
        }
    )
    assert counted(batch) == {
        "long": (0, "a", None),
        "bin": (1, None, None),
        "l": (1, None, None),
        "nan": (0, None, None),
        "null": (2, None, None),
    }


def test_parquet_footer_stats_over_row_groups():
    table = pa.table({"id": [5, None, 1, 9], "s": pa.array([{"x": 1}, {"x": 2}, None, {"x": 3}])})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=2)
    meta = pq.read_metadata(io.BytesIO(out.getvalue()))
    stats = {s.column: (s.null_count, s.min, s.max) for s in parquet_footer_stats(meta)}
    assert stats == {"id": (1, 1, 9), "s.x": (1, 1, 3)}


def test_parquet_footer_of_a_file_without_rows_names_every_column():
    out = io.BytesIO()
    pq.write_table(pa.table({"a": pa.array([], pa.int8())}), out)
    assert parquet_footer_stats(pq.read_metadata(io.BytesIO(out.getvalue()))) == (ColumnStats("a", 0),)


def test_json_round_trip():
    stats = (ColumnStats("a", 1, 0, 9), ColumnStats("b", 0))
    assert stats_json(stats) == {
        "a": {"null_count": 1, "min": 0, "max": 9},
        "b": {"null_count": 0, "min": None, "max": None},
    }
    assert stats_from_json(stats_json(stats)) == stats
    assert stats_from_json(None) == ()


def test_nan_counts_per_float_leaf_and_in_the_manifest_form():
    from beam_s3_sink.formats.stats import nan_counts

    nan = float("nan")
    table = pa.table(
        {
            "d": [nan, 1.0, None, nan],
            "f": pa.array([1.0, 2.0, 3.0, nan], pa.float32()),
            "s": pa.array([{"x": nan}, {"x": 1.0}, None, {"x": nan}]),
            "xs": [[nan, nan], None, [], [1.0]],
            "i": [1, 2, 3, 4],
        }
    )
    assert nan_counts(table) == {"d": 2, "f": 1, "s.x": 2, "xs.list.element": 2}
    stats = (ColumnStats("d", 1, 1.0, 1.0, 2), ColumnStats("i", 0, 1, 4))
    assert stats_json(stats) == {
        "d": {"null_count": 1, "min": 1.0, "max": 1.0, "nan_count": 2},
        "i": {"null_count": 0, "min": 1, "max": 4},
    }
    assert stats_from_json(stats_json(stats)) == stats


def test_parquet_files_count_their_nans_over_every_batch():
    from beam_s3_sink.formats import ParquetFormat

    nan = float("nan")
    schema = pa.schema([("d", pa.float64()), ("xs", pa.list_(pa.float32())), ("n", pa.int64())])
    encoder = ParquetFormat(row_group_size=1024).open(schema, io.BytesIO(), 2**30)
    for i in range(50):
        encoder.write(pa.record_batch([[nan, float(i)], [[nan], [1.0, nan]], [i, i]], schema=schema))
    encoder.close()
    assert {s.column: s.nan_count for s in encoder.stats()} == {"d": 50, "xs.list.element": 100, "n": None}
