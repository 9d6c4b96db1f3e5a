"""writer: FileWriter and WriteSettings against the in-memory S3 (files, sizes, partitions,
Arrow input, blobs, errors, memory bounds).

Every test that takes ``pool`` runs twice: encoding in the caller's thread, and on an encode
thread (as :class:`~beam_s3_sink.upload._WriteFn` runs it), which must not change a byte, a key
or an error."""

from __future__ import annotations

import dataclasses
import gzip
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.bad_rows import BadRowLimit
from beam_s3_sink.batches import encode_blob
from beam_s3_sink.config import S3Config
from beam_s3_sink.formats import CsvFormat, JsonlFormat, ParquetFormat, TextFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.writer import ENCODE_AHEAD, FileWriter, WriteSettings

from .fakes import FakeS3

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
CONFIG = S3Config()
KEYS = CopyKeys(S3Location("bucket", "p"), "s1")


@pytest.fixture(params=["caller", "encode-thread"])
def pool(request):
    """The part pool; with the ``encode-thread`` parameter it also carries an encode pool,
    which :func:`writer` hands to the FileWriter."""
    with ThreadPoolExecutor(2) as executor, ThreadPoolExecutor(1, thread_name_prefix="encode") as encode:
        executor.encode_pool = encode if request.param == "encode-thread" else None
        yield executor


def settings(fmt=CsvFormat(), max_file_size=2**30, layout=Layout(), schema=SCHEMA, max_open_files=16):
    return WriteSettings(KEYS, CONFIG, fmt, schema, max_file_size, layout, max_open_files)


def writer(
    fake, pool, fmt=CsvFormat(), max_file_size=2**30, layout=Layout(), schema=SCHEMA, max_open_files=16, **kwargs
):
    def name(directory, number):
        return (f"p/{directory}/" if directory else "p/") + f"file-{number:04d}.{fmt.extension}"

    kwargs.setdefault("encode_pool", pool.encode_pool)
    return FileWriter(fake, pool, settings(fmt, max_file_size, layout, schema, max_open_files), name, **kwargs)


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
    # buffer_bytes=1: each batch goes to its directory's file at once (none waits)
    layout = Layout(partition_by=("day",))
    w = writer(fake_s3, pool, schema=schema, layout=layout, max_open_files=1, buffer_bytes=1)
    most = 0
    for i, day in enumerate(["a", "b", "a", "b"]):
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
    w.add(pa.table({"id": [3]}))  # a missing nullable column is NULL
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
    w.add(pa.table({"id": ["x"]}))
    report = w.finish()
    assert (
        "column 'id' is int64 in the copy's schema, but a pyarrow.Table of 1 rows with columns ['id'] holds string"
        in report.error
    )
    assert report.files == () and fake_s3.uploads == {}


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


def test_rows_batches_and_blobs_write_the_same_files(fake_s3, pool):
    """The same rows make the same files whether they come one by one, as record batches
    (what a fused ``Batch`` step hands over) or as ZSTD blobs (what a ``GroupByKey`` does)."""
    rows = [{"id": i, "name": f"n{i}"} for i in range(300)]
    batches = [pa.RecordBatch.from_pylist(rows[i : i + 40], schema=SCHEMA) for i in range(0, 300, 40)]
    one, many, blobs = (writer(fake_s3, pool, max_file_size=1000) for _ in range(3))
    for row in rows:
        one.add(row)
    for batch in batches:
        many.add_batch(batch)
    blobs.add_blob(encode_blob(batches[:2], SCHEMA))
    blobs.add_blob(encode_blob(batches[2:], SCHEMA, None))
    first, second, third = (complete(fake_s3, w.finish()) for w in (one, many, blobs))
    assert list(first.values()) == list(second.values()) == list(third.values()) and len(first) > 2


def test_add_takes_dicts_beam_rows_batches_and_partitions(fake_s3, pool):
    import apache_beam as beam

    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",)))
    for element in [{"id": 1, "day": "a"}, beam.Row(id=2, day="b"), pa.record_batch({"id": [3], "day": ["a"]})]:
        w.add(element)
    bodies = complete(fake_s3, w.finish())
    assert bodies == {"p/day=a/file-0001.csv": b"1\n3\n", "p/day=b/file-0001.csv": b"2\n"}


def test_an_error_blob_fails_the_writer_with_its_message(fake_s3, pool):
    from beam_s3_sink.batches import _ERROR

    w = writer(fake_s3, pool, max_file_size=10)
    w.add_blob(encode_blob([pa.record_batch({"id": [1, 2], "name": ["abcdef", "ghijkl"]}, schema=SCHEMA)], SCHEMA))
    w.add_blob(_ERROR + "column 'id' expects int64, but a row holds 'x'".encode())
    w.add_blob(encode_blob([pa.record_batch({"id": [3], "name": ["later"]}, schema=SCHEMA)], SCHEMA))
    report = w.finish()
    assert report.files == () and report.rows == 0
    assert "column 'id' expects int64, but a row holds 'x'" in report.error
    assert "(while writing s3://bucket/p/file-" in report.error and "nothing was made visible" in report.error
    # The file open at the error is aborted; the one closed before it stays pending (invisible)
    # until completion aborts every pending upload of the failed copy (test_completion).
    assert fake_s3.keys() == [] and sorted(u.key for u in fake_s3.uploads.values()) == ["p/file-0001.csv"]


def test_a_damaged_blob_fails_the_writer(fake_s3, pool):
    blob = encode_blob([pa.record_batch({"id": [1], "name": ["a"]}, schema=SCHEMA)], SCHEMA)
    w = writer(fake_s3, pool)
    w.add_blob(blob[: len(blob) // 2])
    report = w.finish()
    assert report.error is not None and "nothing was made visible" in report.error
    assert report.files == () and fake_s3.uploads == {}


def test_the_encode_thread_encodes_and_the_caller_reports(fake_s3):
    """Encoders run on the encode thread; ``on_file`` (Beam's counters, which live in the
    caller's thread) is called in the caller's thread; at most ENCODE_AHEAD batches wait."""
    from beam_s3_sink.formats.csv import CsvFormat as Csv

    encoded_in, reported_in, release = set(), set(), threading.Event()
    waiting = []

    class SlowCsv(Csv):
        def open(self, schema, out, max_file_size):
            encoder = super().open(schema, out, max_file_size)
            write = encoder.write

            def slow_write(batch):
                encoded_in.add(threading.current_thread().name)
                release.wait(5)
                return write(batch)

            encoder.write = slow_write
            return encoder

    with ThreadPoolExecutor(2) as parts, ThreadPoolExecutor(1, thread_name_prefix="encode") as encode:
        parts.encode_pool = encode

        def on_file(pending):
            reported_in.add(threading.current_thread().name)

        w = writer(fake_s3, parts, fmt=SlowCsv(), max_file_size=12, on_file=on_file)
        started = []

        def add_six():
            for i in range(6):
                started.append(i)
                w.add_batch(pa.record_batch({"id": [i], "name": ["abcdefgh"]}, schema=SCHEMA))

        adding = threading.Thread(target=add_six, name="caller")
        adding.start()
        deadline = time.monotonic() + 10  # however loaded the machine, wait for the batch that blocks
        while len(started) <= ENCODE_AHEAD and time.monotonic() < deadline:
            time.sleep(0.01)
        adding.join(0.5)
        waiting.append(len(w._encoding))
        assert adding.is_alive(), "the caller waits while ENCODE_AHEAD batches are queued"
        release.set()
        adding.join(5)
        report = w.finish()
    assert waiting == [ENCODE_AHEAD]  # queued behind the oldest, which the caller waits for
    assert report.error is None and report.rows == 6 and len(report.files) == 6
    assert {name.split("_")[0] for name in encoded_in} == {"encode"}
    assert reported_in == {"caller", "MainThread"}  # finish() ran in this thread


def test_an_encode_error_on_the_thread_stops_later_batches(fake_s3, pool):
    w = writer(fake_s3, pool, fmt=TextFormat(null="x"))
    w.add_batch(pa.record_batch({"id": [1], "name": ["ok"]}, schema=SCHEMA))
    w.add_batch(pa.record_batch({"id": [2], "name": ["x"]}, schema=SCHEMA))  # cannot be encoded
    for i in range(3, 8):
        w.add_batch(pa.record_batch({"id": [i], "name": ["later"]}, schema=SCHEMA))
    report = w.finish()
    assert "column 'name' (string), value 'x'" in report.error and report.files == ()
    assert fake_s3.uploads == {}  # aborted, once the thread was idle


def test_partitioned_rows_waiting_for_their_file_stay_bounded(fake_s3, pool):
    """With many partitions, the rows waiting for their directory's file never exceed
    ``max_open_files`` buffers, and at most ``max_open_files`` files are open; every row lands."""
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",)), max_open_files=2, buffer_bytes=256)
    most_waiting = most_open = 0
    for start in range(0, 2000, 100):
        ids = list(range(start, start + 100))
        w.add_batch(pa.record_batch({"id": ids, "day": [f"d{i % 7}" for i in ids]}, schema=schema))
        most_waiting = max(most_waiting, w._waiting_bytes)
        most_open = max(most_open, w.open_files)
    bodies = complete(fake_s3, w.finish())
    assert most_waiting <= 2 * 256 and most_open <= 2
    assert sorted(int(line) for body in bodies.values() for line in body.split()) == list(range(2000))
    assert {key.split("/")[1] for key in bodies} == {f"day=d{n}" for n in range(7)}


def test_write_settings_are_frozen_and_check_max_open_files():
    assert settings().max_open_files == 16 and settings().layout == Layout()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings().max_file_size = 1  # type: ignore[misc]
    for bad in (0, -1, True, 2.0, "2"):
        with pytest.raises(ValueError, match="max_open_files must be a positive int"):
            settings(max_open_files=bad)


def test_write_settings_repr_shows_no_s3_settings():
    """A ptransform_fn's label (validate_rows) carries its arguments' repr into the pipeline
    proto: WriteSettings' repr leaves the S3Config (and its access key id) out."""
    config = S3Config(access_key_id="AKIAREPRKEY", secret_access_key="repr-secret")
    text = repr(WriteSettings(KEYS, config, CsvFormat(), SCHEMA, 2**30))
    assert "AKIAREPRKEY" not in text and "repr-secret" not in text and "sink_id='s1'" in text


def test_a_table_layout_routes_by_transform_and_reports_each_files_partition(fake_s3, pool):
    """A table's layout: directories as Iceberg names them, every column kept in the files, and
    each pending file carries its partition record; ``None`` and ``"null"`` share a directory
    but never a file."""
    from beam_s3_sink.iceberg_commit import iceberg_schema
    from beam_s3_sink.table_layout import TableLayout

    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    layout = TableLayout.of(*reversed(iceberg_schema(schema, ["name", "bucket(2, id)"])))
    w = writer(fake_s3, pool, schema=schema, layout=layout)
    for i, name in enumerate(["", None, "null", "", None]):
        w.add({"id": i, "name": name})
    report = w.finish()
    bodies = complete(fake_s3, report)
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    bucket = BucketTransform(2).transform(LongType())
    assert [bucket(i) for i in range(5)] == [0, 0, 0, 1, 0]
    found = {f.partition: (f.key.rsplit("/", 1)[0], bodies[f.key]) for f in report.files}
    assert found == {
        (("name", ""), ("id_bucket", 0)): ("p/name=/id_bucket=0", b'0,""\n'),
        (("name", ""), ("id_bucket", 1)): ("p/name=/id_bucket=1", b'3,""\n'),
        (("name", None), ("id_bucket", 0)): ("p/name=null/id_bucket=0", b"1,\n4,\n"),
        (("name", "null"), ("id_bucket", 0)): ("p/name=null/id_bucket=0", b"2,null\n"),
    }
    assert len({f.key for f in report.files}) == 4


# max_bad_rows: a line format's batch is rendered once ---------------------------------------------
def _renders(monkeypatch, fmt):
    """Count the rows each render of ``fmt``'s lines takes (one entry per render)."""
    from beam_s3_sink.formats import csv, jsonl, postgres_text

    rendered = []
    if isinstance(fmt, JsonlFormat):
        line_array = jsonl._line_array

        def counting(batch):
            rendered.append(batch.num_rows)
            return line_array(batch)

        monkeypatch.setattr(jsonl, "_line_array", counting)
        return rendered
    lines = csv._CsvLines if isinstance(fmt, CsvFormat) else postgres_text._TextLines
    call = lines.__call__

    def counting_call(self, batch):
        rendered.append(batch.num_rows)
        return call(self, batch)

    monkeypatch.setattr(lines, "__call__", counting_call)
    return rendered


def screening_writer(fake, pool, fmt, max_bad_rows, max_file_size=2**30, layout=Layout(), schema=SCHEMA):
    def name(directory, number):
        return (f"p/{directory}/" if directory else "p/") + f"file-{number:04d}.{fmt.extension}"

    limit = BadRowLimit.parse(max_bad_rows)
    with_limit = dataclasses.replace(settings(fmt, max_file_size, layout, schema), bad_rows=limit)
    return FileWriter(fake, pool, with_limit, name, encode_pool=pool.encode_pool)


def _batches(count=4, rows=25):
    return [
        pa.record_batch({"id": range(b * rows, (b + 1) * rows), "name": [f"n{b}"] * rows}, schema=SCHEMA)
        for b in range(count)
    ]


def _write_all(w):
    for batch in _batches():
        w.add_batch(batch)
    return w.finish()


def _written(fake, report):
    """The lines of every file of ``report``, in order."""
    bodies = complete(fake, report)
    unzip = gzip.decompress if report.files[0].key.endswith(".gz") else bytes
    return b"".join(unzip(bodies[f.key]) for f in report.files).splitlines()


@pytest.mark.parametrize(
    "fmt", [CsvFormat(), CsvFormat(compression="gzip"), TextFormat(), JsonlFormat()], ids=lambda f: f.extension
)
@pytest.mark.parametrize("max_file_size", [2**30, 300], ids=["one file", "many files"])
def test_with_max_bad_rows_each_batch_is_rendered_once(fake_s3, pool, monkeypatch, fmt, max_file_size):
    """The lines ``check_values`` renders are the ones written, also when a batch spans files."""
    expected = _written(fake_s3, _write_all(screening_writer(fake_s3, pool, fmt, 0, max_file_size)))
    rendered = _renders(monkeypatch, fmt)
    report = _write_all(screening_writer(fake_s3, pool, fmt, 5, max_file_size))
    assert report.error is None and report.rows == 100 and report.dead_letters == ()
    assert rendered == [25, 25, 25, 25]  # the check's renders, none by the encoders
    assert _written(fake_s3, report) == expected and len(expected) == 100
    assert (len(report.files) > 1) == (max_file_size == 300)


def test_with_max_bad_rows_each_partition_is_rendered_once(fake_s3, pool, monkeypatch):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.string())])
    batch = pa.record_batch({"id": range(9), "name": list("abcdefghi"), "day": ["a", "b", "c"] * 3}, schema=schema)
    rendered = _renders(monkeypatch, CsvFormat())
    w = screening_writer(fake_s3, pool, CsvFormat(), 5, layout=Layout(partition_by=("day",)), schema=schema)
    w.add_batch(batch)
    report = w.finish()
    assert sorted(rendered) == [3, 3, 3]
    assert complete(fake_s3, report) == {
        "p/day=a/file-0001.csv": b"0,a\n3,d\n6,g\n",
        "p/day=b/file-0001.csv": b"1,b\n4,e\n7,h\n",
        "p/day=c/file-0001.csv": b"2,c\n5,f\n8,i\n",
    }


@pytest.mark.parametrize("fmt", [CsvFormat(), TextFormat()], ids=lambda f: f.name)
@pytest.mark.parametrize("partition_by", [(), ("day",)], ids=["no partitions", "partitions"])
def test_a_batch_with_a_bad_value_keeps_exactly_its_good_rows(fake_s3, pool, fmt, partition_by):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.string())])
    names = [f"n{i}" if i != 6 else "nul\x00" for i in range(10)]
    batch = pa.record_batch({"id": range(10), "name": names, "day": ["a", "b"] * 5}, schema=schema)
    layout = Layout(partition_by=partition_by)
    w = screening_writer(fake_s3, pool, fmt, 1, layout=layout, schema=schema, max_file_size=20)
    w.add_batch(batch)
    report = w.finish()
    assert report.error is None and report.rows == 9
    (bad,) = report.dead_letters
    assert bad.column == "name" and '"id": 6' in bad.element and "NUL" in bad.reason
    files = complete(fake_s3, report)
    ids = sorted(
        int(line.split(b"," if fmt.name == "csv" else b"\t")[0]) for f in files.values() for line in f.splitlines()
    )
    assert ids == [0, 1, 2, 3, 4, 5, 7, 8, 9]  # each good row once


def test_without_max_bad_rows_no_batch_is_checked(fake_s3, pool, monkeypatch):
    rendered = _renders(monkeypatch, CsvFormat())
    monkeypatch.setattr(CsvFormat, "check_values", lambda self, batch: pytest.fail("checked"))
    report = _write_all(screening_writer(fake_s3, pool, CsvFormat(), 0))
    assert report.rows == 100 and rendered == [25, 25, 25, 25]
