"""Property-based round trips (hypothesis): random schemas over the supported types, random rows.

* Parquet: encoded by the package's encoder, read back by pyarrow and by DuckDB: equal.
* CSV and text (with several option sets): loaded into the real PostgreSQL with ``COPY ... FROM``
  and the same options: equal.
* A value the format cannot hold (NUL in PostgreSQL text) fails with an error naming the column,
  and, in a full pipeline copy, leaves nothing visible.

Most examples run at the encoder level (no pipeline); a few are full pipeline copies to moto.
Settings are fixed (``derandomize=True``, no example database), so CI runs the same examples
every time; failing examples that hypothesis found are kept below as regular tests.
"""

from __future__ import annotations

import datetime
import decimal
import io
import math
import uuid

import duckdb
import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from beam_s3_sink import CsvFormat, ParquetFormat, TextFormat
from beam_s3_sink.formats.parquet import to_file_table
from beam_s3_sink.schema import rows_to_batch
from helpers import data_keys, list_objects, pending_uploads, read_parquet, run_copy

UTC = datetime.timezone.utc
EXAMPLES = {"parquet": 200, "pg": 150, "pipeline": 3, "refused": 50}
SETTINGS = dict(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

# Characters that mean something to one of the formats, and markers, mixed into random text.
SPECIAL = [
    "",
    "\\",
    "\\N",
    "NULL",
    "null",
    '"',
    "'",
    ",",
    ";",
    "|",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\\.",
    "{",
    "}",
    "{a,b}",
    " ",
    "é",
    "🙂",
    "\u2028",
    "\ufeff",
    "<null>",
    "\x01",
    "\x7f",
]


def text(allow_nul: bool) -> st.SearchStrategy:
    chars = st.characters(exclude_categories=("Cs",), exclude_characters=() if allow_nul else ("\x00",))
    return st.one_of(
        st.sampled_from(SPECIAL),
        st.text(chars, max_size=12),
        st.lists(st.sampled_from(SPECIAL) | st.text(chars, max_size=3), max_size=4).map("".join),
    )


def decimals(precision: int, scale: int) -> st.SearchStrategy:
    """Every decimal(precision, scale), the extremes included (as unscaled integers: st.decimals
    with ``places`` rounds up past the largest one)."""
    most = 10**precision - 1
    return st.one_of(st.sampled_from([most, -most, 0, 1, -1]), st.integers(-most, most)).map(
        lambda n: decimal.Decimal(n).scaleb(-scale, decimal.Context(prec=precision + 2))
    )


def int_range(bits: int, signed: bool) -> st.SearchStrategy:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else st.integers(0, 2**bits - 1)


# Arrow type -> (values strategy, PostgreSQL type or None when CSV/text cannot hold it)
SCALARS = {
    "int8": (pa.int8(), int_range(8, True), "smallint"),
    "int16": (pa.int16(), int_range(16, True), "smallint"),
    "int32": (pa.int32(), int_range(32, True), "integer"),
    "int64": (pa.int64(), int_range(64, True), "bigint"),
    "uint8": (pa.uint8(), int_range(8, False), "smallint"),
    "uint32": (pa.uint32(), int_range(32, False), "bigint"),
    "uint64": (pa.uint64(), int_range(64, False), "numeric"),
    "float32": (pa.float32(), st.floats(width=32), "real"),
    "float64": (pa.float64(), st.floats(), "double precision"),
    "bool": (pa.bool_(), st.booleans(), "boolean"),
    "string": (pa.string(), None, "text"),
    "binary": (pa.binary(), st.binary(max_size=12), "bytea"),
    "date32": (pa.date32(), st.dates(), "date"),
    "time64": (pa.time64("us"), st.times(), "time"),
    "timestamp": (pa.timestamp("us"), st.datetimes(), "timestamp"),
    "timestamptz": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC)), "timestamptz"),
    "decimal": (pa.decimal128(12, 3), decimals(12, 3), "numeric(12,3)"),
    "decimal38": (pa.decimal128(38, 10), decimals(38, 10), "numeric(38,10)"),
}


def scalar(name: str, allow_nul: bool):
    typ, values, pg = SCALARS[name]
    return typ, (text(allow_nul) if values is None else values), pg


@st.composite
def columns(draw, nested: bool, allow_nul: bool):
    """One column: (Arrow type, strategy of its values with None, PostgreSQL type)."""
    kind = draw(st.sampled_from(["scalar"] * 4 + (["list", "struct"] if nested else ["list"])))
    if kind == "scalar":
        typ, values, pg = scalar(draw(st.sampled_from(sorted(SCALARS))), allow_nul)
        return typ, st.none() | values, pg
    if kind == "list":
        names = sorted(SCALARS) if nested else ["int64", "string", "float64", "bool", "date32", "decimal"]
        typ, values, pg = scalar(draw(st.sampled_from(names)), allow_nul)
        return pa.list_(typ), st.none() | st.lists(st.none() | values, max_size=4), pg + "[]"
    fields = draw(st.lists(st.sampled_from(sorted(SCALARS)), min_size=1, max_size=3))
    parts = [(f"f{i}",) + scalar(n, allow_nul)[:2] for i, n in enumerate(fields)]
    typ = pa.struct([(n, t) for n, t, _ in parts])
    return typ, st.none() | st.fixed_dictionaries({n: st.none() | v for n, _, v in parts}), None


@st.composite
def tables(draw, nested: bool, allow_nul: bool = True, pg_only: bool = False):
    """A schema of 1..5 columns and 0..25 rows."""
    cols = draw(st.lists(columns(nested, allow_nul), min_size=1, max_size=5))
    if pg_only:
        cols = [c for c in cols if c[2] is not None] or [(pa.int64(), st.none() | int_range(64, True), "bigint")]
    schema = pa.schema([(f"c{i}", t) for i, (t, _, _) in enumerate(cols)])
    row = st.fixed_dictionaries({f"c{i}": v for i, (_, v, _) in enumerate(cols)})
    return schema, [c[2] for c in cols], draw(st.lists(row, max_size=25))


def same(a, b) -> bool:
    """Equality with NaN equal to NaN, through lists, dicts and tuples."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def canon(value):
    """A form whose repr does not depend on dict key order (for sorting rows)."""
    if isinstance(value, dict):
        return tuple(sorted((k, canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    return value


def encode(fmt, schema: pa.Schema, rows: list) -> bytes:
    out = io.BytesIO()
    encoder = fmt.open(schema, out, 2**62)
    if rows:
        assert encoder.write(rows_to_batch(rows, schema)) is None
    encoder.close()
    return out.getvalue()


# Parquet: pyarrow and DuckDB ------------------------------------------------------------------


@settings(max_examples=EXAMPLES["parquet"], **SETTINGS)
@given(tables(nested=True))
def test_parquet_round_trip_pyarrow_and_duckdb(tmp_path_factory, table):
    schema, _, rows = table
    # The default ("compatible") profile writes what every reader opens: exactly what
    # to_file_table makes of the rows (an unsigned integer as the next wider signed one, ...).
    default = ParquetFormat()
    written = pq.read_table(io.BytesIO(encode(default, schema, rows)))
    file_schema = default.file_schema(schema)
    assert written.schema.equals(file_schema), (written.schema, file_schema)
    assert same(written.to_pylist(), to_file_table(pa.Table.from_pylist(rows, schema=schema), file_schema).to_pylist())
    # The exact profile keeps every logical type: read back equal by pyarrow and DuckDB.
    data = encode(ParquetFormat(types="exact"), schema, rows)
    back = pq.read_table(io.BytesIO(data))
    assert back.schema.equals(schema), (back.schema, schema)
    assert same(back.to_pylist(), rows)
    path = tmp_path_factory.mktemp("pq") / "f.parquet"
    path.write_bytes(data)
    duck = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetch_arrow_table().to_pylist()
    assert same(
        [{k: _duck_norm(v) for k, v in r.items()} for r in duck],
        [{k: _duck_norm(v) for k, v in r.items()} for r in rows],
    )


def _duck_norm(value):
    """DuckDB hands back the same values; times and timestamps with a zone as UTC instants."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, dict):
        return {k: _duck_norm(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_duck_norm(v) for v in value]
    return value


# CSV and text: PostgreSQL's COPY ... FROM -----------------------------------------------------

PG_FORMATS = [
    (CsvFormat(), "FORMAT csv"),
    (
        CsvFormat(header=True, delimiter=";", null="NULL", quote="'", escape="\\"),
        "FORMAT csv, HEADER true, DELIMITER ';', NULL 'NULL', QUOTE '''', ESCAPE '\\'",
    ),
    (CsvFormat(delimiter="|", null="\\N", force_quote=True), "FORMAT csv, DELIMITER '|', NULL '\\N'"),
    (TextFormat(), "FORMAT text"),
    (TextFormat(delimiter="|", null="<null>"), "FORMAT text, DELIMITER '|', NULL '<null>'"),
]


@pytest.fixture(scope="module")
def pg(postgres):
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn


def _pg_norm(value, typ: pa.DataType):
    if value is None:
        return None
    if pa.types.is_list(typ):
        return [_pg_norm(v, typ.value_type) for v in value]
    if pa.types.is_integer(typ) or pa.types.is_decimal(typ):
        return decimal.Decimal(value)
    if isinstance(value, memoryview):
        return bytes(value)
    if pa.types.is_float32(typ):  # psycopg reads real as the double of its shortest text
        return float(np.float32(value))
    return value


@settings(max_examples=EXAMPLES["pg"], **SETTINGS)
@given(table=tables(nested=False, allow_nul=False, pg_only=True), which=st.integers(0, len(PG_FORMATS) - 1))
def test_csv_and_text_load_into_postgresql_equal(pg, table, which):
    schema, pg_types, rows = table
    fmt, options = PG_FORMATS[which]
    if (
        isinstance(fmt, TextFormat)
        and "\\" not in fmt.null
        and any(r[f.name] == fmt.null for r in rows for f in schema if pa.types.is_string(f.type))
    ):
        with pytest.raises(ValueError, match="the NULL string of this text format"):
            encode(fmt, schema, rows)  # it would load as NULL: refused (see the test below)
        return
    data = encode(fmt, schema, rows)
    name = f"t_{uuid.uuid4().hex[:10]}"
    columns = ", ".join(f"c{i} {t}" for i, t in enumerate(pg_types))
    pg.execute(f"CREATE TEMP TABLE {name} ({columns})")
    try:
        with pg.cursor() as cur:
            with cur.copy(f"COPY {name} FROM STDIN WITH ({options})") as copy:
                copy.write(data)
            loaded = cur.execute(f"SELECT * FROM {name}").fetchall()
    finally:
        pg.execute(f"DROP TABLE {name}")
    fields = list(schema)
    got = sorted((tuple(_pg_norm(v, f.type) for v, f in zip(r, fields)) for r in loaded), key=repr)
    want = sorted((tuple(_pg_norm(r[f.name], f.type) for f in fields) for r in rows), key=repr)
    assert len(got) == len(want) and all(same(list(g), list(w)) for g, w in zip(got, want)), (got, want)


# A value the format cannot hold -------------------------------------------------------------


def test_found_text_value_equal_to_the_null_string_is_refused(pg):
    """Found by hypothesis (600 random examples): with TextFormat(null="<null>") the text value
    "<null>" was written as it is, and COPY ... FROM loaded it as NULL. Now it is refused, naming
    the column; with the default NULL string (\\N, which escaping keeps apart) it loads back."""
    schema = pa.schema([("c0", pa.string()), ("c1", pa.binary())])
    rows = [{"c0": "<null>", "c1": None}]
    with pytest.raises(ValueError, match="column 'c0': a value is the text '<null>'"):
        encode(TextFormat(delimiter="|", null="<null>"), schema, rows)
    with pytest.raises(ValueError, match="column 'flag'"):
        encode(TextFormat(null="t"), pa.schema([("flag", pa.bool_())]), [{"flag": True}])
    data = encode(TextFormat(), schema, rows + [{"c0": "\\N", "c1": b"x"}])
    pg.execute("CREATE TEMP TABLE found_null (c0 text, c1 bytea)")
    with pg.cursor() as cur:
        with cur.copy("COPY found_null FROM STDIN WITH (FORMAT text)") as copy:
            copy.write(data)
        loaded = sorted(cur.execute("SELECT c0, c1 FROM found_null").fetchall(), key=repr)
    pg.execute("DROP TABLE found_null")
    assert loaded == sorted([("<null>", None), ("\\N", b"x")], key=repr)


@settings(max_examples=EXAMPLES["refused"], **SETTINGS)
@given(before=text(allow_nul=False), after=text(allow_nul=False), which=st.integers(0, len(PG_FORMATS) - 1))
def test_nul_in_text_is_refused_naming_the_column(before, after, which):
    fmt, _ = PG_FORMATS[which]
    schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
    with pytest.raises(ValueError, match="column 'note'.*NUL"):
        encode(fmt, schema, [{"id": 1, "note": "fine"}, {"id": 2, "note": before + "\x00" + after}])


# A few full pipeline copies -------------------------------------------------------------------


@settings(max_examples=EXAMPLES["pipeline"], phases=[Phase.explicit, Phase.reuse, Phase.generate], **SETTINGS)
@given(table=tables(nested=True))
def test_pipeline_parquet_copy_reads_back_equal(s3_config, s3_client, table):
    schema, _, rows = table
    bucket = f"prop-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    result = run_copy(rows, uri=f"s3://{bucket}/p", schema=schema, s3=s3_config, format="parquet")
    assert result.ok and result.rows == len(rows)
    back = [r for key in data_keys(s3_client, bucket, "p") for r in read_parquet(s3_client, bucket, key).to_pylist()]

    def as_tuples(rs):
        return sorted((tuple(r[n] for n in schema.names) for r in rs), key=lambda t: repr(canon(t)))

    assert same(as_tuples(back), as_tuples(rows))


def test_pipeline_value_the_format_cannot_hold_leaves_nothing(s3_config, s3_client, bucket):
    schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
    rows = [{"id": i, "note": "x" if i != 7 else "a\x00b"} for i in range(20)]
    result = run_copy(rows, uri=f"s3://{bucket}/bad", schema=schema, s3=s3_config, format="csv", fail_on_error=False)
    assert not result.ok and "column 'note'" in result.error and "NUL" in result.error
    assert data_keys(s3_client, bucket, "bad") == [] and pending_uploads(s3_client, bucket) == []
    assert all(k.endswith("INCOMPLETE") for k in list_objects(s3_client, bucket, "bad/"))
