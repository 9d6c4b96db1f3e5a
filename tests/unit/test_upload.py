"""upload: the per-bundle upload DoFn, driven as a runner drives it, against the fake."""

from __future__ import annotations

import pyarrow as pa
import pytest

from beam_s3_sink.formats import CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.messages import InitOutcome
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
