"""iceberg_evolution: the evolved schema decided at initialization, and the commit that adds
the columns with the rows, on pyiceberg's SQL catalog (SQLite) with a file:// warehouse."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from pyiceberg.types import StringType

from beam_s3_sink.formats.stats import parquet_footer_stats
from beam_s3_sink.iceberg_commit import TableFile, check_schema, commit, file_schema, iceberg_schema
from beam_s3_sink.iceberg_evolution import SchemaChangedError, evolved_schema

BASE = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("s", pa.struct([("x", pa.int32())]))])
GROWN = pa.schema(
    [
        ("id", pa.int64()),
        ("n", pa.int64()),  # widened
        ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),  # a field added inside a struct
        ("tags", pa.list_(pa.struct([("k", pa.string())]))),  # a nested column added
    ]
)


@pytest.fixture
def table(tmp_path) -> Table:
    (tmp_path / "warehouse").mkdir()
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    return catalog.create_table("ns.t", schema=iceberg_schema(BASE)[0])


def written_schema(schema, arrow: pa.Schema) -> pa.Schema:
    """What initialization hands the upload step: the copy's columns with the evolved ids."""
    ids = file_schema(schema)
    return pa.schema([ids.field(f.name).with_nullable(f.nullable) for f in arrow])


def write(table: Table, name: str, data: pa.Table, schema: pa.Schema) -> TableFile:
    path = f"{table.location()}/data/{name}.parquet"[len("file://") :]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data.cast(schema), path)
    meta = pq.ParquetFile(path).metadata
    return TableFile("file://" + path, meta.num_rows, os.path.getsize(path), parquet_footer_stats(meta))


def test_the_evolved_schema_has_the_ids_the_commit_assigns(table):
    assert table.metadata.last_column_id == 4
    schema, changes = evolved_schema(table, GROWN)
    assert [c.split(" (")[0] for c in changes] == [
        "column 'n' widened from int to long",
        "column 's.y'",
        "column 'tags'",
    ]
    check_schema(schema, GROWN)
    assert table.schema().schema_id == 0 and len(table.metadata.schemas) == 1, "nothing committed"
    written = written_schema(schema, GROWN)
    rows = pa.table({"id": [1, 2], "n": [2**40, None], "s": [{"x": 1, "y": "a"}, None], "tags": [[{"k": "v"}], []]})
    f = write(table, "f", rows, written)
    snapshot_id = commit(table, [f], "append", "grow", schema=written)
    table = table.refresh()
    assert table.schema().schema_id == 1 and table.current_snapshot().snapshot_id == snapshot_id
    assert len(table.snapshots()) == 1, "the columns and the rows in one commit"
    assert table.schema().as_struct() == schema.as_struct()
    assert table.scan().to_arrow().to_pylist() == rows.to_pylist()
    (entry,) = table.inspect.files().to_pylist()
    y = table.schema().find_field("s.y").field_id
    assert dict(entry["null_value_counts"])[y] == 1, "statistics of a new column, by its new id"


def test_a_schema_changed_meanwhile_is_refused_and_nothing_is_committed(table):
    schema, _ = evolved_schema(table, GROWN)
    written = written_schema(schema, GROWN)
    f = write(table, "f", pa.table({"id": [1], "n": [1], "s": [None], "tags": [None]}), written)
    table.update_schema().add_column("other", StringType()).commit()  # another writer, in between
    with pytest.raises(SchemaChangedError, match=r"column 's.y' has field id 6 in the table, 5 in the copy's files"):
        commit(table.refresh(), [f], "append", "grow", schema=written)
    table = table.refresh()
    assert table.current_snapshot() is None and [f.name for f in table.schema().fields] == ["id", "n", "s", "other"]


def test_an_identical_evolution_committed_meanwhile_is_fine(table):
    schema, _ = evolved_schema(table, GROWN)
    written = written_schema(schema, GROWN)
    f = write(table, "f", pa.table({"id": [1], "n": [1], "s": [None], "tags": [None]}), written)
    other = table.update_schema()
    other.union_by_name(GROWN)
    other.commit()  # a concurrent copy of the same schema added the same columns, the same ids
    commit(table.refresh(), [f], "append", "grow", schema=written)
    table = table.refresh()
    assert table.schema().schema_id == 1 and table.scan().to_arrow().num_rows == 1
