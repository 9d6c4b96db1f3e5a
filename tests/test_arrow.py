"""Arrow input: ``pyarrow.RecordBatch``/``Table`` elements, from ``ReadFromParquetBatched``, from a
batched ``DoFn`` and mixed with rows, copied exactly (read back with pyarrow and DuckDB, and with
PostgreSQL's ``COPY ... FROM`` for CSV/text); batches that do not fit the schema fail naming the
column with nothing visible."""

import io
import typing
from typing import Iterator, Optional

import apache_beam as beam
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink import CopyToS3, CopyToS3Error, CsvFormat, TextFormat
from beam_s3_sink.arrow_hash import row_hashes
from beam_s3_sink.arrow_input import conform, widens
from beam_s3_sink.errors import BatchError
from conftest import across_runners
from helpers import batch_numbers, data_keys, get_bytes, list_objects, pending_uploads, read_manifest, run_copy
from test_pgcopy import (
    ROW_COUNT,
    assert_loads_back,
    assert_same_lines,
    corpus_tables,  # noqa: F401 - corpus_tables is a fixture
)
from test_pgcopy import SCHEMA as PG_SCHEMA
from test_pgcopy import make_row as pg_row

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("day", pa.date32()),
        ("kind", pa.string()),
    ]
)
N = 20_000


def table(start: int, stop: int) -> pa.Table:
    ids = np.arange(start, stop, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "name": pa.array([None if i % 11 == 0 else f"name {i}" for i in ids.tolist()], pa.string()),
            "amount": ids / 4,
            "day": pa.array((ids % 30).astype("int32"), pa.int32()).cast(pa.date32()),
            "kind": pa.array(np.array(["a", "b", "c/d"])[ids % 3]),
        },
        schema=SCHEMA,
    )


def expected(n: int = N) -> pa.Table:
    return table(0, n)


def copied(s3_client, bucket: str, prefix: str, tmp_path, partitioned: bool = False) -> pa.Table:
    """The copy read back with pyarrow (hive partitions) and checked equal with DuckDB."""
    local = tmp_path / "copy"
    for key in data_keys(s3_client, bucket, prefix + "/"):
        path = local / key[len(prefix) + 1 :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(get_bytes(s3_client, bucket, key))
    if partitioned:
        import pyarrow.dataset as ds

        got = ds.dataset(str(local), format="parquet", partitioning="hive").to_table()
        got = got.select(SCHEMA.names).cast(pa.schema([f.with_nullable(True) for f in SCHEMA]))
    else:
        got = pa.concat_tables([pq.read_table(p) for p in sorted(local.rglob("*.parquet"))])
    got = got.sort_by("id")
    via_duck = duckdb.sql(
        f"SELECT {', '.join(SCHEMA.names)} FROM read_parquet('{local}/**/*.parquet', "
        f"hive_partitioning={'true' if partitioned else 'false'}) ORDER BY id"
    ).arrow()
    if hasattr(via_duck, "read_all"):
        via_duck = via_duck.read_all()
    assert via_duck.column("id").to_pylist() == got.column("id").to_pylist()
    assert via_duck.column("name").to_pylist() == got.column("name").to_pylist()
    assert via_duck.column("amount").to_pylist() == got.column("amount").to_pylist()
    assert [str(d) for d in via_duck.column("day").to_pylist()] == [str(d) for d in got.column("day").to_pylist()]
    return got


def assert_equal_rows(got: pa.Table, want: pa.Table) -> None:
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


#: On the job-server runners one layout per test (their contract, every layout, is in
#: tests/test_runners.py); Flink's EXTERNAL environment runs the same Flink as LOOPBACK.
ON_JOB_SERVERS = ("flink", "spark", "prism")
LAYOUTS = {
    "plain": {},
    "partitions": {"partition_by": ["kind"], "keep_partition_columns": False},
    "num_batches": {"num_batches": 3},
}


def write_parquet_files(tmp_path, n: int = N) -> str:
    folder = tmp_path / "in"
    folder.mkdir()
    half = n // 2
    # several files, several row groups; the second file's columns in another order and narrower types
    pq.write_table(table(0, half), folder / "a.parquet", row_group_size=3000)
    other = table(half, n)
    other = (
        other.select(["kind", "day", "amount", "name", "id"])
        .set_column(4, "id", other.column("id").cast(pa.int32()))
        .set_column(3, "name", other.column("name").dictionary_encode())
    )
    pq.write_table(other, folder / "b.parquet", row_group_size=4000)
    return str(folder / "*.parquet")


@pytest.mark.parametrize(
    "runner,layout", across_runners(list(LAYOUTS), ["partitions"], ON_JOB_SERVERS), indirect=["runner"]
)
def test_read_parquet_batched_copies_exactly(runner, layout, s3_config, s3_client, bucket, tmp_path):
    pattern = write_parquet_files(tmp_path)
    result = run_copy(
        args=runner,
        source=lambda p: p | beam.io.ReadFromParquetBatched(pattern),
        uri=f"s3://{bucket}/out",
        schema=SCHEMA,
        s3=s3_config,
        max_file_size=64 * 1024,
        **LAYOUTS[layout],
    )
    assert result.ok and result.rows == N, result
    assert sum(f.rows for f in result.files) == N and len(result.files) > 1
    manifest = read_manifest(s3_client, bucket, f"out/_{result.sink_id}-manifest.json")
    assert manifest["rows"] == N
    got = copied(s3_client, bucket, "out", tmp_path, partitioned=layout == "partitions")
    assert_equal_rows(got, expected())
    if layout == "partitions":
        assert {k.split("/")[1] for k in data_keys(s3_client, bucket, "out/")} == {"kind=a", "kind=b", "kind=c%2Fd"}


class Item(typing.NamedTuple):
    id: int
    name: Optional[str]
    amount: float
    kind: str


ITEM_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("kind", pa.string())])


class MakeBatches(beam.DoFn):
    """A batched DoFn: shard numbers in, pyarrow Tables of Items out (Beam's pyarrow converter)."""

    @beam.DoFn.yields_batches
    def process(self, start: int) -> Iterator[pa.Table]:
        yield table(start, start + 5000).select(ITEM_SCHEMA.names).cast(ITEM_SCHEMA)

    def infer_output_type(self, input_type):
        return Item


class AddOne(beam.DoFn):
    """A batched DoFn between batched DoFns: Table in, Table out."""

    def process_batch(self, batch: pa.Table) -> Iterator[pa.Table]:
        yield batch.set_column(2, "amount", pa.compute.add(batch.column("amount"), 1.0))

    def infer_output_type(self, input_type):
        return input_type


@pytest.mark.parametrize(
    "runner,layout", across_runners(["plain", "num_batches"], ["num_batches"], ON_JOB_SERVERS), indirect=["runner"]
)
def test_batched_dofn_output_copies_exactly_with_the_schema_from_its_element_type(
    runner, layout, s3_config, s3_client, bucket, tmp_path
):
    def source(p):
        return p | beam.Create(list(range(0, N, 5000))) | beam.ParDo(MakeBatches()) | beam.ParDo(AddOne())

    result = run_copy(
        args=runner, source=source, uri=f"s3://{bucket}/out", s3=s3_config, **LAYOUTS[layout]
    )  # no schema: from the element type, Item
    assert result.ok and result.rows == N, result
    keys = data_keys(s3_client, bucket, "out/")
    got = pa.concat_tables([pq.read_table(io.BytesIO(get_bytes(s3_client, bucket, k))) for k in keys]).sort_by("id")
    assert got.schema.names == ITEM_SCHEMA.names
    want = expected().select(ITEM_SCHEMA.names)
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("amount").to_pylist() == [a + 1 for a in want.column("amount").to_pylist()]
    with duckdb.connect() as con:
        con.register("got", got)
        assert con.execute("SELECT count(*), sum(id), count(name) FROM got").fetchone() == (
            N,
            N * (N - 1) // 2,
            sum(1 for i in range(N) if i % 11),
        )


def test_batched_dofn_tables_reach_the_upload_step_as_tables(s3_config, bucket, monkeypatch):
    from beam_s3_sink.batches import Batcher, takes_batches

    assert takes_batches(Item) and not takes_batches(typing.Any)
    seen = []
    add = Batcher.add  # where every element, row or Arrow, becomes record batches
    monkeypatch.setattr(Batcher, "add", lambda self, element: (seen.append(type(element)), add(self, element))[-1])
    result = run_copy(
        source=lambda p: p | beam.Create([0, 5000]) | beam.ParDo(MakeBatches()), uri=f"s3://{bucket}/out", s3=s3_config
    )
    assert result.ok and result.rows == 10_000
    assert seen and set(seen) == {pa.Table}  # no row of Python values on the way


@pytest.mark.parametrize(
    "runner,layout",
    across_runners(["plain", "partitions", "num_batches"], ["plain"], ON_JOB_SERVERS),
    indirect=["runner"],
)
def test_rows_and_batches_mixed_in_one_pcollection_copy_exactly(runner, layout, s3_config, s3_client, bucket, tmp_path):
    whole = expected(3000)
    batch = whole.slice(0, 1000).to_batches()[0]
    narrow = whole.slice(1000, 1000)  # int32 ids, large_string names, dictionary kinds, columns reordered
    narrow = pa.table(
        {
            "kind": narrow.column("kind").dictionary_encode(),
            "id": narrow.column("id").cast(pa.int32()),
            "name": narrow.column("name").cast(pa.large_string()),
            "amount": narrow.column("amount"),
            "day": narrow.column("day"),
        }
    )
    rows = whole.slice(2000).to_pylist()
    Row = beam.Row
    elements = [batch, narrow] + rows[:300] + [Row(**r) for r in rows[300:600]] + rows[600:]
    result = run_copy(elements, args=runner, uri=f"s3://{bucket}/out", schema=SCHEMA, s3=s3_config, **LAYOUTS[layout])
    assert result.ok and result.rows == 3000, result
    assert_equal_rows(copied(s3_client, bucket, "out", tmp_path, partitioned=layout == "partitions"), whole)


def test_rows_and_batches_of_equal_values_hash_to_the_same_batch():
    whole = expected(2000)
    from_rows = batch_numbers(whole.to_pylist(), SCHEMA, 7)
    from_batch = (row_hashes(whole.to_batches()[0]) % np.uint64(7)).tolist()
    assert from_rows == from_batch
    assert set(from_rows) == set(range(7))
    # the same values in narrower types hash alike once conformed
    narrow = pa.table(
        {
            "id": whole.column("id").cast(pa.int32()),
            "name": whole.column("name").dictionary_encode(),
            "amount": whole.column("amount"),
            "day": whole.column("day"),
            "kind": whole.column("kind"),
        }
    )
    conformed = conform(narrow, SCHEMA).to_batches()[0]
    assert (row_hashes(conformed) % np.uint64(7)).tolist() == from_rows


@pytest.mark.parametrize(
    "bad,column,types",
    [
        (lambda t: t.set_column(2, "amount", t.column("amount").cast(pa.string())), "amount", ("double", "string")),
        (lambda t: t.set_column(0, "id", t.column("id").cast(pa.float64())), "id", ("int64", "double")),
        (lambda t: t.drop_columns(["id"]), "id", ("int64",)),
        (lambda t: t.append_column("extra", pa.array([1] * t.num_rows)), "extra", ()),
    ],
    ids=["string-for-float", "float-for-int", "missing-not-null", "extra-column"],
)
def test_a_batch_that_does_not_fit_fails_naming_the_column_with_nothing_visible(
    bad, column, types, s3_config, s3_client, bucket
):
    good = expected(500)
    elements = [good.slice(0, 250), bad(good.slice(250)), *good.slice(0, 5).to_pylist()]
    with pytest.raises(Exception) as info:
        run_copy(elements, uri=f"s3://{bucket}/out", schema=SCHEMA, s3=s3_config)
    message = str(info.value)
    assert "CopyToS3Error" in message or isinstance(info.value, CopyToS3Error)
    assert repr(column) in message or f"['{column}']" in message, message
    for name in types:
        assert name in message, message
    assert "pyarrow.Table of 250 rows" in message, message
    assert data_keys(s3_client, bucket, "out/") == []
    assert pending_uploads(s3_client, bucket) == []
    assert any(k.endswith("-INCOMPLETE") for k in list_objects(s3_client, bucket))


def test_conform_casts_only_what_keeps_every_value():
    target = pa.schema(
        [
            ("i", pa.int64()),
            ("s", pa.string()),
            ("t", pa.timestamp("us", tz="UTC")),
            ("d", pa.decimal128(12, 2)),
            ("l", pa.list_(pa.int64())),
        ]
    )
    source = pa.table(
        {
            "i": pa.array([1], pa.uint32()),
            "s": pa.array(["x"]).dictionary_encode(),
            "t": pa.array([0], pa.timestamp("ms", tz="UTC")),
            "d": pa.array([1], pa.decimal128(5, 1)),
            "l": pa.array([[1]], pa.large_list(pa.int16())),
        }
    )
    assert conform(source, target).schema == target
    assert conform(source, target).to_pylist()[0]["d"] == 1
    assert not widens(pa.int64(), pa.int32()) and not widens(pa.uint64(), pa.int64())
    assert not widens(pa.timestamp("us"), pa.timestamp("us", tz="UTC"))
    assert not widens(pa.float64(), pa.float32()) and not widens(pa.string(), pa.binary())
    with pytest.raises(BatchError, match=r"column 't': .* holds timestamp\[s\]"):
        conform(
            pa.table({"t": pa.array([2**62], pa.timestamp("s"))}),
            pa.schema([("t", pa.timestamp("ns"))]),
            "file x.parquet",
        )
    nulls = conform(pa.table({"i": [1, 2]}), pa.schema([("i", pa.int64()), ("n", pa.string())]))
    assert nulls.column("n").to_pylist() == [None, None]
    with pytest.raises(BatchError, match=r"column 'i' \(int64\) is NOT NULL .* in x.parquet has 1 NULL"):
        conform(pa.table({"i": [1, None]}), pa.schema([pa.field("i", pa.int64(), nullable=False)]), "in x.parquet")


def test_read_parquet_batched_without_a_schema_says_what_to_pass(s3_config, bucket, tmp_path):
    pattern = write_parquet_files(tmp_path, 10)
    with pytest.raises(ValueError, match=r"ReadFromParquetBatched.*read_schema"):
        with beam.Pipeline() as p:
            p | beam.io.ReadFromParquetBatched(pattern) | CopyToS3(f"s3://{bucket}/o", s3=s3_config)


@pytest.mark.parametrize(
    "fmt", [CsvFormat(header=True), TextFormat(), CsvFormat(compression="gzip")], ids=["csv", "text", "csv.gz"]
)
def test_csv_and_text_from_batches_load_into_postgres_equal(fmt, corpus_tables, s3_config, s3_client, bucket):  # noqa: F811 - the fixture imported above
    from beam_s3_sink.schema import rows_to_batch

    batches = [
        rows_to_batch([pg_row(i) for i in range(start, min(start + 7, ROW_COUNT))], PG_SCHEMA)
        for start in range(0, ROW_COUNT, 7)
    ]
    result = run_copy(batches, uri=f"s3://{bucket}/pg", format=fmt, schema=PG_SCHEMA, s3=s3_config)
    assert result.ok and result.rows == ROW_COUNT, result
    files = [get_bytes(s3_client, bucket, k) for k in data_keys(s3_client, bucket, "pg/")]
    if fmt.compression:
        files = [pa.CompressedInputStream(pa.BufferReader(f), fmt.compression).read() for f in files]
    if not fmt.compression:
        expected_text = corpus_tables.copy_to(fmt)
        body = b"".join(f.split(b"\n", 1)[1] if getattr(fmt, "header", False) else f for f in files)
        assert_same_lines(
            body, expected_text.split(b"\n", 1)[1] if getattr(fmt, "header", False) else expected_text, fmt.delimiter
        )
    assert_loads_back(corpus_tables, files, fmt)
