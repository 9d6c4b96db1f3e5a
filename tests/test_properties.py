"""Property-based round trips (hypothesis): random schemas over the supported types, random rows.

* Parquet: encoded by the package's encoder, read back by pyarrow and by DuckDB: equal.
* CSV and text (with several option sets): loaded into the real PostgreSQL with ``COPY ... FROM``
  and the same options: equal.
* CSV and text with any options PostgreSQL accepts (delimiter, quote, escape, NULL string,
  header) and values made of those characters: loaded back equal, and byte for byte what
  PostgreSQL's ``COPY ... TO`` writes; options it accepts but whose files it cannot load back
  are refused, and PostgreSQL's own round trip shows why.
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
import json
import math
import re
import string
import uuid

import duckdb
import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from psycopg import sql

from beam_s3_sink import CsvFormat, ParquetFormat, TextFormat
from beam_s3_sink.formats.parquet import to_file_table
from beam_s3_sink.schema import rows_to_batch
from helpers import data_keys, list_objects, pending_uploads, read_parquet, run_copy

UTC = datetime.timezone.utc
EXAMPLES = {"parquet": 200, "pg": 150, "pipeline": 3, "refused": 50, "csv_options": 250, "text_options": 100}
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


# CSV and text: every option combination PostgreSQL accepts ----------------------------------

# Delimiters, quotes, escapes and NULL strings are drawn from these (ASCII punctuation, blank,
# some letters and digits), so that the combinations vary and the options collide with values.
OPTION_CHARS = string.punctuation + " \t" + "aeEfNntxX019"
# PostgreSQL refuses these as a text-format delimiter (ProcessCopyOptions).
PG_TEXT_BAD_DELIMITERS = "\\.abcdefghijklmnopqrstuvwxyz0123456789"
# Column kinds: Arrow type, PostgreSQL type, the SELECT expression that gives the value back.
KINDS = {
    "text": (pa.string(), "text", "{}"),
    "bigint": (pa.int64(), "bigint", "{}"),
    "bool": (pa.bool_(), "boolean", "{}"),
    "json": (pa.json_(pa.string()), "json", "{}::text"),
    "array": (pa.list_(pa.string()), "text[]", "{}"),
}


def hostile_text(options: list) -> st.SearchStrategy:
    """Text made of the options themselves, CR/LF, \\., backslashes, quotes and non-ASCII."""
    pieces = [
        "",
        "\\",
        "\\.",
        ".",
        "\\N",
        "NULL",
        "\r",
        "\n",
        "\r\n",
        "é",
        "🙂",
        " ",
        "\t",
        '"',
        "'",
        ",",
        "{",
        "}",
        "x",
    ]
    pieces += [c for c in options if c]
    pieces += [n + "x" for n in options] + ["x" + n for n in options] + [n + n for n in options]
    chars = st.characters(exclude_categories=("Cs",), exclude_characters=("\x00",))
    return st.one_of(
        st.sampled_from(pieces),
        st.lists(st.sampled_from(pieces) | st.text(chars, max_size=2), max_size=4).map("".join),
    )


def kind_values(kind: str, texts: st.SearchStrategy) -> st.SearchStrategy:
    if kind == "text":
        values = texts
    elif kind == "bigint":
        values = st.sampled_from([0, 1, -1, 10, 19]) | int_range(64, True)
    elif kind == "bool":
        values = st.booleans()
    elif kind == "json":
        doc = texts | st.integers() | st.lists(texts, max_size=2) | st.dictionaries(texts, texts, max_size=2)
        values = st.builds(
            lambda d, indent: json.dumps(d, ensure_ascii=False, indent=indent), doc, st.sampled_from([None, 1])
        )
    else:
        values = st.lists(st.none() | texts, max_size=3)
    return st.none() | values


@st.composite
def hostile_table(draw, options: list):
    """1..4 columns of distinct kinds, named by hostile text (for the header), and 0..6 rows."""
    texts = hostile_text(options)
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4, unique=True))
    names = []
    for i in range(len(kinds)):
        name = draw(texts)
        usable = name != "" and len(name.encode()) <= 63 and name not in names  # a PostgreSQL column name
        names.append(name if usable else f"c{i}")
    rows = draw(st.lists(st.tuples(*[kind_values(k, texts) for k in kinds]), min_size=1, max_size=6))
    return list(zip(names, kinds)), rows


def null_strings(options: list, forbidden: str) -> st.SearchStrategy:
    """NULL strings PostgreSQL accepts: without the forbidden characters (the delimiter, the CSV
    quote), CR or LF; among them \\. and ones with backslashes."""
    common = ["", "\\N", "NULL", "N", "-", "1", "t", "{}", "\\", "é", "\\\\", "\\.", "x\\", "\\t"]
    candidates = st.sampled_from(common + [c for c in options if c] + [c + c for c in options if c])
    return st.one_of(candidates, st.text(st.sampled_from(OPTION_CHARS + "\\é"), max_size=3)).filter(
        lambda null: not any(c in null for c in forbidden + "\r\n")
    )


@st.composite
def csv_options(draw):
    """CsvFormat keyword arguments PostgreSQL accepts (an option left out: both defaults)."""
    kwargs = {}
    if draw(st.booleans()):
        kwargs["delimiter"] = draw(st.sampled_from(OPTION_CHARS))
    if draw(st.integers(0, 3)):
        kwargs["quote"] = draw(st.sampled_from(OPTION_CHARS).filter(lambda c: c != kwargs.get("delimiter", ",")))
    elif kwargs.get("delimiter") == '"':
        kwargs["quote"] = "'"
    quote = kwargs.get("quote", '"')
    escape = draw(st.sampled_from([None, None, quote, "\\", "\r", "\n"]) | st.sampled_from(OPTION_CHARS))
    if escape is not None:
        kwargs["escape"] = escape
    forbidden = kwargs.get("delimiter", ",") + quote
    if draw(st.integers(0, 3)):
        kwargs["null"] = draw(null_strings([kwargs.get("delimiter", ","), quote, escape or quote], forbidden))
    kwargs["header"] = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        kwargs["force_quote"] = True
    return kwargs


@st.composite
def text_options(draw):
    """TextFormat keyword arguments PostgreSQL accepts."""
    kwargs = {}
    if draw(st.integers(0, 3)):
        kwargs["delimiter"] = draw(st.sampled_from(OPTION_CHARS).filter(lambda c: c not in PG_TEXT_BAD_DELIMITERS))
    if draw(st.integers(0, 3)):
        kwargs["null"] = draw(null_strings([kwargs.get("delimiter", "\t")], kwargs.get("delimiter", "\t")))
    return kwargs


def copy_options(kind: str, kwargs: dict, direction: str) -> sql.Composable:
    """The COPY options for a CsvFormat/TextFormat's keyword arguments (only those given)."""
    parts = [sql.SQL(f"FORMAT {kind}")]
    for option in ("delimiter", "quote", "escape", "null"):
        if option in kwargs:
            parts.append(sql.SQL(option.upper() + " ") + sql.Literal(kwargs[option]))
    if kwargs.get("header"):
        parts.append(sql.SQL("HEADER MATCH" if direction == "from" else "HEADER"))
    if kwargs.get("force_quote") and direction == "to":  # COPY TO only
        parts.append(sql.SQL("FORCE_QUOTE *"))
    return sql.SQL(", ").join(parts)


class PgTables:
    """Two empty tables with the given columns: ``a`` for PostgreSQL's own COPY TO of inserted
    rows, ``b`` for COPY FROM of a file; COPY options from a CsvFormat/TextFormat's arguments."""

    def __init__(self, pg, columns: list, kind: str, kwargs: dict) -> None:
        self.pg, self.columns = pg, columns
        self.to_options, self.from_options = (copy_options(kind, kwargs, d) for d in ("to", "from"))
        self.names = [sql.Identifier(f"t_{uuid.uuid4().hex[:10]}") for _ in "ab"]
        defs = sql.SQL(", ").join(sql.SQL("{} " + KINDS[k][1]).format(sql.Identifier(n)) for n, k in columns)
        for name in self.names:
            pg.execute(sql.SQL("CREATE TEMP TABLE {} ({})").format(name, defs))

    def __enter__(self) -> "PgTables":
        return self

    def __exit__(self, *exc) -> None:
        for name in self.names:
            self.pg.execute(sql.SQL("DROP TABLE {}").format(name))

    def load(self, data: bytes):
        """COPY ``data`` into ``b`` and SELECT it back (sorted), or the error PostgreSQL gives."""
        table = self.names[1]
        exprs = sql.SQL(", ").join(sql.SQL(KINDS[k][2]).format(sql.Identifier(n)) for n, k in self.columns)
        try:
            with self.pg.cursor() as cur:
                cur.execute(sql.SQL("TRUNCATE {}").format(table))
                with cur.copy(sql.SQL("COPY {} FROM STDIN ({})").format(table, self.from_options)) as copy:
                    copy.write(data)
                return sorted(cur.execute(sql.SQL("SELECT {} FROM {}").format(exprs, table)).fetchall(), key=repr)
        except psycopg.Error as exc:
            return f"PostgreSQL refused the file: {exc}"

    def copy_to(self, rows: list) -> bytes:
        """What PostgreSQL's own COPY ... TO writes for ``rows``."""
        table = self.names[0]
        casts = sql.SQL(", ").join(sql.SQL("%s::" + KINDS[k][1]) for _, k in self.columns)
        with self.pg.cursor() as cur:
            cur.execute(sql.SQL("TRUNCATE {}").format(table))
            cur.executemany(sql.SQL("INSERT INTO {} VALUES ({})").format(table, casts), rows)
            with cur.copy(sql.SQL("COPY {} TO STDOUT ({})").format(table, self.to_options)) as copy:
                return b"".join(bytes(chunk) for chunk in copy)

    def own_round_trip_loses(self, rows: list) -> bool:
        """Whether PostgreSQL's own COPY TO then COPY FROM fails to give ``rows`` back."""
        return self.load(self.copy_to(rows)) != sorted(rows, key=repr)


def check_options_round_trip(pg, fmt_class, kind: str, kwargs: dict, table) -> None:
    """Write with the sink, load with COPY FROM: the rows come back, and the file is what
    PostgreSQL's COPY TO writes. Where the sink refuses, PostgreSQL's own round trip loses data."""
    columns, rows = table
    try:
        fmt = fmt_class(**kwargs)
    except ValueError as exc:
        # Options PostgreSQL takes but cannot read back (a NULL string \. or, in the text
        # format, one with the pair \. or a lone backslash at its end): its own file with a NULL
        # in one column does not load back.
        assert re.search(r"null .* must not (contain \\\.|end in a lone backslash)|null '\\\\\.' is", str(exc)), exc
        with PgTables(pg, [("c", "text")], kind, kwargs) as one:
            assert one.own_round_trip_loses([(None,)])
        return
    schema = pa.schema([(n, KINDS[k][0]) for n, k in columns])
    with PgTables(pg, columns, kind, kwargs) as tables:
        try:
            data = encode(fmt, schema, [dict(zip(schema.names, r)) for r in rows])
        except ValueError as exc:
            # A value the text format writes as its NULL string: COPY FROM would load it as NULL.
            assert kind == "text" and "the NULL string of this text format" in str(exc), exc
            assert tables.own_round_trip_loses(rows)
            return
        assert tables.load(data) == sorted(rows, key=repr)
        theirs = tables.copy_to(rows)
        if b"\n\\.\n" in b"\n" + theirs:
            # PostgreSQL's own file has a line \. (delimiter '.', two columns, a row ('\\', '')
            # or ('\\', NULL)), where its COPY FROM stops: the sink quotes one of the two fields.
            assert fmt.delimiter == "." and len(columns) == 2 and tables.own_round_trip_loses(rows)
        else:
            assert data == theirs


@settings(max_examples=EXAMPLES["csv_options"], **SETTINGS)
@given(data=st.data())
def test_csv_with_any_options_postgresql_accepts_loads_back_exactly(pg, data):
    kwargs = data.draw(csv_options(), "options")
    quote = kwargs.get("quote", '"')
    effective = [kwargs.get("delimiter", ","), quote, kwargs.get("escape", quote), kwargs.get("null", "")]
    check_options_round_trip(pg, CsvFormat, "csv", kwargs, data.draw(hostile_table(effective), "table"))


@settings(max_examples=EXAMPLES["text_options"], **SETTINGS)
@given(data=st.data())
def test_text_with_any_options_postgresql_accepts_loads_back_exactly(pg, data):
    kwargs = data.draw(text_options(), "options")
    effective = [kwargs.get("delimiter", "\t"), kwargs.get("null", "\\N")]
    check_options_round_trip(pg, TextFormat, "text", kwargs, data.draw(hostile_table(effective), "table"))


def test_issue_28_a_single_quote_keeps_double_quotes_as_they_are(pg):
    """CsvFormat(quote="'") kept escape='"': a"b,c was written 'a""b,c' and PostgreSQL, whose
    ESCAPE defaults to the QUOTE, loaded a""b,c. Now the escape is the quote."""
    schema = pa.schema([("s", pa.string())])
    data = encode(CsvFormat(quote="'"), schema, [{"s": 'a"b,c'}, {"s": "it's"}])
    assert data == b"'a\"b,c'\n'it''s'\n"
    pg.execute("CREATE TEMP TABLE issue28a (s text)")
    try:
        with pg.cursor() as cur:
            with cur.copy("COPY issue28a FROM STDIN (FORMAT csv, QUOTE '''')") as copy:
                copy.write(data)
            assert sorted(r[0] for r in cur.execute("SELECT s FROM issue28a")) == ['a"b,c', "it's"]
    finally:
        pg.execute("DROP TABLE issue28a")


def test_issue_28_a_backtick_quote_with_json_loads(pg):
    """CsvFormat(delimiter=";", quote="`", header=True) wrote {"s":"ab`c"} so that PostgreSQL
    refused the file ("unterminated CSV quoted field")."""
    schema = pa.schema([("id", pa.int64()), ("doc", pa.json_(pa.string()))])
    rows = [{"id": 1, "doc": '{"s":"ab`c"}'}, {"id": 2, "doc": '{"q":"say \\"hi\\"; ok"}'}, {"id": 3, "doc": None}]
    data = encode(CsvFormat(delimiter=";", quote="`", header=True), schema, rows)
    pg.execute("CREATE TEMP TABLE issue28b (id bigint, doc json)")
    try:
        with pg.cursor() as cur:
            with cur.copy("COPY issue28b FROM STDIN (FORMAT csv, DELIMITER ';', QUOTE '`', HEADER)") as copy:
                copy.write(data)
            loaded = cur.execute("SELECT id, doc::text FROM issue28b ORDER BY id").fetchall()
    finally:
        pg.execute("DROP TABLE issue28b")
    assert loaded == [(r["id"], r["doc"]) for r in rows]


# Examples hypothesis found (against the code before issue 28's fix) and the sink's departures
# from PostgreSQL's COPY TO, checked as the property test checks them.
@pytest.mark.parametrize(
    "kind, kwargs, columns, rows",
    [
        # a NULL string \. : PostgreSQL writes a one-column NULL as \., its end-of-data marker
        ("csv", {"null": "\\.", "force_quote": True}, [("c0", "array")], [(None,)]),
        # an escape CR (or LF) is fine: it only appears in quoted fields
        ("csv", {"escape": "\r", "force_quote": True}, [("c0", "text")], [("a\rb",), ('q"\r\n',), (None,)]),
        # a quote that array text holds, escaped by itself
        ("csv", {"quote": "{", "force_quote": True}, [("c0", "array")], [([],), (["{a}", None],)]),
        ("csv", {"quote": "{"}, [("c0", "array"), ("c1", "json")], [([], '{"{": [1]}'), (None, "{}")]),
        # delimiter '.' and two columns: PostgreSQL writes the row ('\', NULL) as the line \.
        ("csv", {"delimiter": "."}, [("a", "text"), ("b", "text")], [("\\", None), ("\\", "."), ("x", None)]),
        ("csv", {"delimiter": ".", "null": "N"}, [("a", "text"), ("b", "text")], [("\\", ""), (None, "")]),
        ("csv", {"delimiter": ".", "null": "\\"}, [("a", "text"), ("b", "text")], [(None, ""), ("\\", "")]),
        # the text format: a tab value is written \t, a NULL string \t would load it as NULL
        ("text", {"delimiter": "|", "null": "\\t"}, [("s", "text")], [("\t",), (None,)]),
        ("text", {"delimiter": "|", "null": "\\t"}, [("s", "text")], [("\\t",), (None,)]),
        # NULL strings the text format cannot read back
        ("text", {"null": "x\\"}, [("s", "text")], [(None,)]),
        ("text", {"null": "N\\.A"}, [("s", "text")], [(None,)]),
        # an upper-case delimiter, which PostgreSQL takes in the text format
        ("text", {"delimiter": "X", "null": "N"}, [("s", "text"), ("n", "bigint")], [("aXb", None), (None, 1)]),
    ],
)
def test_found_option_combinations(pg, kind, kwargs, columns, rows):
    check_options_round_trip(pg, CsvFormat if kind == "csv" else TextFormat, kind, kwargs, (columns, rows))


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
