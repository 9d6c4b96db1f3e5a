"""The ``--schema`` flag: an Arrow schema written on one line, or read from a JSON file.

The text form is a comma-separated list of ``name:type`` columns; a trailing ``!`` marks a
column NOT NULL::

    id:int64!,name:string,amount:decimal(12,2),ts:timestamp[us,UTC],tags:list<string>

Types are pyarrow's names (``pyarrow.type_for_alias``: ``int8`` ... ``int64``, ``uint8`` ...
``uint64``, ``float32``/``float``, ``float64``/``double``, ``bool``, ``string``, ``binary``,
``date32``, ``time64[us]``, ``timestamp[us]``, ``duration[s]`` ...) plus the forms pyarrow has no
alias for: ``date``, ``decimal(p,s)``, ``timestamp[unit,TZ]`` and ``list<type>``. The way
pyarrow prints a type (``timestamp[us, tz=UTC]``, ``decimal128(12, 2)``, ``list<item: int64>``)
is accepted too, so the schema in a copy's manifest can be fed back as is.

The JSON form is a file holding a list of ``{"name": ..., "type": ..., "nullable": ...}``
objects, the ``schema`` list of a copy's manifest (or an object with a ``schema`` key, such
as the whole manifest).

>>> parse_schema("id:int64!,amount:decimal(12,2)")
id: int64 not null
amount: decimal128(12, 2)
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, List, Tuple

import pyarrow as pa

from beam_s3_sink.errors import CopyToS3Error

__all__ = [
    "SchemaSyntaxError",
    "load_schema",
    "parse_schema",
    "parse_type",
    "schema_from_json",
    "schema_to_text",
    "format_schema",
]


class SchemaSyntaxError(CopyToS3Error, ValueError):
    """The schema text is not valid; the message names the column and what is wrong."""


def load_schema(value: str) -> pa.Schema:
    """The schema a ``--schema`` flag gives: the path of a JSON file, or the text form.

    >>> load_schema("id:int64!").field("id").nullable
    False
    """
    if value.lower().endswith(".json") or os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as f:
                document = json.load(f)
        except (OSError, ValueError) as exc:
            raise SchemaSyntaxError(f"cannot read the schema file {value}: {exc}") from None
        return schema_from_json(document, value)
    return parse_schema(value)


def schema_from_json(document: Any, where: str = "the JSON schema") -> pa.Schema:
    """A schema from a list of ``{"name", "type", "nullable"}`` objects (a manifest's ``schema``)."""
    if isinstance(document, dict) and "schema" in document:
        document = document["schema"]
    if not isinstance(document, list) or not document:
        raise SchemaSyntaxError(f'{where}: expected a list of {{"name", "type", "nullable"}} objects')
    fields = []
    for item in document:
        if not isinstance(item, dict) or "name" not in item or "type" not in item:
            raise SchemaSyntaxError(f"{where}: every column needs a name and a type, got {item!r}")
        fields.append(
            pa.field(item["name"], _column_type(item["name"], item["type"]), nullable=bool(item.get("nullable", True)))
        )
    return _checked(fields)


def parse_schema(text: str) -> pa.Schema:
    """An Arrow schema from the text form ``name:type[!],...``.

    >>> parse_schema("ts:timestamp[us,UTC]").field("ts").type
    TimestampType(timestamp[us, tz=UTC])
    """
    fields = []
    for column in _split_top_level(text, ","):
        column = column.strip()
        if not column:
            raise SchemaSyntaxError(f"schema {text!r}: an empty column (two commas in a row?)")
        name, sep, typ = column.partition(":")
        name, typ = name.strip(), typ.strip()
        if not sep or not name or not typ:
            raise SchemaSyntaxError(f"schema column {column!r}: write it as name:type, e.g. id:int64")
        nullable = not typ.endswith("!")
        fields.append(pa.field(name, _column_type(name, typ.rstrip("!").strip()), nullable=nullable))
    return _checked(fields)


def _column_type(name: str, text: str) -> pa.DataType:
    try:
        return parse_type(text)
    except SchemaSyntaxError as exc:
        raise SchemaSyntaxError(f"schema column {name!r}: {exc}") from None


def parse_type(text: str) -> pa.DataType:
    """One Arrow type from its text form.

    >>> parse_type("decimal(12,2)"), parse_type("list<int64>")
    (Decimal128Type(decimal128(12, 2)), ListType(list<item: int64>))
    """
    text = text.strip()
    lower = text.lower()
    match = re.fullmatch(r"decimal(?:128)?\(\s*(\d+)\s*,\s*(\d+)\s*\)", lower)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaSyntaxError(f"decimal({precision},{scale}): precision must be 1 to 38 and at least the scale")
        return pa.decimal128(precision, scale)
    match = re.fullmatch(r"timestamp\[\s*(s|ms|us|ns)\s*(?:,\s*(?:tz=)?\s*([^\]]+?)\s*)?\]", text, re.IGNORECASE)
    if match:
        return pa.timestamp(match.group(1).lower(), tz=match.group(2))
    match = re.fullmatch(r"list<\s*(?:item\s*:\s*)?(.+)>", text, re.IGNORECASE)
    if match:
        return pa.list_(parse_type(match.group(1)))
    if lower == "date":
        return pa.date32()
    try:
        return pa.type_for_alias(lower)
    except ValueError:
        raise SchemaSyntaxError(
            f"unknown type {text!r}; use a pyarrow type name such as int64, float64, bool, string, "
            "binary, date32, timestamp[us,UTC], decimal(12,2) or list<string>"
        ) from None


def format_schema(schema: pa.Schema) -> str:
    """The schema as an aligned table, one column per line, as the CLI prints it."""
    width = max(len(name) for name in schema.names)
    return "\n".join(f"  {f.name:<{width}}  {f.type}{'' if f.nullable else '  not null'}" for f in schema)


def schema_to_text(schema: pa.Schema) -> str:
    """The one-line text form of ``schema``, which :func:`parse_schema` reads back.

    >>> schema_to_text(parse_schema("id:int64!,ts:timestamp[us,UTC]"))
    'id:int64!,ts:timestamp[us, tz=UTC]'
    """
    return ",".join(f"{f.name}:{f.type}{'' if f.nullable else '!'}" for f in schema)


def _checked(fields: List[pa.Field]) -> pa.Schema:
    names = [f.name for f in fields]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SchemaSyntaxError(f"the schema repeats column(s) {repeated}")
    return pa.schema(fields)


def _split_top_level(text: str, separator: str) -> List[str]:
    """Split on ``separator`` outside (), [] and <>, so that decimal(12,2) stays whole."""
    parts: List[str] = []
    depth, start = 0, 0
    pairs: Tuple[str, str] = ("([<", ")]>")
    for i, char in enumerate(text):
        if char in pairs[0]:
            depth += 1
        elif char in pairs[1]:
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
