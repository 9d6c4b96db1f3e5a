"""cli/sources: naming, planning and reading the --source (local files here: no S3)."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.cli.orders import ORDERS_SCHEMA
from beam_s3_sink.cli.progress import RowCounter
from beam_s3_sink.cli.sources import ReadSource, Source, SourceError, parse_source, plan_source, source_totals

from ..beam_testing import collected, pipeline


@pytest.mark.parametrize(
    "text, kind",
    [
        ("a/*.csv", "csv"),
        ("x.tsv.gz", "csv"),
        ("d/*.ndjson.zst", "jsonl"),
        ("s3://b/p/*.json", "jsonl"),
        ("f.PARQUET", "parquet"),
    ],
)
def test_parse_source_kinds(text, kind):
    assert parse_source(text) == Source(kind, pattern=text)


def test_parse_source_refusals():
    with pytest.raises(SourceError, match="write generate:ROWS"):
        parse_source("generate:many")
    with pytest.raises(SourceError, match="pass --source_format csv|jsonl|parquet"):
        parse_source("data/*.dat")
    assert parse_source("data/*.dat", kind="csv").kind == "csv"


def test_plan_infers_a_csv_schema_and_checks_a_given_one(tmp_path):
    path = tmp_path / "in.csv.gz"
    path.write_bytes(gzip.compress(b"id,name,ok\n1,a,t\n2,,f\n"))
    source = parse_source(str(tmp_path / "*.csv.gz"))
    assert plan_source(source, None) == pa.schema([("id", pa.int64()), ("name", pa.string()), ("ok", pa.bool_())])
    with pytest.raises(SourceError, match="the data's columns do not match the schema: missing \\['x'\\]"):
        plan_source(source, pa.schema([("x", pa.int64())]))


def test_plan_parquet_and_jsonl(tmp_path):
    pq.write_table(pa.table({"id": pa.array([1], pa.int32())}), tmp_path / "a.parquet")
    assert plan_source(parse_source(str(tmp_path / "*.parquet")), None) == pa.schema([("id", pa.int32())])
    (tmp_path / "a.jsonl").write_text('{"id": 1, "s": "x"}\n{"id": 2, "s": null}\n')
    assert plan_source(parse_source(str(tmp_path / "a.jsonl")), None).names == ["id", "s"]
    with pytest.raises(SourceError, match="no non-empty file matches"):
        plan_source(parse_source(str(tmp_path / "none-*.csv")), None)


def test_generate_has_its_own_schema_and_totals():
    assert plan_source(parse_source("generate:10"), None) is ORDERS_SCHEMA
    with pytest.raises(SourceError, match="--schema does not apply"):
        plan_source(parse_source("generate:10"), pa.schema([("a", pa.int8())]))
    assert source_totals(parse_source("generate:10"))[0] == 10


def test_read_csv_files_as_tables(tmp_path):
    (tmp_path / "a.csv").write_text("id,b\n1,\\x00ff\n2,\n")
    (tmp_path / "b.csv").write_text('id,b\n3,""\n')
    schema = pa.schema([("id", pa.int64()), ("b", pa.binary())])
    with pipeline() as p:
        tables = collected(p | ReadSource(parse_source(str(tmp_path / "*.csv")), schema, RowCounter()))
    rows = sorted((r for t in tables for r in t.to_pylist()), key=lambda r: r["id"])
    assert rows == [{"id": 1, "b": b"\x00\xff"}, {"id": 2, "b": None}, {"id": 3, "b": b""}]


def test_keep_bad_hands_on_rows_that_do_not_fit_as_dicts(tmp_path):
    """--max_bad_rows: a value that does not convert (an int, a bytea's hex), or a NULL in a NOT
    NULL column, makes its row a dict of the file's text for the copy to judge; every other
    row arrives converted, once."""
    (tmp_path / "a.csv").write_text('id,b,n\n1,\\x00ff,a\n2,\\xZZ,b\nx,,c\n4,"",\n5,\\x01,e\n')
    (tmp_path / "b.csv").write_text("id,b,n\n7,\\xZZ,g\n8,\\x02,h\n")  # only the hex is bad: read, then decoded
    schema = pa.schema([("id", pa.int64()), ("b", pa.binary()), pa.field("n", pa.string(), nullable=False)])
    source = parse_source(str(tmp_path / "*.csv"))
    assert plan_source(source, schema, keep_bad=True) == schema
    with pytest.raises(SourceError, match="invalid value 'x'"):
        plan_source(source, schema)
    with pipeline() as p:
        elements = collected(p | ReadSource(source, schema, RowCounter(), keep_bad=True))
    good = sorted((r for e in elements if isinstance(e, pa.Table) for r in e.to_pylist()), key=lambda r: r["id"])
    assert good == [
        {"id": 1, "b": b"\x00\xff", "n": "a"},
        {"id": 5, "b": b"\x01", "n": "e"},
        {"id": 8, "b": b"\x02", "n": "h"},
    ]
    bad = sorted((e for e in elements if isinstance(e, dict)), key=lambda r: str(r["id"]))
    assert bad == [
        {"id": 2, "b": "\\xZZ", "n": "b"},
        {"id": 4, "b": b"", "n": None},
        {"id": 7, "b": "\\xZZ", "n": "g"},
        {"id": "x", "b": None, "n": "c"},
    ]


def test_keep_bad_json_lines(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": 1}\n{"id": "two"}\n{"id": 3, "z": 1}\n')
    schema = pa.schema([("id", pa.int64())])
    with pipeline() as p:
        elements = collected(
            p | ReadSource(parse_source(str(tmp_path / "a.jsonl")), schema, RowCounter(), keep_bad=True)
        )
    assert [r for e in elements if isinstance(e, pa.Table) for r in e.to_pylist()] == [{"id": 1}]
    assert sorted((e for e in elements if isinstance(e, dict)), key=str) == [{"id": "two"}, {"id": 3, "z": 1}]
    (tmp_path / "b.jsonl").write_text('{"id": 1}\n[1, 2]\n')
    with pytest.raises(SourceError, match="not a JSON object"):
        plan_source(parse_source(str(tmp_path / "b.jsonl")), schema, keep_bad=True)
