"""delta_commit: schemas, stats, partition values, paths and the one-version commit, on a Delta
table in tmp_path (delta-rs on the local file system). Data files are real Parquet; their
statistics come from the footer, as the upload computes them."""

from __future__ import annotations

import datetime
import decimal
import json
import os
from typing import Any, Dict, List, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.delta_commit import (
    SINK_ID_KEY,
    UNIT_KEY,
    DeltaLayout,
    check_schema,
    commit,
    committed_version,
    delta_schema,
    file_schema,
    open_table,
    stats_json,
)
from beam_s3_sink.formats.stats import parquet_footer_stats
from beam_s3_sink.iceberg_commit import TableFile
from beam_s3_sink.results import StreamUnit

UTC = datetime.timezone.utc
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("p", pa.string())])


def write_file(root: str, directory: str, name: str, table: pa.Table, partition=()) -> TableFile:
    """A Parquet file under ``root``, described as the upload step describes it."""
    folder = os.path.join(root, directory) if directory else root
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    pq.write_table(table, path)
    stats = parquet_footer_stats(pq.ParquetFile(path).metadata)
    return TableFile(path, table.num_rows, os.path.getsize(path), stats, tuple(partition))


def files_for(root: str, rows: List[Dict[str, Any]], tag: str) -> List[TableFile]:
    """The rows split by ``p`` as the copy splits them (Hive directories, ``p`` left out)."""
    layout = DeltaLayout(partition_by=("p",))
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    return [
        write_file(root, part.directory, f"{tag}-{n}.parquet", pa.Table.from_batches([part.rows]), part.partition)
        for n, part in enumerate(layout.split(batch, SCHEMA))
    ]


def read(root: str) -> List[Dict[str, Any]]:
    table = open_table(root, {})
    assert table is not None
    return sorted(table.to_pyarrow_table().select(["id", "name", "p"]).to_pylist(), key=lambda r: r["id"])


def rows(ids, p: Optional[str]) -> List[Dict[str, Any]]:
    return [{"id": i, "name": f"n{i}", "p": p} for i in ids]


def do_commit(root: str, files, mode: str = "append", sink_id: str = "s", unit=None) -> int:
    return commit(root, files, mode, sink_id, delta_schema(SCHEMA, ["p"]), ["p"], {}, unit=unit)


def test_stats_are_the_uploads_in_deltas_json(tmp_path):
    schema = pa.schema(
        [
            ("n", pa.int32()),
            ("s", pa.string()),
            ("d", pa.decimal128(10, 3)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("flag", pa.bool_()),
            ("st", pa.struct([("x", pa.float64())])),
            ("tags", pa.list_(pa.string())),
        ]
    )
    data = pa.table(
        {
            "n": [3, None, -1],
            "s": ["b", "a", None],
            "d": [decimal.Decimal("1.250"), decimal.Decimal("-0.001"), None],
            "at": [
                datetime.datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC),
                None,
                datetime.datetime(2026, 1, 2, tzinfo=UTC),
            ],
            "day": [datetime.date(2026, 1, 1), datetime.date(2025, 12, 31), None],
            "flag": [True, False, None],
            "st": [{"x": 1.5}, {"x": None}, None],
            "tags": [["a"], [], None],
        },
        schema=schema,
    )
    f = write_file(str(tmp_path), "", "f.parquet", data)
    stats = json.loads(stats_json(f, delta_schema(schema)))
    assert stats == {
        "numRecords": 3,
        "minValues": {
            "n": -1,
            "s": "a",
            "d": -0.001,
            "at": "2026-01-01T00:00:00.001Z",  # milliseconds: the min rounded down
            "day": "2025-12-31",
            "st": {"x": 1.5},
        },
        "maxValues": {
            "n": 3,
            "s": "b",
            "d": 1.25,
            "at": "2026-01-02T00:00:00.000Z",
            "day": "2026-01-01",
            "st": {"x": 1.5},
        },
        "nullCount": {"n": 1, "s": 1, "d": 1, "at": 1, "day": 1, "flag": 1, "st": {"x": 2}},
    }
    assert '"d": 1.250' in stats_json(f, delta_schema(schema)), "decimals exact, as written"
    only = write_file(str(tmp_path), "", "g.parquet", data.slice(0, 1))
    assert json.loads(stats_json(only, delta_schema(schema)))["maxValues"]["at"] == "2026-01-01T00:00:00.002Z", (
        "the max rounded up"
    )


def test_schemas_check_as_iceberg_does():
    table = delta_schema(pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.struct([("x", pa.int32())]))]))
    check_schema(table, pa.schema([pa.field("id", pa.int16(), nullable=False), ("s", pa.struct([("x", pa.int8())]))]))
    with pytest.raises(ValueError) as e:
        check_schema(
            table, pa.schema([("id", pa.int64()), ("s", pa.struct([("y", pa.int32())])), ("z", pa.time64("us"))])
        )
    assert str(e.value) == (
        "the copy does not fit the table: column 'z': Arrow type time64[us] has no Delta Lake type; "
        "column 'id' is required (long) in the table, nullable in the copy; "
        "column 's.x' (integer) of the table is missing from the copy; "
        "column 's.y' (integer) of the copy is not in the table"
    )
    assert file_schema(
        table, pa.schema([pa.field("id", pa.int16(), nullable=False), ("s", pa.struct([("x", pa.int8())]))])
    ).types == [
        pa.int64(),
        pa.struct([("x", pa.int32())]),
    ]
    with pytest.raises(ValueError, match="partition column 'id' is double"):
        delta_schema(pa.schema([("id", pa.float64())]), ["id"])


def test_commit_create_append_rerun_and_overwrite_partitions(tmp_path):
    root = str(tmp_path / "t")
    first = files_for(root, rows(range(0, 4), "a/b c") + rows(range(4, 6), None) + rows(range(6, 8), ""), "one")
    assert do_commit(root, first, sink_id="one") == 0
    assert do_commit(root, first, sink_id="one") == 0, "a rerun commits nothing"
    assert sorted(os.listdir(root)) == ["_delta_log", "p=__HIVE_DEFAULT_PARTITION__", "p=a%2Fb%20c"]
    log = [json.loads(line) for line in open(os.path.join(root, "_delta_log", "00000000000000000000.json"))]
    adds = sorted((a["add"]["path"], a["add"]["partitionValues"]["p"]) for a in log if "add" in a)
    assert adds[-1] == ("p=a%252Fb%2520c/one-0.parquet", "a/b c"), "paths URL-encoded in the log"
    assert {v for _, v in adds[:-1]} == {None}, "a null and an empty string: both null"
    assert {a["txn"]["appId"]: a["txn"]["version"] for a in log if "txn" in a} == {"one": 0}
    assert read(root) == sorted(rows(range(0, 4), "a/b c") + rows(range(4, 8), None), key=lambda r: r["id"])

    assert do_commit(root, files_for(root, rows(range(10, 12), "x"), "two"), sink_id="two") == 1
    replaced = files_for(root, rows(range(20, 22), "x") + rows(range(22, 23), None), "three")
    assert do_commit(root, replaced, mode="overwrite_partitions", sink_id="three") == 2
    assert read(root) == rows(range(0, 4), "a/b c") + rows(range(20, 22), "x") + rows(range(22, 23), None)
    history = {h["version"]: h for h in open_table(root, {}).history()}
    assert [history[v][SINK_ID_KEY] for v in (0, 1, 2)] == ["one", "two", "three"]

    assert do_commit(root, files_for(root, rows(range(30, 31), "y"), "four"), mode="overwrite", sink_id="four") == 3
    assert read(root) == rows(range(30, 31), "y")


def test_units_committed_out_of_order_are_each_found_once(tmp_path):
    root = str(tmp_path / "t")

    def unit(minute: int) -> StreamUnit:
        start = datetime.datetime(2026, 1, 1, 0, minute, tzinfo=UTC)
        return StreamUnit(start, start + datetime.timedelta(minutes=1), 0, "ON_TIME")

    later, earlier = unit(5), unit(1)
    assert do_commit(root, files_for(root, rows([1], "a"), "later"), unit=later) == 0
    assert do_commit(root, files_for(root, rows([2], "a"), "earlier"), unit=earlier) == 1
    table = open_table(root, {})
    assert committed_version(table, "s", later) == 0 and committed_version(table, "s", earlier) == 1
    assert committed_version(table, "s", unit(3)) is None and committed_version(table, "s", unit(9)) is None
    assert do_commit(root, files_for(root, rows([3], "a"), "again"), unit=earlier) == 1, "a replay commits nothing"
    assert [r["id"] for r in read(root)] == [1, 2]
    assert {h[UNIT_KEY] for h in open_table(root, {}).history()} == {later.id, earlier.id}


def test_a_table_made_meanwhile_that_does_not_fit_the_files_commits_nothing(tmp_path):
    root = str(tmp_path / "t")
    other = pa.schema([("id", pa.string()), ("name", pa.string()), ("p", pa.string())])
    commit(root, [], "append", "other", delta_schema(other, ["p"]), ["p"], {})
    with pytest.raises(ValueError, match=r"column 'id' is string in the table, long \(Arrow int64\) in the copy"):
        do_commit(root, files_for(root, rows([1], "a"), "mine"), sink_id="mine")
    with pytest.raises(ValueError, match=r"partitioned by \['p'\], the copy's files by \[\]"):
        commit(root, [], "append", "flat", delta_schema(other), [], {})
    assert open_table(root, {}).version() == 0


def test_an_old_commit_is_found_beyond_the_first_history_page(tmp_path):
    from beam_s3_sink.delta_commit import HISTORY_LIMITS

    root = str(tmp_path / "t")
    count = HISTORY_LIMITS[0] + 4
    for n in range(count):
        assert do_commit(root, [], sink_id=f"s{n}") == n
    table = open_table(root, {})
    assert [committed_version(table, f"s{n}") for n in (0, 3, count - 1)] == [0, 3, count - 1]
    assert do_commit(root, files_for(root, rows([1], "a"), "again"), sink_id="s0") == 0, "a rerun of the first"
    assert committed_version(table, "never") is None and open_table(root, {}).version() == count - 1
