"""formats/line_encoder: whole lines, the file-size limit (exact, or near it when compressed)."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pytest

from beam_s3_sink.formats.line_encoder import LineEncoder, check_compression, compressed_extension, join_lines


def lines_of(batch: pa.RecordBatch) -> pa.Array:
    return join_lines([batch.column(0).cast(pa.string())], ",")


def fill(max_file_size, batch, compression=None, header=b""):
    """Write ``batch`` into as many files as it takes; return their bytes and the rows of each."""
    files, rows = [], []
    rest = batch
    while rest is not None and rest.num_rows:
        out = io.BytesIO()
        encoder = LineEncoder(out, max_file_size, lines_of, compression, header)
        rest = encoder.write(rest)
        encoder.close()
        files.append(out.getvalue())
        rows.append(encoder.rows)
    return files, rows


def test_join_lines():
    assert join_lines([pa.array(["a"]), pa.array(["b"]), pa.array(["c"])], "\t").to_pylist() == ["a\tb\tc\n"]


def test_uncompressed_limit_is_exact():
    batch = pa.record_batch({"v": [f"{i:03d}" for i in range(100)]})  # 4 bytes a line
    files, rows = fill(42, batch)
    assert all(len(f) <= 42 for f in files) and rows[0] == 10 and sum(rows) == 100
    assert b"".join(files) == b"".join(f"{i:03d}\n".encode() for i in range(100))


def test_a_line_longer_than_the_limit_gets_a_file_of_its_own():
    files, rows = fill(5, pa.record_batch({"v": ["a", "much longer than five", "b"]}))
    assert files == [b"a\n", b"much longer than five\n", b"b\n"] and rows == [1, 1, 1]


def test_header_counts_toward_the_size():
    files, _ = fill(10, pa.record_batch({"v": ["1", "2", "3", "4", "5"]}), header=b"id\n")
    assert files[0] == b"id\n1\n2\n3\n" and all(f.startswith(b"id\n") for f in files)


def unzstd(data: bytes) -> bytes:
    return pa.input_stream(pa.py_buffer(data), compression="zstd").read()


@pytest.mark.parametrize("compression, unpack", [("gzip", gzip.decompress), ("zstd", unzstd)])
def test_compressed_files_stay_near_the_limit(compression, unpack):
    import random

    rng = random.Random(3)
    batch = pa.record_batch({"v": ["".join(rng.choice("abcdef") for _ in range(40)) for _ in range(20_000)]})
    files, rows = fill(32 * 1024, batch, compression)
    assert len(files) > 3 and sum(rows) == 20_000
    assert all(len(f) <= 32 * 1024 for f in files[:-1])
    assert all(len(f) > 16 * 1024 for f in files[:-1])  # and not far under it
    assert b"".join(unpack(f) for f in files) == b"".join(v.encode() + b"\n" for v in batch.column(0).to_pylist())


def test_empty_batch_writes_nothing():
    out = io.BytesIO()
    encoder = LineEncoder(out, 100, lines_of)
    assert encoder.write(pa.record_batch({"v": pa.array([], pa.string())})) is None
    assert out.getvalue() == b"" and not encoder.full


def test_stats_count_only_the_rows_in_the_file():
    out = io.BytesIO()
    encoder = LineEncoder(out, 6, lines_of)
    rest = encoder.write(pa.record_batch({"v": ["b", "a", "z", "y"]}))
    encoder.close()
    assert rest.num_rows == 1
    (stats,) = encoder.stats()
    assert (stats.null_count, stats.min, stats.max) == (0, "a", "z")


def test_compression_names():
    assert compressed_extension("csv", None) == "csv" and compressed_extension("csv", "gzip") == "csv.gz"
    check_compression("X", None)
    check_compression("X", "zstd")
    with pytest.raises(ValueError, match="X: compression must be None, 'gzip' or 'zstd', got 'lzma'"):
        check_compression("X", "lzma")
