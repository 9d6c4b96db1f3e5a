"""formats/parquet: options, type profiles, row-group and file sizing, statistics."""

from __future__ import annotations

import datetime
import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.formats import ParquetFormat
from beam_s3_sink.formats.parquet import MAX_ROW_GROUP, MIN_ROW_GROUP, parquet_schema, to_file_table


def encode(fmt, table, max_file_size=2**30):
    out = io.BytesIO()
    encoder = fmt.open(table.schema, out, max_file_size)
    rests = [encoder.write(b) for b in table.to_batches()]
    encoder.close()
    return out.getvalue(), encoder, rests


def test_round_trip_with_the_arrow_schema_stored():
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "s": ["a", None],
            "t": pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us")).take([0, 0]),
        }
    )
    body, encoder, _ = encode(ParquetFormat(), table)
    back = pq.read_table(io.BytesIO(body))
    assert back.equals(table) and encoder.rows == 2
    meta = pq.ParquetFile(io.BytesIO(body)).metadata
    assert meta.row_group(0).column(0).compression == "SNAPPY"
    assert meta.row_group(0).column(0).statistics.has_min_max


def test_compression_option_reaches_the_file():
    body, _, _ = encode(ParquetFormat(compression="zstd", compression_level=5), pa.table({"a": [1]}))
    assert pq.ParquetFile(io.BytesIO(body)).metadata.row_group(0).column(0).compression == "ZSTD"
    body, _, _ = encode(ParquetFormat(compression="none", write_statistics=False), pa.table({"a": [1]}))
    column = pq.ParquetFile(io.BytesIO(body)).metadata.row_group(0).column(0)
    assert column.compression == "UNCOMPRESSED" and not column.is_stats_set


def test_compatible_profile_writes_what_every_reader_opens():
    u = uuid.UUID(int=0xABC)
    table = pa.table(
        {
            "k": pa.array([u.bytes, None], pa.uuid()),
            "at": pa.array([datetime.time(1, 2, 3, 4), None], pa.time64("us")),
            "n": pa.array([2**64 - 1, 0], pa.uint64()),
            "small": pa.array([255, 0], pa.uint8()),
            "ns": pa.array([1_000, 2_000], pa.timestamp("ns")),
        }
    )
    body, _, _ = encode(ParquetFormat(), table)
    back = pq.read_table(io.BytesIO(body))
    assert back.schema.field("k").type == pa.string() and back.column("k").to_pylist() == [str(u), None]
    assert back.column("at").to_pylist() == ["01:02:03.000004", None]
    assert back.schema.field("n").type == pa.decimal128(20, 0) and int(back.column("n")[0].as_py()) == 2**64 - 1
    assert back.schema.field("small").type == pa.int16()
    assert back.schema.field("ns").type == pa.timestamp("us")


def test_exact_profile_keeps_the_logical_types():
    table = pa.table({"k": pa.array([uuid.UUID(int=1).bytes], pa.uuid()), "n": pa.array([1], pa.uint64())})
    body, _, _ = encode(ParquetFormat(types="exact"), table)
    assert pq.read_table(io.BytesIO(body)).schema == table.schema


def test_nanoseconds_are_never_truncated():
    table = pa.table({"ns": pa.array([1_001], pa.timestamp("ns"))})
    with pytest.raises(ValueError, match="column 'ns' .*written as timestamp\\[us\\].*types='exact'"):
        encode(ParquetFormat(), table)


def test_parquet_schema_of_nested_types():
    schema = pa.schema(
        [
            ("l", pa.large_list(pa.uuid())),
            ("m", pa.map_(pa.string(), pa.time32("s"))),
            ("s", pa.struct([("d", pa.date64())])),
        ]
    )
    assert parquet_schema(schema) == pa.schema(
        [("l", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.string())), ("s", pa.struct([("d", pa.date32())]))]
    )
    assert parquet_schema(schema, "exact").field("m").type == pa.map_(pa.string(), pa.time32("ms"))


def test_to_file_table_converts_nested_uuids():
    u = uuid.UUID(int=5)
    schema = pa.schema([("s", pa.struct([("k", pa.uuid())]))])
    table = pa.Table.from_arrays([pa.StructArray.from_arrays([pa.array([u.bytes], pa.uuid())], ["k"])], schema=schema)
    assert to_file_table(table, parquet_schema(schema)).to_pylist() == [{"s": {"k": str(u)}}]


def test_row_group_bytes():
    assert ParquetFormat().row_group_bytes(2**20) == 2**17
    assert ParquetFormat().row_group_bytes(1024) == MIN_ROW_GROUP
    assert ParquetFormat().row_group_bytes(2**40) == MAX_ROW_GROUP
    assert ParquetFormat(row_group_size=4096).row_group_bytes(2**40) == 4096


def test_files_stay_near_max_file_size():
    table = pa.table({"id": list(range(200_000)), "s": [f"value {i}" for i in range(200_000)]})
    limit = 256 * 1024
    files, batch, rows = [], table.combine_chunks().to_batches(max_chunksize=5_000), 0
    pending = list(batch)
    fmt = ParquetFormat(row_group_size=32 * 1024)
    while pending:
        out = io.BytesIO()
        encoder = fmt.open(table.schema, out, limit)
        while pending and not encoder.full:
            rest = encoder.write(pending.pop(0))
            if rest is not None:
                pending.insert(0, rest)
        encoder.close()
        files.append(out.getvalue())
        rows += encoder.rows
    assert rows == 200_000 and len(files) > 2
    # A file exceeds the limit by at most about one row group.
    assert all(len(f) <= limit + 64 * 1024 for f in files)
    assert sum(pq.read_metadata(io.BytesIO(f)).num_rows for f in files) == 200_000


def test_stats_from_the_footer():
    _, encoder, _ = encode(ParquetFormat(), pa.table({"id": [3, None, 1], "s": ["b", "a", None]}))
    stats = {s.column: (s.null_count, s.min, s.max) for s in encoder.stats()}
    assert stats == {"id": (1, 1, 3), "s": (1, "a", "b")}


def test_empty_file_has_the_schema():
    body, encoder, _ = encode(ParquetFormat(), pa.table({"id": pa.array([], pa.int64())}))
    assert pq.read_table(io.BytesIO(body)).schema.names == ["id"] and encoder.rows == 0


@pytest.mark.parametrize(
    "typ, says",
    [
        (pa.duration("s"), "Parquet has no such type"),
        (pa.month_day_nano_interval(), "Parquet has no such type"),
        (pa.decimal256(40, 2), "at most 38 digits"),
        (pa.list_(pa.duration("ms")), "Parquet has no such type"),
    ],
)
def test_check_schema_refuses(typ, says):
    with pytest.raises(ValueError, match=says):
        ParquetFormat().check_schema(pa.schema([("c", typ)]))


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(types="fast"), "types must be one of"),
        (dict(compression="bz2"), "is not one of"),
        (dict(compression="snappy", compression_level=3), "takes no compression_level"),
        (dict(compression="zstd", compression_level=99), "must be an int from"),
        (dict(version="3.0"), "version must be"),
        (dict(row_group_size=100), "at least 1024"),
        (dict(row_group_size=True), "at least 1024"),
    ],
)
def test_invalid_options(kwargs, says):
    with pytest.raises(ValueError, match=says):
        ParquetFormat(**kwargs)


def test_is_a_frozen_picklable_value():
    import pickle

    fmt = ParquetFormat(compression="zstd")
    assert pickle.loads(pickle.dumps(fmt)) == fmt and fmt.extension == "parquet"
    with pytest.raises(AttributeError):
        fmt.compression = "gzip"  # type: ignore[misc]


def test_the_stream_gets_whole_buffers_not_pyarrow_pieces():
    """pyarrow writes a row group in hundreds of pieces; the output stream (a Python object,
    each call taking the GIL) gets each group in a few whole writes, as soon as it is encoded."""

    class Counting(io.BytesIO):
        calls = 0

        def write(self, data):
            Counting.calls += 1
            return super().write(data)

    out = Counting()
    encoder = ParquetFormat(row_group_size=64 * 1024).open(
        pa.schema([("id", pa.int64()), ("s", pa.string())]), out, 2**30
    )
    table = pa.table({"id": range(200_000), "s": [f"value {i % 977}" for i in range(200_000)]})
    for batch in table.to_batches(max_chunksize=20_000):
        encoder.write(batch)
        assert out.tell() > 0  # encoded groups reach the stream before the file closes
    groups, calls = encoder._groups, Counting.calls
    encoder.close()
    assert groups > 3 and calls <= groups + 1  # one flush per group (pyarrow alone: ~20 per column chunk)
    assert pq.read_table(io.BytesIO(out.getvalue())).equals(pa.Table.from_batches(table.to_batches()))


def _dictionary_encoded(body: bytes):
    meta = pq.read_metadata(io.BytesIO(body))
    chunks = [meta.row_group(0).column(i) for i in range(meta.num_columns)]
    return {c.path_in_schema: any("DICTIONARY" in e for e in c.encodings) for c in chunks}


def test_dictionary_encoding_only_where_the_first_rows_repeat():
    ids = list(range(40_000))
    table = pa.table({"id": ids, "kind": [f"k{i % 7}" for i in ids], "note": [f"note {i}" for i in ids]})
    body = encode(ParquetFormat(), table)[0]
    assert _dictionary_encoded(body) == {"id": False, "kind": True, "note": False}
    assert pq.read_table(io.BytesIO(body)).equals(table)
    assert set(_dictionary_encoded(encode(ParquetFormat(use_dictionary=False), table)[0]).values()) == {False}
    nested = table.append_column("tags", pa.array([[str(i)] for i in ids], pa.list_(pa.string())))
    assert set(_dictionary_encoded(encode(ParquetFormat(), nested)[0]).values()) == {True}  # pyarrow's own choice
