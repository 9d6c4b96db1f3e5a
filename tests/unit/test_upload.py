"""upload: the Write DoFn (_WriteFn) behind the Batch DoFn, driven as a runner drives them, against the fake.

``per_bundle``: Batch and Write fused, one writer per bundle. ``grouped``: Batch's blobs
gathered by key (as a ``GroupByKey`` does), one writer per key; an int key is a
``num_batches`` shard."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest
from apache_beam.transforms.window import GlobalWindow

from beam_s3_sink.batches import _BatchFn, encode_blob
from beam_s3_sink.formats import CsvFormat
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.layout import Layout
from beam_s3_sink.messages import InitOutcome
from beam_s3_sink.results import CopyToResult
from beam_s3_sink.upload import _WriteFn
from beam_s3_sink.writer import WriteSettings

from .fakes import serve

KEYS = CopyKeys(S3Location("bucket", "p"), "s1")
SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])
READY = InitOutcome()


@pytest.fixture
def settings(fake_s3, monkeypatch):
    config = serve(fake_s3, monkeypatch)
    return WriteSettings(KEYS, config, CsvFormat(), SCHEMA, 2**30, Layout(partition_by=("day",)))


def write_fn(settings, grouped):
    fn = _WriteFn(settings, grouped)
    fn.setup()
    return fn


def bundle(settings, rows, outcome=READY, fn=None):
    """One bundle through Batch and Write fused (the per_bundle graph); the reports it emits."""
    batch = _BatchFn(settings.schema, grouped=False)
    batch.setup()
    write = fn or write_fn(settings, grouped=False)
    batch.start_bundle()
    write.start_bundle()
    for row in rows:
        for pair in batch.process(row):
            assert list(write.process(pair, outcome)) == []
    for windowed in batch.finish_bundle():
        assert list(write.process(windowed.value, outcome)) == []
    out = list(write.finish_bundle())
    assert all(list(w.windows) == [GlobalWindow()] for w in out)
    if fn is None:
        write.teardown()
    return [w.value for w in out]


def grouped(settings, bundles, outcome=READY, num_batches=None):
    """Bundles through Batch, a GroupByKey, then Write (the grouped graph); the reports."""
    batch = _BatchFn(settings.schema, grouped=True, num_batches=num_batches)
    batch.setup()
    groups = defaultdict(list)
    for rows in bundles:
        batch.start_bundle()
        pairs = [pair for row in rows for pair in batch.process(row)] + [w.value for w in batch.finish_bundle()]
        for key, blob in pairs:
            groups[key].append(blob)
    write = write_fn(settings, grouped=True)
    write.start_bundle()
    reports = [r for item in sorted(groups.items(), key=str) for r in write.process(item, outcome)]
    assert list(write.finish_bundle()) == []
    write.teardown()
    return reports


def test_one_report_per_bundle_with_pending_files_only(fake_s3, settings):
    (report,) = bundle(settings, [{"id": 1, "day": "a"}, {"id": 2, "day": "b"}])
    assert report.error is None and report.rows == 2
    assert sorted(f.key.split("/")[1] for f in report.files) == ["day=a", "day=b"]
    assert all(KEYS.is_data_file(f.key) for f in report.files)
    assert fake_s3.keys() == []  # nothing completed


def test_each_bundle_names_its_files_with_a_fresh_token(settings):
    fn = write_fn(settings, grouped=False)
    (first,) = bundle(settings, [{"id": 1, "day": "a"}], fn=fn)
    (second,) = bundle(settings, [{"id": 1, "day": "a"}], fn=fn)
    assert first.files[0].key != second.files[0].key


def test_a_bundle_without_rows_reports_nothing(fake_s3, settings):
    assert bundle(settings, []) == [] and fake_s3.calls == []


@pytest.mark.parametrize("outcome", [InitOutcome(error="not empty"), InitOutcome(done=CopyToResult("s3://b/p", "s1"))])
def test_nothing_is_written_when_init_failed_or_the_copy_is_done(fake_s3, settings, outcome):
    assert bundle(settings, [{"id": 1, "day": "a"}], outcome) == []
    assert grouped(settings, [[{"id": 1, "day": "a"}]], outcome) == []
    assert grouped(settings, [[{"id": 1, "day": "a"}]], outcome, num_batches=3) == []
    assert fake_s3.calls == []


def test_grouped_writes_what_per_bundle_writes(fake_s3, settings):
    rows = [{"id": i, "day": "ab"[i % 2]} for i in range(600)]
    (one,) = bundle(settings, rows)
    (many,) = grouped(settings, [rows[:250], rows[250:]])
    assert (many.rows, many.bytes, len(many.files)) == (one.rows, one.bytes, len(one.files)) == (600, one.bytes, 2)
    assert fake_s3.keys() == []


def test_one_writer_per_key_with_a_fresh_token(fake_s3, settings):
    rows = [{"id": i, "day": "a"} for i in range(10)]
    reports = grouped(settings, [rows[:5], rows[5:]])  # one _BatchFn instance: one key
    (report,) = reports
    assert report.error is None and report.rows == 10 and len(report.files) == 1 and fake_s3.keys() == []
    (pending,) = report.files
    assert KEYS.is_data_file(pending.key) and pending.key.startswith("p/day=a/s1-")
    assert fake_s3.uploads[pending.upload_id].parts[1][1] == b"".join(b"%d\n" % i for i in range(10))
    again = grouped(settings, [rows[:5], rows[5:]])  # a retry: its own token
    assert {f.key for f in report.files}.isdisjoint(f.key for r in again for f in r.files)


def test_a_shard_writes_the_same_keys_every_run(fake_s3, settings):
    rows = [{"id": i, "day": "ab"[i % 2]} for i in range(200)]
    first = grouped(settings, [rows[:100], rows[100:]], num_batches=4)
    again = grouped(settings, [rows[150:], rows[:150]], num_batches=4)  # other bundles, other order
    assert len(first) == 4 and sum(r.rows for r in first) == 200
    keys = sorted(f.key for r in first for f in r.files)
    assert keys == sorted(f.key for r in again for f in r.files)
    assert all(KEYS.is_data_file(k) and "-batch-000" in k for k in keys)
    assert {k.split("/")[1] for k in keys} == {"day=a", "day=b"}


def test_a_bad_row_fails_the_bundle_with_nothing_visible(fake_s3, settings):
    rows = [{"id": i, "day": "a"} for i in range(300)] + [{"id": "x", "day": "a"}]
    (report,) = bundle(settings, rows)
    assert "column 'id' expects int64, but a row holds 'x'" in report.error
    assert report.files == () and fake_s3.keys() == [] and fake_s3.uploads == {}


@pytest.mark.parametrize("num_batches", [None, 3])
def test_a_bad_row_fails_its_key_with_nothing_visible(fake_s3, settings, num_batches):
    rows = [{"id": i, "day": "a"} for i in range(300)]
    reports = grouped(settings, [rows, [{"id": "x", "day": "a"}]], num_batches=num_batches)
    errors = [r.error for r in reports if r.error is not None]
    assert len(errors) == 1 and "column 'id' expects int64, but a row holds 'x'" in errors[0]
    assert "nothing was made visible" in errors[0] and fake_s3.keys() == []


def test_a_writer_stops_at_an_error_blob(fake_s3, settings):
    from beam_s3_sink.batches import _ERROR

    good = encode_blob([pa.record_batch({"id": [1], "day": ["a"]}, schema=SCHEMA)], SCHEMA)
    fn = write_fn(settings, grouped=True)
    (report,) = fn.process(("key", [good, _ERROR + b"a row does not fit", good]), READY)
    assert "a row does not fit" in report.error and report.files == ()
    assert fake_s3.uploads == {} and fake_s3.keys() == []
    assert sum(1 for name in fake_s3.operations() if name == "CreateMultipartUpload") <= 1


def test_a_refused_upload_is_the_report_error(fake_s3, settings):
    fake_s3.refuse("UploadPart", "AccessDenied")
    (report,) = bundle(settings, [{"id": 1, "day": "a"}])
    assert "S3 refused UploadPart on s3://bucket/p/day=a/s1-" in report.error and "AccessDenied" in report.error
    assert fake_s3.keys() == [] and fake_s3.uploads == {}
