"""sharding (num_batches): each row's shard by a stable hash; AssignShardFn as a pipeline."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.testing.util import assert_that, equal_to

from beam_s3_sink.sharding import _AssignShardFn as AssignShardFn
from beam_s3_sink.sharding import shard_numbers, split_by_shard

from .beam_testing import pipeline

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64())])


def test_shard_numbers_are_stable_and_in_range():
    rows = [{"id": i, "x": i / 2} for i in range(1000)]
    numbers = shard_numbers(rows, SCHEMA, 7)
    assert numbers == shard_numbers(rows, SCHEMA, 7) and set(numbers) == set(range(7))
    assert numbers[:5] == [shard_numbers([r], SCHEMA, 7)[0] for r in rows[:5]]  # per row, not per buffer


def test_equal_values_share_a_shard_whatever_their_python_type():
    assert shard_numbers([{"id": 1, "x": 1}], SCHEMA, 100) == shard_numbers([{"id": 1, "x": 1.0}], SCHEMA, 100)


def test_a_row_that_does_not_fit_goes_to_shard_0():
    assert shard_numbers([{"id": 5, "x": 1.0}, {"id": "bad", "x": 1.0}], SCHEMA, 50)[1] == 0


def test_split_by_shard_matches_the_rows_shards():
    rows = [{"id": i, "x": 0.5} for i in range(50)]
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    parts = split_by_shard(batch, 4)
    assert [n for n, _ in parts] == sorted({n for n, _ in parts})
    by_row = dict(zip(range(50), shard_numbers(rows, SCHEMA, 4)))
    for number, part in parts:
        assert all(by_row[i] == number for i in part.column("id").to_pylist())
    assert sum(p.num_rows for _, p in parts) == 50


def test_assign_shards_in_a_pipeline_rows_and_batches_alike():
    rows = [{"id": i, "x": float(i)} for i in range(40)]
    expected = list(zip(shard_numbers(rows, SCHEMA, 3), [r["id"] for r in rows]))
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)

    def ids(pair):
        shard, item = pair
        values = item.column("id").to_pylist() if isinstance(item, pa.RecordBatch) else [item["id"]]
        return [(shard, v) for v in values]

    with pipeline() as p:
        from_rows = p | "Rows" >> beam.Create(rows) | "ShardRows" >> beam.ParDo(AssignShardFn(SCHEMA, 3))
        from_batch = p | "Batch" >> beam.Create([batch]) | "ShardBatch" >> beam.ParDo(AssignShardFn(SCHEMA, 3))
        assert_that(from_rows | "RowIds" >> beam.FlatMap(ids), equal_to(expected), label="rows")
        assert_that(from_batch | "BatchIds" >> beam.FlatMap(ids), equal_to(expected), label="batch")


def test_elements_that_are_not_rows_go_to_shard_0():
    with pipeline() as p:
        out = p | beam.Create([7, pa.table({"nope": [1]})]) | beam.ParDo(AssignShardFn(SCHEMA, 3)) | beam.Keys()
        assert_that(out, equal_to([0, 0]))
