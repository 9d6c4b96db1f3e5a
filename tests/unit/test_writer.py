"""writer: FileWriter against the in-memory S3 (files, sizes, partitions, Arrow input, errors)."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.config import S3Config
from beam_s3_sink.formats import CsvFormat, ParquetFormat, TextFormat
from beam_s3_sink.layout import Layout
from beam_s3_sink.writer import FileWriter

from .fakes import FakeS3

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
CONFIG = S3Config()


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


def writer(fake, pool, fmt=CsvFormat(), max_file_size=2**30, layout=Layout(), schema=SCHEMA, **kwargs):
    def name(directory, number):
        return (f"p/{directory}/" if directory else "p/") + f"file-{number:04d}.{fmt.extension}"

    return FileWriter(fake, pool, CONFIG, fmt, schema, max_file_size, "bucket", name, layout, **kwargs)


def complete(fake: FakeS3, report):
    """Complete every pending file of ``report``; return {key: bytes}."""
    out = {}
    for pending in report.files:
        fake.complete_multipart_upload(
            Bucket="bucket",
            Key=pending.key,
            UploadId=pending.upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in pending.parts]},
        )
        out[pending.key] = fake.body(pending.key)
    return out


def test_rows_into_one_csv_file(fake_s3, pool):
    w = writer(fake_s3, pool)
    w.add({"id": 1, "name": "a"})
    w.add({"id": 2, "name": None})
    report = w.finish()
    assert report.error is None and (report.rows, len(report.files)) == (2, 1)
    assert complete(fake_s3, report) == {"p/file-0001.csv": b"1,a\n2,\n"}
    assert report.bytes == len(b"1,a\n2,\n") == report.files[0].bytes


def test_data_files_get_the_format_content_type(fake_s3, pool):
    w = writer(fake_s3, pool)
    w.add({"id": 1, "name": "a"})
    w.finish()
    (upload,) = fake_s3.uploads.values()
    assert upload.args["ContentType"] == "text/csv"


def test_no_rows_no_files(fake_s3, pool):
    report = writer(fake_s3, pool).finish()
    assert (report.files, report.rows, report.error) == ((), 0, None) and fake_s3.operations() == []


def test_files_are_cut_at_max_file_size(fake_s3, pool):
    seen = []
    w = writer(fake_s3, pool, max_file_size=40, on_file=seen.append)
    for i in range(30):
        w.add({"id": i, "name": "x" * 5})  # 8-9 bytes a line
    report = w.finish()
    bodies = complete(fake_s3, report)
    assert len(bodies) > 3 and all(len(b) <= 40 for b in bodies.values())
    assert sorted(bodies) == [f"p/file-{n:04d}.csv" for n in range(1, len(bodies) + 1)]
    assert b"".join(bodies[k] for k in sorted(bodies)) == b"".join(f"{i},xxxxx\n".encode() for i in range(30))
    assert [f.key for f in seen] == [f.key for f in report.files]  # on_file once per file
    assert report.rows == 30 == sum(f.rows for f in report.files)


def test_parquet_files_open_and_carry_stats(fake_s3, pool):
    w = writer(fake_s3, pool, fmt=ParquetFormat())
    for i in range(100):
        w.add({"id": i, "name": str(i)})
    report = w.finish()
    (body,) = complete(fake_s3, report).values()
    table = pq.read_table(io.BytesIO(body))
    assert table.num_rows == 100 and table.column("id").to_pylist() == list(range(100))
    stats = {s.column: s for s in report.files[0].stats}
    assert (stats["id"].min, stats["id"].max, stats["id"].null_count) == (0, 99, 0)


def test_partitions_get_their_own_files(fake_s3, pool):
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",)))
    for i, day in enumerate(["a", "b", "a", None]):
        w.add({"id": i, "day": day})
    bodies = complete(fake_s3, w.finish())
    assert bodies == {
        "p/day=a/file-0001.csv": b"0\n2\n",
        "p/day=b/file-0001.csv": b"1\n",
        "p/day=__HIVE_DEFAULT_PARTITION__/file-0001.csv": b"3\n",
    }


def test_at_most_max_open_files(fake_s3, pool):
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",), max_open_files=1))
    most = 0
    for i, day in enumerate(["a", "b", "a", "b"]):  # batches go to their file at once
        w.add_batch(pa.record_batch({"id": [i], "day": [day]}, schema=schema))
        most = max(most, w.open_files)
    bodies = complete(fake_s3, w.finish())
    assert most == 1
    assert sorted(bodies) == [
        "p/day=a/file-0001.csv",
        "p/day=a/file-0002.csv",
        "p/day=b/file-0001.csv",
        "p/day=b/file-0002.csv",
    ]


def test_arrow_batches_are_conformed_and_written(fake_s3, pool):
    w = writer(fake_s3, pool)
    w.add({"id": 1, "name": "row"})
    w.add(pa.record_batch({"name": ["t"], "id": pa.array([2], pa.int32())}))
    w.add_arrow(pa.table({"id": [3]}))  # a missing nullable column is NULL
    assert complete(fake_s3, w.finish()) == {"p/file-0001.csv": b"1,row\n2,t\n3,\n"}


def test_arrow_batches_are_split_by_partition(fake_s3, pool):
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",)))
    w.add_batch(pa.record_batch({"id": [1, 2, 3], "day": ["b", "a", "b"]}, schema=schema))
    assert complete(fake_s3, w.finish()) == {"p/day=a/file-0001.csv": b"2\n", "p/day=b/file-0001.csv": b"1\n3\n"}


def test_a_bad_row_fails_the_writer_and_leaves_nothing(fake_s3, pool):
    w = writer(fake_s3, pool, max_file_size=10)
    for i in range(5):
        w.add({"id": i, "name": "abcdef"})
    w.add({"id": "seven", "name": "x"})
    w.add({"id": 8, "name": "after the error: ignored"})
    report = w.finish()
    assert report.files == () and report.rows == 0
    assert "column 'id' expects int64, but a row holds 'seven'" in report.error
    assert "(while writing s3://bucket/p/file-" in report.error and "nothing was made visible" in report.error
    assert fake_s3.uploads == {}  # every upload it had started is aborted


def test_a_batch_that_does_not_fit_is_named(fake_s3, pool):
    w = writer(fake_s3, pool)
    w.add_arrow(pa.table({"id": ["x"]}), source="orders.parquet")
    report = w.finish()
    assert "column 'id' is int64 in the copy's schema, but orders.parquet holds string" in report.error


def test_a_refused_upload_is_the_error(fake_s3, pool):
    fake_s3.refuse("CreateMultipartUpload", "AccessDenied")
    w = writer(fake_s3, pool)
    w.add({"id": 1, "name": "a"})
    report = w.finish()
    assert "S3 refused CreateMultipartUpload on s3://bucket/p/file-0001.csv: AccessDenied" in report.error


def test_a_value_the_format_cannot_encode_is_named(fake_s3, pool):
    w = writer(fake_s3, pool, fmt=TextFormat(null="x"))
    w.add({"id": 1, "name": "ok"})
    w.add({"id": 2, "name": "x"})
    report = w.finish()
    assert "column 'name' (string), value 'x'" in report.error
    assert "the NULL string of this text format" in report.error
    assert fake_s3.uploads == {}


def test_a_nul_character_is_named(fake_s3, pool):
    w = writer(fake_s3, pool)
    w.add({"id": 1, "name": "a\x00b"})
    assert "column 'name' (string), value 'a\\x00b'" in w.finish().error


def test_nested_uuids_reach_a_parquet_file(fake_s3, pool):
    import uuid

    u = uuid.UUID(int=7)
    schema = pa.schema([("id", pa.int64()), ("keys", pa.list_(pa.uuid()))])
    w = writer(fake_s3, pool, fmt=ParquetFormat(), schema=schema)
    w.add({"id": 1, "keys": [u, None]})
    (body,) = complete(fake_s3, w.finish()).values()
    assert pq.read_table(io.BytesIO(body)).to_pylist() == [{"id": 1, "keys": [str(u), None]}]  # compatible: text
