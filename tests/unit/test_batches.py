"""batches: elements into record batches (Batcher), batches into keyed Arrow blobs (_BatchFn,
driven as a runner drives it and in pipelines), num_batches shards (split_by_batch_number), and
takes_batches (a batched DoFn's pyarrow Tables reach the copy as they are)."""

# No "from __future__ import annotations": Beam reads the annotations of Order and MakeOrders.

import typing

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import GlobalWindow

from beam_s3_sink import CopyToS3
from beam_s3_sink.batches import (
    BATCH_BYTES,
    MAX_BATCH_ROWS,
    Batcher,
    Batches,
    BlobError,
    _BatchFn,
    decode_blob,
    encode_blob,
    split_by_batch_number,
    split_runs,
    takes_batches,
)
from beam_s3_sink.errors import BatchError, RowError
from beam_s3_sink.schema import rows_to_batch

from .beam_testing import collected, pipeline
from .fakes import serve

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
SHARD_SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64())])


def rows_of(blob):
    return [row for batch in decode_blob(blob) for row in batch.to_pylist()]


def drive(fn, bundles):
    """Run ``fn`` over ``bundles`` (lists of elements) as a runner does; return every
    ``(key, blob)`` it emits (fused: ``("", Batches)``), checking that what ``finish_bundle``
    emits is in the global window."""
    out = []
    for elements in bundles:
        fn.start_bundle()
        for element in elements:
            out.extend(fn.process(element))
        for windowed in fn.finish_bundle():
            assert list(windowed.windows) == [GlobalWindow()]
            out.append(windowed.value)
    return [("", e) if isinstance(e, Batches) else e for e in out]


def batch_fn(*args, **kwargs):
    fn = _BatchFn(*args, **kwargs)
    fn.setup()
    return fn


# blobs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["zstd", None])
def test_blob_round_trip(compression):
    batches = [pa.record_batch([[1, 2], ["a", None]], schema=SCHEMA), pa.record_batch([[3], ["c"]], schema=SCHEMA)]
    blob = encode_blob(batches, SCHEMA, compression)
    assert [b.to_pylist() for b in decode_blob(blob)] == [b.to_pylist() for b in batches]
    assert list(decode_blob(encode_blob([], SCHEMA))) == []


def test_an_error_blob_raises_its_message():
    (key, blob), *rest = drive(batch_fn(SCHEMA, True), [[{"id": "x", "name": "a"}]])
    with pytest.raises(BlobError, match="column 'id' expects int64, but a row holds 'x'"):
        list(decode_blob(blob))


# Batcher -----------------------------------------------------------------------------------------
def test_batcher_keeps_order_in_batches_of_at_most_max_batch_rows():
    batcher = Batcher(SCHEMA)
    rows = [{"id": i, "name": None} for i in range(3 * MAX_BATCH_ROWS + 5)]
    batches = [b for row in rows for b in batcher.add(row)] + batcher.flush()
    assert all(b.num_rows <= MAX_BATCH_ROWS for b in batches) and len(batches) > 3
    assert [r for b in batches for r in b.to_pylist()] == rows
    assert all(b.schema == SCHEMA for b in batches)
    assert batcher.flush() == [] and Batcher(SCHEMA).flush() == []


def test_batches_from_rows_are_about_batch_bytes():
    """Memory: after the first batch, a batch's rows are sized from the bytes per row seen."""
    batcher = Batcher(SCHEMA, batch_bytes=64 * 1024)
    rows = [{"id": i, "name": "x" * 100} for i in range(20_000)]
    batches = [b for row in rows for b in batcher.add(row)] + batcher.flush()
    assert all(b.nbytes <= 2 * 64 * 1024 for b in batches[1:-1]) and len(batches) > 10
    assert sum(b.num_rows for b in batches) == 20_000


def test_an_arrow_element_ends_the_rows_batch():
    batcher = Batcher(SCHEMA)
    assert batcher.add({"id": 1, "name": "a"}) == []
    out = batcher.add(pa.record_batch({"name": ["t", "u"], "id": pa.array([7, 8], pa.int32())}))
    assert [b.to_pylist() for b in out] == [[{"id": 1, "name": "a"}], [{"id": 7, "name": "t"}, {"id": 8, "name": "u"}]]
    assert batcher.add({"id": 2, "name": "b"}) == [] and batcher.flush()[0].to_pylist() == [{"id": 2, "name": "b"}]


def test_batcher_takes_beam_rows_named_tuples_and_tables():
    class Row(typing.NamedTuple):
        id: int
        name: str

    batcher = Batcher(SCHEMA)
    out = batcher.add(beam.Row(id=1, name="a")) + batcher.add(Row(2, "b")) + batcher.add(pa.table({"id": [3]}))
    assert [r for b in out + batcher.flush() for r in b.to_pylist()] == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": None},  # a missing nullable column is NULL
    ]


def test_batcher_names_what_does_not_fit():
    with pytest.raises(RowError, match="column 'id' expects int64, but a row holds 'x'"):
        batcher = Batcher(SCHEMA)
        batcher.add({"id": "x", "name": "a"})
        batcher.flush()
    with pytest.raises(RowError, match="a row must be a dict, beam.Row or NamedTuple, got int"):
        Batcher(SCHEMA).add(7)
    with pytest.raises(BatchError, match="column 'id' is int64 in the copy's schema, but a pyarrow.Table"):
        Batcher(SCHEMA).add(pa.table({"id": ["x"]}))


# _BatchFn ------------------------------------------------------------------------------------------
def test_fused_every_batch_is_sent_at_once_uncopied():
    fn = batch_fn(SCHEMA, False)
    rows = [{"id": i, "name": str(i)} for i in range(3000)]
    out = drive(fn, [rows])
    assert {key for key, _ in out} == {""} and len(out) > 1  # one blob per batch
    assert [r for _, blob in out for r in rows_of(blob)] == rows  # in order
    assert all(b.schema == SCHEMA for _, blob in out for b in decode_blob(blob))
    assert all(isinstance(blob, Batches) for _, blob in out)  # handed over as they are: no copy


def test_grouped_holds_at_most_blob_bytes_and_one_batch_of_rows():
    """Memory: between elements a grouped _BatchFn holds less than ``blob_bytes`` of batches,
    and its Batcher at most one batch of rows (about ``BATCH_BYTES``)."""
    fn = batch_fn(SCHEMA, True, blob_bytes=6 * 2**20, group_bytes=2**30)
    fn.start_bundle()
    out, held, waiting = [], 0, 0
    for i in range(12_000):
        out.extend(fn.process({"id": i, "name": "x" * 1000}))
        held, waiting = max(held, fn._held_bytes), max(waiting, len(fn._batcher._rows))
    out.extend(w.value for w in fn.finish_bundle())
    assert 0 < held < 6 * 2**20 and waiting * 1000 <= 2 * BATCH_BYTES and len(out) > 1
    assert [r["id"] for _, blob in out for r in rows_of(blob)] == list(range(12_000))


@pytest.mark.parametrize("kwargs", [dict(grouped=False), dict(grouped=True), dict(grouped=True, num_batches=3)])
def test_every_row_reaches_exactly_one_blob(kwargs):
    rows = [{"id": i, "name": str(i)} for i in range(3000)]
    with pipeline() as p:
        out = (
            p
            | beam.Create(rows)
            | beam.ParDo(_BatchFn(SCHEMA, blob_bytes=4096, group_bytes=16384, **kwargs))
            | beam.FlatMap(lambda e: rows_of(e if isinstance(e, Batches) else e[1]))
        )
        assert_that(out, equal_to(rows))


def test_keys_change_every_group_bytes():
    # Arrow elements are batches as they are (rows would make a few large batches first).
    tables = [pa.table({"id": range(i, i + 100), "name": ["x" * 50] * 100}) for i in range(0, 2000, 100)]

    def at_least_six(counts):
        # ~130 KB of Arrow data in groups of ~16 KB: at least six keys.
        assert counts[0] >= 6, f"{counts[0]} keys"

    with pipeline() as p:
        keys = (
            p
            | beam.Create(tables, reshuffle=False)
            | beam.ParDo(_BatchFn(SCHEMA, True, blob_bytes=4096, group_bytes=16384))
            | beam.Keys()
            | beam.Distinct()
            | beam.combiners.Count.Globally()
        )
        assert_that(keys, at_least_six)


def test_groups_roll_over_at_group_bytes_and_instances_never_share_a_key():
    first, second = batch_fn(SCHEMA, True, blob_bytes=4096, group_bytes=16384), batch_fn(SCHEMA, True)
    bundles = [[{"id": i, "name": "x" * 50} for i in range(b * 100, b * 100 + 100)] for b in range(20)]
    pairs = drive(first, bundles)
    sizes = {}
    for key, blob in pairs:
        sizes[key] = sizes.get(key, 0) + sum(b.nbytes for b in decode_blob(blob))
    assert len(sizes) > 3 and all(size <= 16384 + 2 * 4096 for size in sizes.values())
    assert {k for k, _ in drive(second, bundles)}.isdisjoint(sizes)  # a retry spills under its own keys
    assert sorted(r["id"] for _, blob in pairs for r in rows_of(blob)) == list(range(2000))


def test_arrow_elements_and_rows_are_batched_in_order():
    batch = pa.record_batch({"name": ["t"], "id": pa.array([5], pa.int32())})
    for grouped in (False, True):
        out = drive(batch_fn(SCHEMA, grouped), [[{"id": 1, "name": "a"}, batch, pa.table({"id": [6]})]])
        rows = [r for _, blob in out for r in rows_of(blob)]
        assert rows == [{"id": 1, "name": "a"}, {"id": 5, "name": "t"}, {"id": 6, "name": None}]


@pytest.mark.parametrize(
    "bad, says",
    [
        ({"id": "bad", "name": "b"}, "column 'id' expects int64, but a row holds 'bad'"),
        (42, "a row must be a dict, beam.Row or NamedTuple, got int"),
        (pa.table({"nope": [1]}), "has column(s) ['nope'] that are not in the copy's schema"),
    ],
)
@pytest.mark.parametrize("kwargs", [dict(grouped=False), dict(grouped=True), dict(grouped=True, num_batches=50)])
def test_what_does_not_fit_travels_as_an_error_blob_and_ends_the_bundle(bad, says, kwargs):
    good = [{"id": i, "name": "a"} for i in range(5)]
    out = drive(batch_fn(SCHEMA, **kwargs), [good + [bad] + good])
    (key, blob) = out[-1]
    with pytest.raises(BlobError) as raised:
        list(decode_blob(blob))
    assert says in str(raised.value)
    assert sum(len(rows_of(b)) for _, b in out[:-1]) <= 5  # nothing after it is converted
    if kwargs.get("num_batches"):
        assert key == 0  # shard 0's writer reports it
    elif kwargs["grouped"]:
        assert isinstance(key, str) and key
    else:
        assert key == ""


def test_a_bad_row_in_a_later_bundle_still_fails_it():
    fn = batch_fn(SCHEMA, True)
    first = drive(fn, [[{"id": 1, "name": "a"}]])
    second = drive(fn, [[{"id": "x", "name": "a"}]])
    assert rows_of(first[0][1]) == [{"id": 1, "name": "a"}]
    with pytest.raises(BlobError):
        list(decode_blob(second[0][1]))
    third = drive(fn, [[{"id": 2, "name": "b"}]])  # a new bundle starts clean
    assert rows_of(third[0][1]) == [{"id": 2, "name": "b"}]


# num_batches shards ----------------------------------------------------------------------------------
def shard_of_each(rows, num_batches):
    """The shard of each row, each row hashed alone."""
    return [split_by_batch_number(rows_to_batch([row], SHARD_SCHEMA), num_batches)[0][0] for row in rows]


def test_batch_numbers_are_stable_and_in_range():
    rows = [{"id": i, "x": i / 2} for i in range(1000)]
    batch = rows_to_batch(rows, SHARD_SCHEMA)
    parts = split_by_batch_number(batch, 7)
    assert [n for n, _ in parts] == sorted({n for n, _ in parts}) == list(range(7))
    again = split_by_batch_number(rows_to_batch(rows, SHARD_SCHEMA), 7)
    assert [(n, p.to_pylist()) for n, p in parts] == [(n, p.to_pylist()) for n, p in again]
    by_id = {r["id"]: n for n, p in parts for r in p.to_pylist()}
    assert [by_id[i] for i in range(5)] == shard_of_each(rows[:5], 7)  # per row, not per batch


def test_equal_values_share_a_shard_whatever_their_python_type():
    assert shard_of_each([{"id": 1, "x": 1}], 100) == shard_of_each([{"id": 1, "x": 1.0}], 100)


def test_split_by_batch_number_matches_the_rows_shards_and_keeps_their_order():
    rows = [{"id": i, "x": 0.5} for i in range(50)]
    parts = split_by_batch_number(rows_to_batch(rows, SHARD_SCHEMA), 4)
    assert [n for n, _ in parts] == sorted({n for n, _ in parts})
    by_row = dict(zip(range(50), shard_of_each(rows, 4)))
    for number, part in parts:
        ids = part.column("id").to_pylist()
        assert all(by_row[i] == number for i in ids) and ids == sorted(ids)
    assert sum(p.num_rows for _, p in parts) == 50
    assert [(n, p.num_rows) for n, p in split_by_batch_number(rows_to_batch(rows[:1], SHARD_SCHEMA), 4)] == [
        (by_row[0], 1)
    ]


def test_split_runs_without_a_copy_for_one_value():
    batch = pa.record_batch({"id": [1, 2, 3]})
    import numpy as np

    assert split_runs(batch, np.array([4, 4, 4])) == [(0, batch)]
    runs = split_runs(batch, np.array([9, 2, 9]))
    assert [(first, b.column("id").to_pylist()) for first, b in runs] == [(1, [2]), (0, [1, 3])]


def test_shards_in_a_pipeline_rows_and_batches_alike():
    rows = [{"id": i, "x": float(i)} for i in range(40)]
    expected = list(zip(shard_of_each(rows, 3), [r["id"] for r in rows]))
    batch = pa.RecordBatch.from_pylist(rows, schema=SHARD_SCHEMA)

    def ids(pair):
        shard, blob = pair
        return [(shard, r["id"]) for r in rows_of(blob)]

    with pipeline() as p:
        fn = _BatchFn(SHARD_SCHEMA, True, num_batches=3)
        from_rows = p | "Rows" >> beam.Create(rows) | "ShardRows" >> beam.ParDo(fn)
        from_batch = p | "Batch" >> beam.Create([batch]) | "ShardBatch" >> beam.ParDo(fn)
        assert_that(from_rows | "RowIds" >> beam.FlatMap(ids), equal_to(expected), label="rows")
        assert_that(from_batch | "BatchIds" >> beam.FlatMap(ids), equal_to(expected), label="batch")


def test_shard_keys_are_the_same_on_every_instance_and_run():
    rows = [{"id": i, "x": i * 0.25} for i in range(500)]

    def shards(fn):
        return sorted((key, r["id"]) for key, blob in drive(fn, [rows[:250], rows[250:]]) for r in rows_of(blob))

    first = shards(batch_fn(SHARD_SCHEMA, True, num_batches=5))
    assert first == shards(batch_fn(SHARD_SCHEMA, True, num_batches=5, blob_bytes=1024))
    assert {key for key, _ in first} == set(range(5)) and all(isinstance(k, int) for k, _ in first)


# takes_batches: a batched producer's Tables ----------------------------------------------------------
class Order(typing.NamedTuple):
    id: int
    name: str


def test_takes_batches_for_schema_types_only():
    assert takes_batches(Order)
    assert not takes_batches(typing.Any)
    assert not takes_batches(dict)


class MakeOrders(beam.DoFn):
    """A batched DoFn: emits pyarrow Tables of Orders."""

    def process_batch(self, batch: pa.Table) -> typing.Iterator[pa.Table]:
        yield pa.table(
            {"id": [i * 10 for i in batch.column("id").to_pylist()], "name": batch.column("name").to_pylist()}
        )

    def infer_output_type(self, input_type):
        return Order


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(num_batches=2), dict(upload_graph="grouped"), dict(upload_graph="per_bundle")]
)
def test_a_batched_producer_into_a_copy(fake_s3, monkeypatch, kwargs):
    config = serve(fake_s3, monkeypatch)
    with pipeline() as p:
        orders = (
            p
            | beam.Create([Order(i, f"o{i}") for i in range(50)]).with_output_types(Order)
            | beam.ParDo(MakeOrders()).with_output_types(Order)
        )
        results = collected(orders | CopyToS3("s3://bucket/o", format="csv", s3=config, sink_id="s1", **kwargs))
    (result,) = results
    assert result.ok and result.rows == 50
    body = b"".join(fake_s3.body(f.uri[len("s3://bucket/") :]) for f in result.files)
    assert sorted(body.decode().splitlines()) == sorted(f"{i * 10},o{i}" for i in range(50))
    assert fake_s3.uploads == {}
