"""upload: the per-bundle upload DoFn and the Gather step before it, driven as a runner drives them, against the fake."""

from __future__ import annotations

import pyarrow as pa
import pytest

from beam_s3_sink.formats import CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.messages import InitOutcome
from beam_s3_sink.upload import GATHER_ROWS
from beam_s3_sink.upload import _GatherFn as GatherFn
from beam_s3_sink.upload import _UploadFn as UploadFn

from .fakes import serve

KEYS = CopyKeys(S3Location("bucket", "p"), "s1")
SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


@pytest.fixture
def upload_fn(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)
    fn = UploadFn(KEYS, config, CsvFormat(), SCHEMA, 2**30, Layout(partition_by=("day",)))
    fn.setup()
    yield fn
    fn.teardown()


def bundle(fn, rows, outcome=InitOutcome()):
    fn.start_bundle()
    for row in rows:
        assert list(fn.process(row, outcome)) == []
    return [w.value for w in fn.finish_bundle()]


def test_one_report_per_bundle_with_pending_files_only(fake_s3, upload_fn):
    (report,) = bundle(upload_fn, [{"id": 1, "day": "a"}, {"id": 2, "day": "b"}])
    assert report.error is None and report.rows == 2
    assert sorted(f.key.split("/")[1] for f in report.files) == ["day=a", "day=b"]
    assert all(KEYS.is_data_file(f.key) for f in report.files)
    assert fake_s3.keys() == []  # nothing completed


def test_each_bundle_names_its_files_with_a_fresh_token(upload_fn):
    (first,) = bundle(upload_fn, [{"id": 1, "day": "a"}])
    (second,) = bundle(upload_fn, [{"id": 1, "day": "a"}])
    assert first.files[0].key != second.files[0].key


def test_a_bundle_without_rows_reports_nothing(upload_fn):
    assert bundle(upload_fn, []) == []


def test_nothing_is_written_when_init_failed(fake_s3, upload_fn):
    assert bundle(upload_fn, [{"id": 1, "day": "a"}], InitOutcome(error="not empty")) == []
    assert fake_s3.calls == []


def gather(elements):
    """Drive _GatherFn over one bundle; return the Gathered lists it emits, in order."""
    fn = GatherFn()
    fn.start_bundle()
    out = [g for e in elements for g in fn.process(e)]
    return out + [w.value for w in fn.finish_bundle()]


def test_gather_keeps_order_in_lists_of_at_most_gather_rows():
    rows = [{"id": i} for i in range(2 * GATHER_ROWS + 5)]
    lists = gather(rows)
    assert [len(g.elements) for g in lists] == [GATHER_ROWS, GATHER_ROWS, 5]
    assert [r for g in lists for r in g.elements] == rows
    assert gather([]) == []


def test_an_arrow_batch_ends_its_list():
    batch = pa.record_batch({"id": [7, 8]})
    lists = gather([{"id": 1}, batch, {"id": 2}])
    assert [g.elements for g in lists] == [[{"id": 1}, batch], [{"id": 2}]]


def test_gathered_lists_write_what_single_rows_write(fake_s3, upload_fn):
    rows = [{"id": i, "day": "ab"[i % 2]} for i in range(600)]
    (one,) = bundle(upload_fn, rows)
    (many,) = bundle(upload_fn, gather(rows))
    assert (many.rows, many.bytes, len(many.files)) == (one.rows, one.bytes, len(one.files)) == (600, one.bytes, 2)


def test_a_gathered_bad_row_fails_the_bundle_with_nothing_visible(fake_s3, upload_fn):
    rows = [{"id": i, "day": "a"} for i in range(300)] + [{"id": "x", "day": "a"}]
    (report,) = bundle(upload_fn, gather(rows))
    assert "column 'id' expects int64, but a row holds 'x'" in report.error
    assert fake_s3.keys() == [] and fake_s3.uploads == {}
