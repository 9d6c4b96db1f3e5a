"""spill: rows into keyed Arrow IPC blobs (a pipeline: SpillFn), blobs back, and the writer per key."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_s3_sink import spill
from beam_s3_sink.formats import CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.messages import InitOutcome
from beam_s3_sink.spill import _SpillFn as SpillFn
from beam_s3_sink.spill import _WriteSpilledFn as WriteSpilledFn
from beam_s3_sink.spill import decode_blob, encode_blob

from .beam_testing import pipeline
from .fakes import serve

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows_of(blob):
    out = []
    for item in decode_blob(blob):
        out.extend(item.to_pylist() if isinstance(item, pa.RecordBatch) else [item])
    return out


def test_blob_round_trip():
    batches = [pa.record_batch([[1, 2], ["a", None]], schema=SCHEMA), pa.record_batch([[3], ["c"]], schema=SCHEMA)]
    blob = encode_blob(batches, SCHEMA)
    assert [b.to_pylist() for b in decode_blob(blob)] == [b.to_pylist() for b in batches]
    assert list(decode_blob(encode_blob([], SCHEMA))) == []


def test_rows_that_do_not_convert_travel_as_themselves():
    blob = spill._encode_rows([{"id": "x"}, 7])
    assert list(decode_blob(blob)) == [{"id": "x"}, 7]


def test_every_row_reaches_exactly_one_blob():
    rows = [{"id": i, "name": str(i)} for i in range(3000)]
    with pipeline() as p:
        out = (
            p
            | beam.Create(rows)
            | beam.ParDo(SpillFn(SCHEMA, blob_bytes=4096, group_bytes=16384))
            | beam.FlatMap(lambda pair: rows_of(pair[1]))
        )
        assert_that(out, equal_to(rows))


def test_keys_change_every_group_bytes():
    rows = [{"id": i, "name": "x" * 50} for i in range(2000)]

    def at_least_six(counts):
        # ~130 KB of Arrow data in groups of ~16 KB: at least six keys.
        assert counts[0] >= 6, f"{counts[0]} keys"

    with pipeline() as p:
        keys = (
            p
            | beam.Create(rows)
            | beam.ParDo(SpillFn(SCHEMA, blob_bytes=4096, group_bytes=16384))
            | beam.Keys()
            | beam.Distinct()
            | beam.combiners.Count.Globally()
        )
        assert_that(keys, at_least_six)


def test_arrow_elements_and_bad_rows_are_shipped():
    batch = pa.record_batch({"name": ["t"], "id": pa.array([5], pa.int32())})
    with pipeline() as p:
        out = (
            p
            | beam.Create([{"id": 1, "name": "a"}, batch, {"id": "bad", "name": "b"}, 42], reshuffle=False)
            | beam.ParDo(SpillFn(SCHEMA))
            | beam.FlatMap(lambda pair: rows_of(pair[1]))
        )
        assert_that(out, equal_to([{"id": 1, "name": "a"}, {"id": 5, "name": "t"}, {"id": "bad", "name": "b"}, 42]))


@pytest.fixture
def spilled_writer(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)
    fn = WriteSpilledFn(CopyKeys(S3Location("bucket", "p"), "s1"), config, CsvFormat(), SCHEMA, 2**30)
    fn.setup()
    yield fn
    fn.teardown()


def test_the_writer_of_a_key_writes_its_blobs_into_pending_files(fake_s3, spilled_writer):
    blobs = [
        encode_blob([pa.record_batch([[1], ["a"]], schema=SCHEMA)], SCHEMA),
        spill._encode_rows([{"id": 2, "name": "b"}]),
    ]
    (report,) = spilled_writer.process(("key", blobs), InitOutcome())
    assert report.error is None and report.rows == 2 and fake_s3.keys() == []
    (pending,) = report.files
    assert CopyKeys(S3Location("bucket", "p"), "s1").is_data_file(pending.key)
    assert fake_s3.uploads[pending.upload_id].parts[1][1] == b"1,a\n2,b\n"


def test_the_writer_writes_nothing_when_init_failed(fake_s3, spilled_writer):
    assert list(spilled_writer.process(("key", [encode_blob([], SCHEMA)]), InitOutcome(error="no"))) == []
    assert fake_s3.calls == []


def test_a_bad_row_in_a_blob_is_the_report_error(spilled_writer):
    (report,) = spilled_writer.process(("key", [spill._encode_rows([{"id": "x", "name": "b"}])]), InitOutcome())
    assert "column 'id' expects int64, but a row holds 'x'" in report.error
