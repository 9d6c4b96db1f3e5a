"""CSV and text output checked against a real PostgreSQL server.

For a corpus of hostile values of every type the formats write, each test copies the rows to
S3, then in PostgreSQL: loads every data file the sink wrote with ``COPY ... FROM`` and the
same options, compares the loaded table with the source values (inserted independently, by
psycopg's binary parameters) with ``EXCEPT ALL`` both ways, and compares the sink's lines with
the lines of PostgreSQL's own ``COPY src TO STDOUT`` (sorted: row order is not kept).
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, List, Sequence, Tuple, Union

import numpy as np
import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from beam_s3_sink import CopyToS3, CsvFormat, TextFormat
from beam_s3_sink.formats.postgres_values import render_column
from helpers import data_keys, get_bytes, run_copy

D = decimal.Decimal
US = 10**6
DAY_US = 86400 * US
UTC = datetime.timezone.utc

# every special character of the formats and of array_out, alone and together
SPECIAL_TEXT = (
    [
        "",
        None,
        "\\",
        "\\.",
        ".",
        "\\N",
        "N",
        "NULL",
        "null",
        "Null",
        '"',
        "'",
        ",",
        ";",
        "|",
        "%",
        "!",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\n\\.\n",
        "\\.\n",
        " ",
        "  lead",
        "trail  ",
        "a,b",
        'a"b',
        '""',
        "{",
        "}",
        "{a,b}",
        "[1]",
        "é",
        "日本語",
        "🙂",
        "\u2028",
        "\ufeff",
        "'quoted'",
        "x\\y\\\\z",
        'a\\"b',
    ]
    + [chr(i) for i in range(1, 32)]
    + ["\x7f", "".join(chr(i) for i in range(1, 128))]
)

FLOAT64 = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    float("nan"),
    float("inf"),
    float("-inf"),
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    2.225073858507201e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1e15,
    1e15 - 1,
    1e15 + 0.5,
    999999999999999.9,
    1e16,
    1e17,
    1.5e16,
    123456789012345.67,
    0.1,
    1 / 3,
    1e-4,
    1e-5,
    0.00012345,
    1.2345e-5,
    1e21,
    1e22,
    2.0**53,
    2.0**53 + 2,
    100.0,
    1e100,
    None,
]
FLOAT32 = [
    float(np.float32(v))
    for v in (
        0.0,
        -0.0,
        1.0,
        0.1,
        1 / 3,
        1e6,
        999999.0,
        1234567.0,
        123456.7,
        16777216.0,
        1e-4,
        1e-5,
        1.4e-45,
        1.17549435e-38,
        3.4028235e38,
        -3.4028235e38,
        1e15,
        1e16,
        float("nan"),
        float("inf"),
        float("-inf"),
    )
] + [None]


@dataclass
class Column:
    """One corpus column: its Arrow type, its PostgreSQL type, values, and how psycopg inserts them."""

    name: str
    arrow: pa.DataType
    pg: str
    values: list
    expr: str = "%b"  # SQL for one value, before the cast
    params: Callable[[Any], tuple] = lambda v: (v,)  # the psycopg parameters of one value
    text: bool = False  # compare as text (json has no equality)


def _ts(pg: str, per_second: int) -> Tuple[str, Callable[[Any], tuple]]:
    factor = US // per_second if per_second <= US else None

    def params(v):
        if v is None:
            return (None, None)
        micros = v * factor if factor else v // (per_second // US)
        return divmod(micros, DAY_US)

    origin = "'1970-01-01 00:00:00+00'::timestamptz" if pg == "timestamptz" else "'1970-01-01'::timestamp"
    return f"{origin} + %b::bigint * interval '1 day' + %b::bigint * interval '1 microsecond'", params


def _ts_values(per_second: int) -> list:
    if per_second == 10**9:  # int64 nanoseconds: 1677..2262, whole microseconds for PostgreSQL
        return [
            0,
            -1000,
            1000,
            1_500_000_000,
            9_223_372_036_854_775_000,
            -9_223_372_036_854_775_000,
            1_700_000_000_123_456_000,
            None,
        ]

    def scale(micros):
        return micros * per_second // US

    days = [0, -1, 1, -719162, -719163, -719528, -2_000_000, 2_932_896, 72_300_000]
    out = [scale(d * DAY_US) for d in days] + [scale(d * DAY_US + DAY_US - US) for d in days]
    out += [scale(d * DAY_US + 12 * 3600 * US + US // 2) for d in days if per_second >= 1000]
    out += [scale(d * DAY_US + 123_456) for d in days if per_second >= US]
    return out + [-1, 1, None]


def corpus() -> List[Column]:
    ts = {}
    for unit, per in (("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)):
        ts[unit] = (_ts("timestamp", per), _ts("timestamptz", per), _ts_values(per))
    time_expr = "'00:00'::time + %b::bigint * interval '1 microsecond'"
    days = [0, -1, 1, -719162, -719163, -719528, -2_440_588, 2_932_896, 3_000_000, 2_000_000_000, None]
    cols = [
        Column("b", pa.bool_(), "boolean", [True, False, None]),
        Column("i8", pa.int8(), "smallint", [-128, 127, 0, None]),
        Column("i16", pa.int16(), "smallint", [-32768, 32767, -1, None]),
        Column("i32", pa.int32(), "integer", [-(2**31), 2**31 - 1, 0, None]),
        Column("i64", pa.int64(), "bigint", [-(2**63), 2**63 - 1, 42, None]),
        Column("u8", pa.uint8(), "smallint", [0, 255, None]),
        Column("u16", pa.uint16(), "integer", [0, 65535, None]),
        Column("u32", pa.uint32(), "bigint", [0, 2**32 - 1, None]),
        Column("u64", pa.uint64(), "numeric(20,0)", [0, 2**64 - 1, None]),
        Column("f64", pa.float64(), "double precision", FLOAT64),
        Column("f32", pa.float32(), "real", FLOAT32),
        Column("s", pa.string(), "text", SPECIAL_TEXT),
        Column("ls", pa.large_string(), "text", list(reversed(SPECIAL_TEXT))),
        Column("bin", pa.binary(), "bytea", [bytes(range(256)), b"", None] + [bytes([i]) for i in range(256)]),
        Column("lbin", pa.large_binary(), "bytea", [b"\\x00", b'"', None, b"\r\n\t\\."]),
        Column(
            "d38",
            pa.decimal128(38, 10),
            "numeric(38,10)",
            [D(0), D("-1.5"), D("9999999999999999999999999999.9999999999"), D("-0.0000000001"), None],
        ),
        Column("d5", pa.decimal128(5, 2), "numeric(5,2)", [D("1.50"), D("-999.99"), D("0.00"), None]),
        Column("dneg", pa.decimal128(5, -2), "numeric(5,-2)", [D("12300"), D("-9999900"), D(0), None]),
        Column(
            "d60",
            pa.decimal256(60, 20),
            "numeric(60,20)",
            [D("1" * 40 + "." + "2" * 20), D("-0.00000000000000000001"), None],
        ),
        Column("day", pa.date32(), "date", days, "'1970-01-01'::date + %b::integer"),
        Column(
            "day64",
            pa.date64(),
            "date",
            [None if d is None else d * 86_400_000 for d in days[:9]] + [None],
            "'1970-01-01'::date + %b::integer",
            lambda v: (None if v is None else v // 86_400_000,),
        ),
        Column(
            "t_s", pa.time32("s"), "time", [0, 86399, 3723, None], time_expr, lambda v: (None if v is None else v * US,)
        ),
        Column(
            "t_ms",
            pa.time32("ms"),
            "time",
            [0, 1, 86_399_999, 45_296_789, None],
            time_expr,
            lambda v: (None if v is None else v * 1000,),
        ),
        Column("t_us", pa.time64("us"), "time", [0, 1, 86_399_999_999, 43_200_000_000, 3_723_000_100, None], time_expr),
        Column(
            "t_ns",
            pa.time64("ns"),
            "time",
            [0, 1000, 86_399_999_999_000, 1_500_000, None],
            time_expr,
            lambda v: (None if v is None else v // 1000,),
        ),
        Column(
            "uid",
            pa.uuid(),
            "uuid",
            [
                uuid.UUID(int=0).bytes,
                uuid.UUID(int=2**128 - 1).bytes,
                uuid.UUID("12345678-9abc-def0-1234-56789abcdef0").bytes,
                None,
            ],
            params=lambda v: (None if v is None else uuid.UUID(bytes=v),),
        ),
        Column(
            "js",
            pa.json_(),
            "json",
            [
                '{"a": 1}',
                '[1,2,"x,y"]',
                '"q \\" and \\\\ b"',
                "null",
                ' {"k" : [true,false,null]} ',
                '{"t":"\\t\\n"}',
                '"日本"',
                None,
            ],
            text=True,
        ),
        Column("l_i64", pa.list_(pa.int64()), "bigint[]", [[1, None, 3], [], None, [None], [-(2**63)]]),
        Column("l_i16", pa.list_(pa.int16()), "smallint[]", [[1, -2], None]),
        Column(
            "l_s",
            pa.list_(pa.string()),
            "text[]",
            [
                [v for v in SPECIAL_TEXT if v is None or "\x00" not in v],
                [],
                None,
                ["NULL", None, ""],
                ["\\N"],
                [" "],
                ["{a,b}", "\\."],
            ],
        ),
        Column("l_ls", pa.large_list(pa.large_string()), "text[]", [["a", "b c"], None]),
        Column(
            "l_f64",
            pa.list_(pa.float64()),
            "double precision[]",
            [[float("nan"), float("inf"), float("-inf"), -0.0, 1e15, 5e-324, None, 0.1], None],
        ),
        Column("l_f32", pa.list_(pa.float32()), "real[]", [[1e6, float(np.float32(0.1)), None]]),
        Column("l_b", pa.list_(pa.bool_()), "boolean[]", [[True, False, None], []]),
        Column("l_bin", pa.list_(pa.binary()), "bytea[]", [[b"", b'\x00\\"', bytes(range(256)), None], None]),
        Column("l_dec", pa.list_(pa.decimal128(10, 2)), "numeric(10,2)[]", [[D("1.50"), None, D("-2.00")]]),
        Column(
            "l_day",
            pa.list_(pa.date32()),
            "date[]",
            [[datetime.date(1, 1, 1), datetime.date(9999, 12, 31), None, datetime.date(999, 1, 2)]],
        ),
        Column(
            "l_ts",
            pa.list_(pa.timestamp("us")),
            "timestamp[]",
            [[datetime.datetime(2024, 1, 2, 3, 4, 5, 600000), None, datetime.datetime(1, 1, 1)]],
        ),
        Column(
            "l_tsz",
            pa.list_(pa.timestamp("us", tz="UTC")),
            "timestamptz[]",
            [[datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC), None]],
        ),
        Column("l_t", pa.list_(pa.time64("us")), "time[]", [[datetime.time(1, 2, 3, 400), None]]),
        Column("l_fix", pa.list_(pa.int32(), 2), "integer[]", [[1, 2], [None, -3], None]),
        Column("l_2d", pa.list_(pa.list_(pa.int64())), "bigint[]", [[[1, 2], [3, None]], [[None]], [], None]),
        Column("l_2s", pa.list_(pa.list_(pa.string())), "text[]", [[["a b", ""], ["NULL", None]], [["}"]]]),
    ]
    for unit, (naive, aware, values) in ts.items():
        cols.append(Column(f"ts_{unit}", pa.timestamp(unit), "timestamp", values, *naive))
        cols.append(Column(f"tsz_{unit}", pa.timestamp(unit, tz="UTC"), "timestamptz", values, *aware))
    cols.append(Column("tsz_ny", pa.timestamp("us", tz="America/New_York"), "timestamptz", ts["us"][2], *ts["us"][1]))
    return cols


COLUMNS = corpus()
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)] + [pa.field(c.name, c.arrow) for c in COLUMNS])
ROW_COUNT = max(len(c.values) for c in COLUMNS)


def corpus_value(column: Column, row: int) -> Any:
    return column.values[row % len(column.values)]


def make_row(row: int) -> dict:
    out = {"id": row}
    for c in COLUMNS:
        out[c.name] = corpus_value(c, row)
    return out


# PostgreSQL side ---------------------------------------------------------------------------
def copy_options(fmt: Union[CsvFormat, TextFormat], direction: str) -> sql.Composable:
    """The ``COPY`` options that match ``fmt`` (``FORCE_QUOTE`` only ``TO``)."""
    opts: List[sql.Composable] = []
    if isinstance(fmt, CsvFormat):
        opts.append(sql.SQL("FORMAT csv"))
        if fmt.header:
            opts.append(sql.SQL("HEADER"))
        opts += [
            sql.SQL("QUOTE {}").format(sql.Literal(fmt.quote)),
            sql.SQL("ESCAPE {}").format(sql.Literal(fmt.escape)),
        ]
        if direction == "TO" and fmt.force_quote:
            opts.append(
                sql.SQL("FORCE_QUOTE *")
                if fmt.force_quote is True
                else sql.SQL("FORCE_QUOTE ({})").format(sql.SQL(", ").join(map(sql.Identifier, fmt.force_quote)))
            )
    else:
        opts.append(sql.SQL("FORMAT text"))
    opts += [
        sql.SQL("DELIMITER {}").format(sql.Literal(fmt.delimiter)),
        sql.SQL("NULL {}").format(sql.Literal(fmt.null)),
    ]
    return sql.SQL("({})").format(sql.SQL(", ").join(opts))


@dataclass
class PgTables:
    conn: psycopg.Connection
    src: str
    dst: str
    columns: Sequence[Column] = field(default_factory=list)

    def select_list(self) -> sql.Composable:
        items = [sql.Identifier("id")] + [
            sql.SQL("{}::text").format(sql.Identifier(c.name)) if c.text else sql.Identifier(c.name)
            for c in self.columns
        ]
        return sql.SQL(", ").join(items)

    def load(self, data: bytes, fmt) -> None:
        stmt = sql.SQL("COPY {} FROM STDIN {}").format(sql.Identifier(self.dst), copy_options(fmt, "FROM"))
        with self.conn.cursor().copy(stmt) as copy:
            copy.write(data)

    def differences(self) -> Tuple[list, list]:
        cur = self.conn.cursor()
        q = "SELECT {cols} FROM {a} EXCEPT ALL SELECT {cols} FROM {b} ORDER BY 1 LIMIT 5"
        missing = cur.execute(
            sql.SQL(q).format(cols=self.select_list(), a=sql.Identifier(self.src), b=sql.Identifier(self.dst))
        ).fetchall()
        extra = cur.execute(
            sql.SQL(q).format(cols=self.select_list(), a=sql.Identifier(self.dst), b=sql.Identifier(self.src))
        ).fetchall()
        return missing, extra

    def copy_to(self, fmt) -> bytes:
        stmt = sql.SQL("COPY {} TO STDOUT {}").format(sql.Identifier(self.src), copy_options(fmt, "TO"))
        out = bytearray()
        with self.conn.cursor().copy(stmt) as copy:
            for chunk in copy:
                out += chunk
        return bytes(out)

    def count(self, table: str) -> int:
        return self.conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()[0]


def make_tables(conn: psycopg.Connection, columns: Sequence[Column], rows: int) -> PgTables:
    tag = uuid.uuid4().hex[:12]
    tables = PgTables(conn, f"src_{tag}", f"dst_{tag}", columns)
    ddl = sql.SQL(", ").join(
        [sql.SQL("id bigint NOT NULL")]
        + [sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.pg)) for c in columns]
    )
    for name in (tables.src, tables.dst):
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), ddl))
    values = sql.SQL(", ").join([sql.SQL("%b")] + [sql.SQL("(" + c.expr + ")::" + c.pg) for c in columns])
    insert = sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(tables.src), values)
    params = []
    for row in range(rows):
        p: list = [row]
        for c in columns:
            p += list(c.params(corpus_value(c, row)))
        params.append(p)
    conn.cursor().executemany(insert, params)
    return tables


@pytest.fixture
def pg(postgres):
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn


@pytest.fixture(scope="module")
def corpus_tables(postgres):
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        tables = make_tables(conn, COLUMNS, ROW_COUNT)
        yield tables


def decompress(data: bytes, fmt) -> bytes:
    if fmt.compression is None:
        return data
    return pa.CompressedInputStream(pa.BufferReader(data), fmt.compression).read()


def copy_corpus(fmt, bucket, s3_config, s3_client, **kwargs) -> List[bytes]:
    result = run_copy(
        uri=f"s3://{bucket}/pg", format=fmt, schema=SCHEMA, s3=s3_config, generate=(make_row, ROW_COUNT), **kwargs
    )
    assert result.ok and result.rows == ROW_COUNT, result
    keys = data_keys(s3_client, bucket, "pg/")
    assert keys and all(k.endswith("." + fmt.extension) for k in keys), keys
    return [decompress(get_bytes(s3_client, bucket, k), fmt) for k in keys]


def assert_loads_back(tables: PgTables, files: List[bytes], fmt) -> None:
    tables.conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(tables.dst)))
    for data in files:
        tables.load(data, fmt)
    missing, extra = tables.differences()
    assert (missing, extra) == ([], []), f"rows differ after COPY FROM:\nsource only: {missing}\nloaded only: {extra}"
    assert tables.count(tables.dst) == tables.count(tables.src)


def sorted_lines(data: bytes) -> List[bytes]:
    return sorted(data.split(b"\n"))


def assert_same_lines(data: bytes, expected: bytes, delimiter: str) -> None:
    """Sorted lines equal; on a difference, name the first columns that differ."""
    got, want = sorted_lines(data), sorted_lines(expected)
    if got == want:
        return
    names = ["id"] + [c.name for c in COLUMNS]
    sep = delimiter.encode()
    diffs = []
    for mine, theirs in zip(sorted(set(got) - set(want)), sorted(set(want) - set(got))):
        a, b = mine.split(sep), theirs.split(sep)
        diffs += [(names[i] if len(a) == len(names) else i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y][:3]
        if len(diffs) > 8:
            break
    raise AssertionError(f"{len(set(got) ^ set(want))} lines differ; (column, sink, PostgreSQL): {diffs}")


FORMATS = {
    "text": TextFormat(),
    "text-pipe": TextFormat(delimiter="|", null="<NULL>"),
    "text-ctrl-a": TextFormat(delimiter="\x01", null=""),
    "csv": CsvFormat(),
    "csv-header": CsvFormat(header=True),
    "csv-custom": CsvFormat(
        header=True, delimiter="|", quote="'", escape="\\", null="NULL", force_quote=("s", "i32", "l_s")
    ),
    "csv-tab-forced": CsvFormat(delimiter="\t", null="\\N", force_quote=True),
    "csv-odd-quote": CsvFormat(delimiter=";", quote="%", escape="!", null="-"),
}


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
def test_corpus_is_what_postgres_writes_and_loads_back(fmt, corpus_tables, bucket, s3_config, s3_client):
    if isinstance(fmt, TextFormat) and fmt.null == "":
        # With NULL '' the text format cannot tell NULL from '' (PostgreSQL's own ambiguity:
        # COPY FROM would load the corpus's '' as NULL), so the copy refuses it (issue 16).
        from beam_s3_sink import CopyToS3Error

        with pytest.raises(CopyToS3Error, match="column 's'.*the NULL string of this text format"):
            copy_corpus(fmt, bucket, s3_config, s3_client)
        assert data_keys(s3_client, bucket, "pg/") == []
        return
    [data] = copy_corpus(fmt, bucket, s3_config, s3_client)
    expected = corpus_tables.copy_to(fmt)
    if getattr(fmt, "header", False):
        assert data.split(b"\n", 1)[0] == expected.split(b"\n", 1)[0]
    assert_same_lines(data, expected, fmt.delimiter)
    if not (isinstance(fmt, TextFormat) and fmt.null == ""):
        # (with NULL '' the text format cannot tell NULL from '': PostgreSQL's own ambiguity)
        assert_loads_back(corpus_tables, [data], fmt)


@pytest.mark.parametrize(
    "fmt",
    [
        CsvFormat(header=True, compression="gzip"),
        TextFormat(compression="zstd"),
        CsvFormat(compression="zstd"),
        TextFormat(compression="gzip"),
    ],
    ids=["csv.gz", "txt.zst", "csv.zst", "txt.gz"],
)
def test_compressed_files_split_on_compressed_size_and_load_back(fmt, corpus_tables, bucket, s3_config, s3_client):
    limit = 4096
    header_lines = int(getattr(fmt, "header", False))
    result = run_copy(
        uri=f"s3://{bucket}/pg",
        format=fmt,
        schema=SCHEMA,
        s3=s3_config,
        generate=(make_row, ROW_COUNT),
        max_file_size=limit,
    )
    assert result.ok and result.rows == ROW_COUNT, result
    keys = data_keys(s3_client, bucket, "pg/")
    assert len(keys) > 3 and all(k.endswith("." + fmt.extension) for k in keys), keys
    raw = [get_bytes(s3_client, bucket, k) for k in keys]
    # on compressed bytes: under the limit but for a file of one row, and mostly well filled
    one_row = [decompress(r, fmt).count(b"\n") - header_lines <= 1 for r in raw]
    assert all(len(r) <= limit or single for r, single in zip(raw, one_row)), [len(r) for r in raw]
    assert sum(len(r) for r in raw) / len(raw) > limit / 3
    assert sum(f.bytes for f in result.files) == sum(len(r) for r in raw)
    files = [decompress(r, fmt) for r in raw]
    assert_loads_back(corpus_tables, files, fmt)
    body = b"".join(f.split(b"\n", 1)[1] if header_lines else f for f in files)
    header = corpus_tables.copy_to(fmt).split(b"\n", 1)[0] + b"\n" if header_lines else b""
    assert all(f.startswith(header) for f in files)
    assert sorted_lines(header + body) == sorted_lines(corpus_tables.copy_to(fmt))


def test_empty_compressed_copy_is_a_valid_header_only_file(bucket, s3_config, s3_client):
    fmt = CsvFormat(header=True, compression="gzip")
    result = run_copy(
        [], uri=f"s3://{bucket}/e", format=fmt, schema=pa.schema([("a", pa.int64()), ("b", pa.string())]), s3=s3_config
    )
    assert result.ok and result.rows == 0
    [key] = data_keys(s3_client, bucket, "e/")
    assert key.endswith(".csv.gz")
    assert decompress(get_bytes(s3_client, bucket, key), fmt) == b"a,b\n"


def test_single_column_end_of_data_marker(pg, bucket, s3_config, s3_client):
    """``\\.`` alone on a line would end the data: PostgreSQL quotes it when it is the only column."""
    values = ["\\.", "\\.x", ".", "\\", None, ""]
    column = Column("s", pa.string(), "text", values)
    tables = make_tables(pg, [column], len(values))
    for fmt in (CsvFormat(), CsvFormat(header=True, null="NA"), TextFormat()):
        result = run_copy(
            [{"s": v} for v in values],
            uri=f"s3://{bucket}/one-{len(fmt.extension)}{fmt.null!r}",
            format=fmt,
            schema=pa.schema([("s", pa.string())]),
            s3=s3_config,
        )
        [key] = [f.uri.split("/", 3)[3] for f in result.files]
        data = get_bytes(s3_client, bucket, key)
        assert sorted_lines(data) == sorted_lines(_copy_to_columns(pg, tables.src, fmt, "s")), data
    # A NULL string of \. would end the data at the first NULL when loaded back: refused.
    with pytest.raises(ValueError, match="null"):
        CsvFormat(header=True, null="\\.")


def _copy_to_columns(conn, table: str, fmt, columns: str) -> bytes:
    stmt = sql.SQL("COPY {} ({}) TO STDOUT {}").format(sql.Identifier(table), sql.SQL(columns), copy_options(fmt, "TO"))
    out = bytearray()
    with conn.cursor().copy(stmt) as copy:
        for chunk in copy:
            out += chunk
    return bytes(out)


def test_random_floats_print_as_float8out_and_float4out(pg):
    """Shortest round-trip text for many random bit patterns, as PostgreSQL prints them."""
    rng = np.random.default_rng(4)
    doubles = rng.integers(0, 2**64, 4000, dtype=np.uint64).view(np.float64)
    # large whole numbers: where a rounding bound has few digits (PostgreSQL excludes bounds)
    doubles = np.concatenate(
        [
            doubles,
            rng.uniform(-1e18, 1e18, 1000),
            10.0 ** rng.integers(-20, 20, 500),
            rng.integers(2**53, 2**63, 3000).astype(np.float64),
        ]
    )
    singles = rng.integers(0, 2**32, 4000, dtype=np.uint32).view(np.float32)
    singles = np.concatenate([singles, rng.integers(2**24, 2**40, 3000).astype(np.float32)])
    singles = singles[np.isfinite(singles)]
    doubles = doubles[np.isfinite(doubles)]
    want8 = [r[0] for r in pg.execute("SELECT unnest(%b::float8[])::text", [doubles.tolist()]).fetchall()]
    want4 = [
        r[0]
        for r in pg.execute(
            "SELECT unnest(%b::float8[])::float4::text", [singles.astype(np.float64).tolist()]
        ).fetchall()
    ]
    assert render_column(pa.array(doubles, pa.float64())).to_pylist() == want8
    assert render_column(pa.array(singles, pa.float32())).to_pylist() == want4


def test_nanosecond_timestamps_keep_their_digits():
    """PostgreSQL keeps microseconds; the sink writes every digit it has and lets the reader round."""
    values = pa.array([1_500_000_001, 1_000, None, -1], pa.timestamp("ns", tz="UTC"))
    assert render_column(values).to_pylist() == [
        "1970-01-01 00:00:01.500000001+00",
        "1970-01-01 00:00:00.000001+00",
        None,
        "1969-12-31 23:59:59.999999999+00",
    ]


@pytest.mark.parametrize(
    "typ, what",
    [
        (pa.struct([("city", pa.string())]), "struct"),
        (pa.map_(pa.string(), pa.int64()), "map"),
        (pa.list_(pa.struct([("x", pa.int64())])), "struct"),
        (pa.duration("s"), "duration"),
    ],
)
@pytest.mark.parametrize("fmt", [CsvFormat(), TextFormat(compression="gzip")], ids=["csv", "text"])
def test_types_without_postgres_text_fail_at_construction(typ, what, fmt):
    import apache_beam as beam

    schema = pa.schema([("id", pa.int64()), ("nested_col", typ)])
    with pytest.raises(ValueError, match=r"column 'nested_col': type .*" + what):
        with beam.Pipeline() as p:
            p | beam.Create([{"id": 1}]) | CopyToS3("s3://bucket/p", format=fmt, schema=schema)


@pytest.mark.parametrize(
    "value, problem",
    [
        ({"s": "a\x00b", "l": None}, "NUL"),
        ({"s": "ok", "l": [[1, 2], [3]]}, "different lengths"),
        ({"s": "ok", "l": [[1], None]}, "NULL list"),
    ],
)
def test_values_postgres_cannot_hold_fail_the_copy_naming_the_column(value, problem, bucket, s3_config, s3_client):
    schema = pa.schema([("s", pa.string()), ("l", pa.list_(pa.list_(pa.int64())))])
    result = run_copy(
        [value], uri=f"s3://{bucket}/bad", format="text", schema=schema, s3=s3_config, fail_on_error=False
    )
    assert not result.ok and problem in result.error
    assert ("column 's'" if problem == "NUL" else "column 'l'") in result.error
    assert data_keys(s3_client, bucket, "bad/") == []


def test_option_errors_are_clear():
    with pytest.raises(ValueError, match="delimiter"):
        TextFormat(delimiter="a")
    with pytest.raises(ValueError, match="delimiter"):
        CsvFormat(delimiter="é")
    with pytest.raises(ValueError, match="null"):
        TextFormat(delimiter="|", null="a|b")
    with pytest.raises(ValueError, match="compression"):
        CsvFormat(compression="bz2")
    assert CsvFormat(compression="zstd").extension == "csv.zst"
    assert TextFormat(compression="gzip").extension == "txt.gz"
