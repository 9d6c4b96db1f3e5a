"""cli/schema_text: the --schema flag's text and JSON forms."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from beam_s3_sink.cli.schema_text import (
    SchemaSyntaxError,
    format_schema,
    load_schema,
    parse_schema,
    parse_type,
    schema_from_json,
    schema_to_text,
)


@pytest.mark.parametrize(
    "text, typ",
    [
        ("int64", pa.int64()),
        ("STRING", pa.string()),
        ("date", pa.date32()),
        ("decimal(12,2)", pa.decimal128(12, 2)),
        ("decimal128( 5 , 0 )", pa.decimal128(5, 0)),
        ("timestamp[ms]", pa.timestamp("ms")),
        ("timestamp[us, tz=UTC]", pa.timestamp("us", "UTC")),
        ("list<item: list<int8>>", pa.list_(pa.list_(pa.int8()))),
    ],
)
def test_parse_type(text, typ):
    assert parse_type(text) == typ


@pytest.mark.parametrize(
    "text, says",
    [
        ("int65", "unknown type 'int65'"),
        ("decimal(40,2)", "precision must be 1 to 38"),
        ("decimal(3,4)", "at least the scale"),
    ],
)
def test_bad_types(text, says):
    with pytest.raises(SchemaSyntaxError, match=says):
        parse_type(text)


def test_parse_schema_round_trip():
    schema = parse_schema("id:int64!, price:decimal(12,2), tags:list<string>, at:timestamp[us,UTC]")
    assert schema.names == ["id", "price", "tags", "at"] and not schema.field("id").nullable
    assert parse_schema(schema_to_text(schema)) == schema


@pytest.mark.parametrize(
    "text, says",
    [
        ("id:int64,,x:int8", "an empty column"),
        ("id", "write it as name:type"),
        ("a:int8,a:int8", "a"),
        ("x:nope", "schema column 'x': unknown type"),
    ],
)
def test_bad_schemas(text, says):
    with pytest.raises(SchemaSyntaxError, match=says):
        parse_schema(text)


def test_load_schema_from_a_manifest_file(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(
        json.dumps({"schema": [{"name": "id", "type": "int64", "nullable": False}, {"name": "s", "type": "string"}]})
    )
    assert load_schema(str(path)) == pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])
    with pytest.raises(SchemaSyntaxError, match="cannot read the schema file"):
        load_schema(str(tmp_path / "missing.json"))
    with pytest.raises(SchemaSyntaxError, match="every column needs a name and a type"):
        schema_from_json([{"name": "x"}])


def test_format_schema_aligns_columns():
    assert format_schema(parse_schema("id:int64!,longer_name:string")) == (
        "  id           int64  not null\n  longer_name  string"
    )
