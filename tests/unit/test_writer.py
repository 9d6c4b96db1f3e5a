"""writer: FileWriter against the in-memory S3 (files, sizes, partitions, Arrow input, errors).

Every test runs twice: encoding in the caller's thread, and on an encode thread (as the upload
DoFns run it), which must not change a byte, a key or an error."""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_s3_sink.config import S3Config
from beam_s3_sink.formats import CsvFormat, ParquetFormat, TextFormat
from beam_s3_sink.layout import Layout
from beam_s3_sink.writer import ENCODE_AHEAD, FileWriter

from .fakes import FakeS3

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
CONFIG = S3Config()


@pytest.fixture(params=["caller", "encode-thread"])
def pool(request):
    """The part pool; with the ``encode-thread`` parameter it also carries an encode pool,
    which :func:`writer` hands to the FileWriter."""
    with ThreadPoolExecutor(2) as executor, ThreadPoolExecutor(1, thread_name_prefix="encode") as encode:
        executor.encode_pool = encode if request.param == "encode-thread" else None
        yield executor


def writer(fake, pool, fmt=CsvFormat(), max_file_size=2**30, layout=Layout(), schema=SCHEMA, **kwargs):
    def name(directory, number):
        return (f"p/{directory}/" if directory else "p/") + f"file-{number:04d}.{fmt.extension}"

    kwargs.setdefault("encode_pools", (pool.encode_pool,) if pool.encode_pool else ())
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


def test_add_rows_writes_what_add_writes(fake_s3, pool):
    rows = [{"id": i, "name": f"n{i}"} for i in range(300)]
    one, many = writer(fake_s3, pool, max_file_size=1000), writer(fake_s3, pool, max_file_size=1000)
    for row in rows:
        one.add(row)
    many.add_rows(rows[:100])
    many.add_rows(rows[100:])
    first, second = complete(fake_s3, one.finish()), complete(fake_s3, many.finish())
    assert list(first.values()) == list(second.values()) and len(first) > 2


def test_add_rows_takes_beam_rows_batches_and_partitions(fake_s3, pool):
    import apache_beam as beam

    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    w = writer(fake_s3, pool, schema=schema, layout=Layout(partition_by=("day",)))
    w.add_rows([{"id": 1, "day": "a"}, beam.Row(id=2, day="b"), pa.record_batch({"id": [3], "day": ["a"]})])
    bodies = complete(fake_s3, w.finish())
    assert bodies == {"p/day=a/file-0001.csv": b"1\n3\n", "p/day=b/file-0001.csv": b"2\n"}


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


def test_row_batches_encode_on_the_thread_only_to_finish_a_row_group(fake_s3):
    """The row buffer's batches that the Parquet encoder only holds are written in the
    caller's thread (no hand-off per batch); a batch that completes a row group is encoded on
    the encode thread; the file holds every row in order. (The first batch opens the file,
    on the thread, before there is an encoder to ask.)"""
    writes = []

    class Recording(ParquetFormat):
        def open(self, schema, out, max_file_size):
            encoder = super().open(schema, out, max_file_size)
            write = encoder.write

            def recorded(batch):
                writes.append((threading.current_thread().name.split("_")[0], encoder.buffers(batch)))
                return write(batch)

            encoder.write = recorded
            return encoder

    with ThreadPoolExecutor(2) as parts, ThreadPoolExecutor(1, thread_name_prefix="encode") as encode:
        parts.encode_pool = encode
        w = writer(fake_s3, parts, fmt=Recording(row_group_size=16 * 1024), buffer_bytes=4096)
        rows = [{"id": i, "name": f"name-{i}"} for i in range(20_000)]
        w.add_rows(rows[:10_000])
        for i, row in enumerate(rows[10_000:]):
            w.add(row)
            if i % 20 == 0:  # let the encode thread go idle, however loaded the machine is
                encode.submit(lambda: None).result()
        report = w.finish()
    assert report.error is None and report.rows == 20_000
    threads = {buffered: {name for name, b in writes[1:] if b == buffered} for buffered in (True, False)}
    # Batches that queued behind a row group while it was encoded are written on the thread too;
    # those that came while it was idle, in the caller's.
    assert "MainThread" in threads[True] and threads[False] == {"encode"}, writes[:5]
    (body,) = complete(fake_s3, report).values()
    table = pq.read_table(io.BytesIO(body))
    assert table.to_pylist() == rows and pq.read_metadata(io.BytesIO(body)).num_row_groups > 3


def test_an_encode_error_on_the_thread_stops_later_batches(fake_s3, pool):
    w = writer(fake_s3, pool, fmt=TextFormat(null="x"))
    w.add_batch(pa.record_batch({"id": [1], "name": ["ok"]}, schema=SCHEMA))
    w.add_batch(pa.record_batch({"id": [2], "name": ["x"]}, schema=SCHEMA))  # cannot be encoded
    for i in range(3, 8):
        w.add_batch(pa.record_batch({"id": [i], "name": ["later"]}, schema=SCHEMA))
    report = w.finish()
    assert "column 'name' (string), value 'x'" in report.error and report.files == ()
    assert fake_s3.uploads == {}  # aborted, once the thread was idle


# lanes: large Arrow input encoded into two files at once -------------------------------------
LANE_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _lane_batches(count: int, rows: int = 1000):
    return [
        pa.record_batch(
            {"id": list(range(i * rows, (i + 1) * rows)), "name": [f"n{j}" for j in range(rows)]},
            schema=LANE_SCHEMA,
        )
        for i in range(count)
    ]


@pytest.fixture
def lanes(monkeypatch):
    """Two encode threads, and lanes that start after 3 batches' bytes and split every batch."""
    import beam_s3_sink.writer as writer_module

    size = _lane_batches(1)[0].nbytes
    monkeypatch.setattr(writer_module, "LANES_FROM", 3 * size)
    monkeypatch.setattr(writer_module, "LANE_SPLIT_FROM", size // 2)
    with ThreadPoolExecutor(2) as parts:
        pools = tuple(ThreadPoolExecutor(1, thread_name_prefix=f"lane-{n}") for n in range(2))
        parts.encode_pool = None
        parts.lanes = pools
        yield parts
        for p in pools:
            p.shutdown()


class _ThreadRecording(ParquetFormat):
    """Parquet, recording which thread encoded each batch, per file (by the encoder's id)."""

    def __init__(self, seen):
        super().__init__()
        object.__setattr__(self, "_seen", seen)

    def open(self, schema, out, max_file_size):
        encoder = super().open(schema, out, max_file_size)
        write, seen = encoder.write, self._seen

        def recorded(batch):
            seen.setdefault(id(encoder), set()).add(threading.current_thread().name.split("_")[0])
            return write(batch)

        encoder.write = recorded
        return encoder


def test_large_arrow_input_is_encoded_into_two_files_on_two_threads(fake_s3, lanes):
    seen = {}
    w = writer(fake_s3, lanes, fmt=_ThreadRecording(seen), encode_pools=lanes.lanes)
    batches = _lane_batches(12)
    for batch in batches:
        w.add_batch(batch)
    report = w.finish()
    assert report.error is None and report.rows == 12_000
    bodies = complete(fake_s3, report)
    assert sorted(bodies) == ["p/file-0001.parquet", "p/file-0002.parquet"]
    first = pq.read_table(io.BytesIO(bodies["p/file-0001.parquet"]))["id"].to_pylist()
    second = pq.read_table(io.BytesIO(bodies["p/file-0002.parquet"]))["id"].to_pylist()
    # The first three batches go to lane 0 whole; then each lane takes half of every batch.
    assert first == list(range(3000)) + [i for b in range(3, 12) for i in range(b * 1000, b * 1000 + 500)]
    assert second == [i for b in range(3, 12) for i in range(b * 1000 + 500, (b + 1) * 1000)]
    assert sorted(seen.values(), key=sorted) == [{"lane-0"}, {"lane-1"}]  # one thread per file
    assert [f.rows for f in sorted(report.files, key=lambda f: f.key)] == [7500, 4500]


def test_lanes_make_the_same_files_from_the_same_input(lanes):
    """Sizes and order decide the lane, never timing: a rerun writes the same files (the lanes
    number the files they open in turn, so which full file gets which number may differ)."""
    runs = []
    for _ in range(2):
        fake = FakeS3()
        w = writer(fake, lanes, fmt=ParquetFormat(), max_file_size=40_000, encode_pools=lanes.lanes)
        for batch in _lane_batches(12):
            w.add_batch(batch)
        runs.append(complete(fake, w.finish()))
    assert sorted(runs[0].values()) == sorted(runs[1].values()) and len(runs[0]) > 2
    names = sorted(runs[0])  # full files roll over to the directory's next number, whatever the lane
    assert names == [f"p/file-{n:04d}.parquet" for n in range(1, len(names) + 1)]
    assert sorted(i for body in runs[0].values() for i in pq.read_table(io.BytesIO(body))["id"].to_pylist()) == list(
        range(12_000)
    )


def test_small_arrow_input_rows_and_partitions_use_one_lane(fake_s3, lanes):
    w = writer(fake_s3, lanes, encode_pools=lanes.lanes)
    for batch in _lane_batches(3):  # under LANES_FROM
        w.add_batch(batch)
    assert len(w.finish().files) == 1

    fake = FakeS3()
    w = writer(fake, lanes, encode_pools=lanes.lanes)
    for batch in _lane_batches(30, rows=300):  # each under LANE_SPLIT_FROM
        w.add_batch(batch)
    assert len(w.finish().files) == 1

    fake = FakeS3()
    w = writer(fake, lanes, encode_pools=lanes.lanes)
    w.add_rows([row for batch in _lane_batches(12) for row in batch.to_pylist()])  # rows never take a lane
    assert len(w.finish().files) == 1

    fake = FakeS3()
    w = writer(fake, lanes, encode_pools=lanes.lanes, layout=Layout(max_open_files=1))  # one file at a time
    for batch in _lane_batches(12):
        w.add_batch(batch)
    assert len(w.finish().files) == 1


def test_an_encode_error_in_the_second_lane_makes_nothing_visible(fake_s3, lanes):
    w = writer(fake_s3, lanes, fmt=TextFormat(null="bad!"), encode_pools=lanes.lanes)
    batches = _lane_batches(12)
    bad = pa.record_batch({"id": [-1], "name": ["bad!"]}, schema=LANE_SCHEMA)  # cannot be encoded
    for i, batch in enumerate(batches):
        if i == 4:  # in the half that lane 1 encodes
            batch = pa.Table.from_batches([batch, bad]).combine_chunks().to_batches()[0]
        w.add_batch(batch)
    report = w.finish()
    assert "column 'name' (string), value 'bad!'" in report.error and report.files == ()
    assert "file-0002" in report.error  # lane 1's file
    assert fake_s3.uploads == {}  # both lanes' uploads aborted, once their threads were idle
