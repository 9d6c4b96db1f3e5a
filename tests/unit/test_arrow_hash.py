"""arrow_hash: a stable per-row hash, equal for equal values whatever their Arrow layout."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from beam_s3_sink.arrow_hash import row_hashes


def test_fixed_values():
    # Pinned: the hash must not change between runs, workers or versions of this package
    # without notice (num_batches keys the files by it, and a rerun must write the same keys).
    hashes = row_hashes(pa.record_batch({"id": [1, 2], "s": ["a", "b"]}))
    assert hashes.dtype == np.uint64
    assert hashes.tolist() == [7705981329044959847, 6621386407635387992]


def test_equal_values_hash_alike_across_layouts():
    plain = pa.record_batch({"s": ["x", "yy", None]})
    assert (
        row_hashes(plain).tolist()
        == row_hashes(pa.record_batch({"s": pa.array(["x", "yy", None], pa.large_string())})).tolist()
    )
    assert (
        row_hashes(plain).tolist()
        == row_hashes(pa.record_batch({"s": pa.array(["x", "yy", None]).dictionary_encode()})).tolist()
    )
    assert (
        row_hashes(plain).tolist()
        == row_hashes(pa.record_batch({"s": pa.array(["x", "yy", None], pa.string_view())})).tolist()
    )
    sliced = pa.record_batch({"s": ["pad", "x", "yy", None]}).slice(1)
    assert row_hashes(sliced).tolist() == row_hashes(plain).tolist()


def test_floats_zero_and_nan():
    hashes = row_hashes(pa.record_batch({"f": [0.0, -0.0, float("nan"), -float("nan")]})).tolist()
    assert hashes[0] == hashes[1] and hashes[2] == hashes[3] and hashes[0] != hashes[2]


def test_column_order_and_position_matter():
    a = row_hashes(pa.record_batch({"x": [1], "y": [2]}))[0]
    b = row_hashes(pa.record_batch({"x": [2], "y": [1]}))[0]
    assert a != b
    assert row_hashes(pa.record_batch({"s": ["ab"]}))[0] != row_hashes(pa.record_batch({"s": ["ba"]}))[0]


def test_null_differs_from_zero_and_empty():
    ints = row_hashes(pa.record_batch({"i": [0, None]})).tolist()
    strings = row_hashes(pa.record_batch({"s": ["", None]})).tolist()
    assert ints[0] != ints[1] and strings[0] != strings[1]


@pytest.mark.parametrize(
    "array",
    [
        pa.array([True, False, None]),
        pa.array([datetime.date(2024, 1, 1), None, datetime.date(1970, 1, 1)]),
        pa.array([decimal.Decimal("1.5"), decimal.Decimal("-1.5"), None], pa.decimal128(10, 2)),
        pa.array([b"\x00", b"", None]),
        pa.array([[1, 2], [], None]),
        pa.array([{"a": 1}, {"a": 2}, None]),
        pa.array([b"0123456789abcdef", b"fedcba9876543210", None], pa.uuid()),
        pa.nulls(3),
    ],
)
def test_every_type_hashes_distinct_values_apart(array):
    hashes = row_hashes(pa.RecordBatch.from_arrays([array], names=["c"])).tolist()
    if pa.types.is_null(array.type):
        assert len(set(hashes)) == 1
    else:
        assert len(set(hashes)) == 3


def test_more_rows_than_one_slice():
    values = [str(i) for i in range(66_000)]  # more than one 65,536-row slice
    hashes = row_hashes(pa.record_batch({"s": values}))
    assert len(set(hashes.tolist())) == 66_000
    assert hashes[-1] == row_hashes(pa.record_batch({"s": values[-1:]}))[0]


def test_hashes_spread_over_buckets():
    buckets = np.bincount((row_hashes(pa.record_batch({"id": list(range(10_000))})) % np.uint64(8)).astype(np.int64))
    assert buckets.min() > 1_000  # about 1,250 each
