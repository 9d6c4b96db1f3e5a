"""cli/orders: the generated data set is the same every run and fits its schema."""

from __future__ import annotations

import pyarrow as pa

from beam_s3_sink.cli.orders import ORDERS_SCHEMA, SHARD_ROWS, expected_totals, orders_shard
from beam_s3_sink.schema import rows_to_batch


def test_shards_are_deterministic_and_cover_the_ids():
    rows = 2 * SHARD_ROWS + 5
    first = list(orders_shard(0, rows))
    assert first == list(orders_shard(0, rows)) and len(first) == SHARD_ROWS
    ids = [r["order_id"] for shard in range(3) for r in orders_shard(shard, rows)]
    assert ids == list(range(rows))


def test_rows_fit_the_schema():
    batch = rows_to_batch(list(orders_shard(0, 200)), ORDERS_SCHEMA)
    assert batch.num_rows == 200 and batch.schema == ORDERS_SCHEMA
    assert pa.compute.sum(batch.column("quantity")).as_py() == expected_totals(200)["quantity"]


def test_expected_totals():
    totals = expected_totals(10)
    assert (totals["rows"], totals["order_id_sum"]) == (10, 45)
