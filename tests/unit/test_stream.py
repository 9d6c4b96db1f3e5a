"""stream: units and their objects, one unit's commit, a stream's start and end; checks at pipeline build.

- Units: ``StreamUnit.id`` and ``unit_of(window, pane)``; which keys are a copy's unit objects
  (sink ``orders`` never takes those of ``orders-2026``); a unit in the manifest and back.
- Completion of one unit (``_CompleteFn(..., stream=True)`` driven directly): a commit, a
  replay of a committed unit, a commit cut short and finished by the next attempt, an empty
  pane, an upload error, a refused commit.
- Initialization of a stream over an earlier run's objects, and the end of the stream
  (``_FinishStreamFn``).
- ``CopyToS3``/``CopyToIceberg`` applied to an unbounded PCollection (built, never run): the
  windowing each accepts and the options each refuses; a stream's graph reads no side input,
  and its steps initialize themselves (``stream_init.InitializedInStep``).
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone
from typing import Dict, Optional

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream as EventStream  # not collected as a test class
from apache_beam.transforms import trigger
from apache_beam.transforms.window import FixedWindows, GlobalWindow, GlobalWindows, IntervalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming

from beam_s3_sink import CopyToIceberg, CopyToS3, CsvFormat, S3Config
from beam_s3_sink.claim import CONDITIONAL
from beam_s3_sink.completion import _CompleteFn
from beam_s3_sink.errors import CopyToS3Error
from beam_s3_sink.initialization import _InitializeFn, initialize
from beam_s3_sink.keys import CopyKeys, S3Location
from beam_s3_sink.manifest import manifest_json, result_from_manifest
from beam_s3_sink.messages import InitOutcome, PendingFile, UploadReport
from beam_s3_sink.results import CopiedFile, CopyToResult, StreamUnit
from beam_s3_sink.stream import _FinishStreamFn, commit_record, unit_of, writer_token
from beam_s3_sink.stream_init import InitializedInStep, outcome_of
from beam_s3_sink.writer import WriteSettings

from .fakes import serve

KEYS = CopyKeys(S3Location("bucket", "p"), "orders")
OTHER = CopyKeys(S3Location("bucket", "p"), "orders-2026")  # another sink id whose name extends this one
SCHEMA = pa.schema([("id", pa.int64())])
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
STARTED = InitOutcome(guard=CONDITIONAL)  # the stream's initialization took the claim


def at(*args: int) -> datetime:
    """A moment in UTC: ``at(2026, 12, 7, 3, 0)``."""
    return datetime(*args, tzinfo=timezone.utc)


def window(start: datetime, end: datetime) -> IntervalWindow:
    """Beam's window from ``start`` to ``end``, to the microsecond."""
    micros = timedelta(microseconds=1)
    return IntervalWindow(Timestamp(micros=(start - EPOCH) // micros), Timestamp(micros=(end - EPOCH) // micros))


def pane(index: int = 0, timing: int = PaneInfoTiming.ON_TIME) -> PaneInfo:
    return PaneInfo(index == 0, False, timing, index, index if timing != PaneInfoTiming.EARLY else -1)


W1 = window(at(2026, 12, 7, 3, 0), at(2026, 12, 7, 3, 5))
W2 = window(at(2026, 12, 7, 3, 5), at(2026, 12, 7, 3, 10))
UNIT = unit_of(W1, pane())


# --- 1. units: ids, and which keys are a copy's unit objects ---------------------------------


def test_the_unit_of_a_window_pane_names_the_window_in_utc_and_the_pane():
    unit = unit_of(W1, pane(2, PaneInfoTiming.LATE))
    assert unit == StreamUnit(at(2026, 12, 7, 3, 0), at(2026, 12, 7, 3, 5), 2, "LATE")
    assert unit.id == "20261207T030000Z-20261207T030500Z-p2"
    assert unit.start.utcoffset() == timedelta(0)


def test_microsecond_bounds_appear_in_the_id():
    unit = unit_of(window(at(2026, 1, 2, 3, 4, 5, 250000), at(2026, 1, 2, 3, 4, 5, 750001)), pane())
    assert unit.start == at(2026, 1, 2, 3, 4, 5, 250000) and unit.end == at(2026, 1, 2, 3, 4, 5, 750001)
    assert unit.id == "20260102T030405.250000Z-20260102T030405.750001Z-p0"


def test_the_unit_of_the_global_window_is_named_by_its_pane():
    unit = unit_of(GlobalWindow(), pane(3, PaneInfoTiming.EARLY))
    assert unit == StreamUnit(None, None, 3, "EARLY") and unit.id == "global-p3"


@pytest.mark.parametrize(
    "timing, name",
    [
        (PaneInfoTiming.EARLY, "EARLY"),
        (PaneInfoTiming.ON_TIME, "ON_TIME"),
        (PaneInfoTiming.LATE, "LATE"),
        (PaneInfoTiming.UNKNOWN, "UNKNOWN"),
    ],
)
def test_the_unit_names_the_panes_timing(timing, name):
    assert unit_of(W1, pane(1, timing)).timing == name


def test_the_pane_index_not_the_nonspeculative_one_names_the_unit():
    late = PaneInfo(False, True, PaneInfoTiming.LATE, 4, 1)
    assert unit_of(W1, late).pane == 4 and unit_of(W1, late).id.endswith("-p4")


def test_ids_are_the_same_on_every_attempt():
    assert unit_of(window(at(2026, 12, 7, 3, 0), at(2026, 12, 7, 3, 5)), pane()).id == UNIT.id


def test_ids_of_windows_of_one_size_sort_chronologically():
    starts = [at(2025, 12, 31, 23, 55) + timedelta(minutes=5 * i) for i in range(30)]
    ids = [unit_of(window(s, s + timedelta(minutes=5)), pane()).id for s in starts]
    assert sorted(ids) == ids


UNIT_IDS = [UNIT.id, "global-p0", "global-p12", unit_of(window(at(2026, 1, 1), at(2026, 1, 1, 0, 0, 0, 5)), pane(1)).id]


@pytest.mark.parametrize("unit_id", UNIT_IDS)
def test_a_copy_owns_its_unit_manifests_and_commit_records(unit_id):
    for key in (KEYS.unit_manifest(unit_id), KEYS.unit_commit(unit_id)):
        assert KEYS.is_unit_object(key) and KEYS.is_owned(key)


@pytest.mark.parametrize("unit_id", UNIT_IDS)
def test_a_copy_never_takes_the_unit_objects_of_a_sink_id_extending_its_own(unit_id):
    for key in (OTHER.unit_manifest(unit_id), OTHER.unit_commit(unit_id)):
        assert not KEYS.is_unit_object(key) and not KEYS.is_owned(key)
        assert OTHER.is_unit_object(key)
    for key in (KEYS.unit_manifest(unit_id), KEYS.unit_commit(unit_id)):
        assert not OTHER.is_unit_object(key) and not OTHER.is_owned(key)


@pytest.mark.parametrize(
    "key",
    [
        "p/_orders-global.manifest.json",  # no pane
        "p/_orders-global-p0.manifest.json.tmp",
        "p/_orders-global-p0.json",
        "p/sub/_orders-global-p0.manifest.json",  # not directly under P/
        "q/_orders-global-p0.manifest.json",  # another path
        "p/_orders-20261207T0300Z-20261207T0305Z-p0.manifest.json",  # not a unit's time
    ],
)
def test_keys_that_only_look_like_unit_objects_are_not(key):
    assert not KEYS.is_unit_object(key) and not KEYS.is_owned(key)


@pytest.mark.parametrize("keys", [KEYS, OTHER])
@pytest.mark.parametrize("unit_id", UNIT_IDS)
def test_unit_objects_are_no_copys_manifest_or_sentinel(keys, unit_id):
    for owner in (KEYS, OTHER):
        for key in (owner.unit_manifest(unit_id), owner.unit_commit(unit_id)):
            assert keys.manifest_owner(key) is None and keys.sentinel_owner(key) is None
    assert keys.manifest_owner(OTHER.manifest) == "orders-2026"  # the real ones still are
    assert keys.sentinel_owner(OTHER.sentinel) == "orders-2026"


# --- 2. a unit in the manifest and back --------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    [
        StreamUnit(None, None, 7, "EARLY"),
        UNIT,
        unit_of(window(at(2026, 1, 2, 3, 4, 5, 6), at(2026, 1, 2, 3, 4, 6, 6)), pane(1, PaneInfoTiming.LATE)),
    ],
    ids=["global", "interval", "microseconds"],
)
def test_the_manifest_gives_back_the_unit(unit):
    manifest_uri = f"s3://bucket/{KEYS.unit_manifest(unit.id)}"
    result = CopyToResult(
        uri="s3://bucket/p",
        sink_id="orders",
        rows=3,
        bytes=12,
        files=(CopiedFile("s3://bucket/p/orders-0123456789abcdef-0001.csv", 3, 12),),
        manifest_uri=manifest_uri,
        unit=unit,
    )
    data = manifest_json(result, {}, [])
    assert json.loads(data)["unit"]["id"] == unit.id
    back = result_from_manifest(data, manifest_uri)
    assert back == result and back.unit == unit and back.unit.id == unit.id


def test_a_bounded_copys_manifest_has_no_unit():
    result = CopyToResult(uri="s3://bucket/p", sink_id="orders", manifest_uri=f"s3://bucket/{KEYS.manifest}")
    data = manifest_json(result, {}, [])
    assert "unit" not in json.loads(data) and result_from_manifest(data, result.manifest_uri).unit is None


# --- 3. completion of one unit -----------------------------------------------------------------


class StreamSink:
    """A running stream of copy ``orders`` in the fake (its sentinel and claim are there): its
    writers' uploads, and its completing step run for one unit."""

    def __init__(self, fake, config) -> None:
        self.fake, self.config = fake, config
        self._tokens = itertools.count(1)
        fake.put_object(Bucket="bucket", Key=KEYS.sentinel, Body=b"")
        fake.put_object(Bucket="bucket", Key=KEYS.claim, Body=b'{"sink_id": "orders"}')

    def upload(self, *ids: int, keys: CopyKeys = KEYS, token: Optional[str] = None) -> PendingFile:
        """A CSV file of ``ids`` uploaded as one part, not completed (a writer's, named by ``token``)."""
        body = b"id\n" + b"".join(b"%d\n" % i for i in ids)
        key = keys.data_file(token or f"{next(self._tokens):016x}", 1, "csv")
        upload = self.fake.create_multipart_upload(Bucket="bucket", Key=key)["UploadId"]
        etag = self.fake.upload_part(Bucket="bucket", Key=key, UploadId=upload, PartNumber=1, Body=body)["ETag"]
        return PendingFile(key, upload, ((1, etag),), len(ids), len(body))

    def finish_upload(self, file: PendingFile) -> None:
        """Complete ``file``, as an attempt that died after completing it did."""
        parts = [{"PartNumber": n, "ETag": etag} for n, etag in file.parts]
        self.fake.complete_multipart_upload(
            Bucket="bucket", Key=file.key, UploadId=file.upload_id, MultipartUpload={"Parts": parts}
        )

    def complete(self, *files: PendingFile, error=None, win=W1, fail_on_error=False, init=STARTED, at=None):
        """The results of completing the report of ``files`` as unit ``unit_of(win, at or pane())``."""
        report = UploadReport(files=files, rows=sum(f.rows for f in files), bytes=sum(f.bytes for f in files))
        if error is not None:
            report = UploadReport(files=files, error=error)
        fn = _CompleteFn(WriteSettings(KEYS, self.config, CsvFormat(header=True), SCHEMA, 2**30), fail_on_error, True)
        fn.setup()
        return list(fn.process(report, init, window=win, pane=at or pane()))

    def visible(self, *files: PendingFile) -> bool:
        return any(("bucket", f.key) in self.fake.objects for f in files)

    def pending(self, *files: PendingFile) -> bool:
        return all(f.upload_id in self.fake.uploads for f in files)

    def aborted(self, *files: PendingFile) -> bool:
        return not any(f.upload_id in self.fake.uploads for f in files) and not self.visible(*files)

    def manifest(self, unit: StreamUnit = UNIT):
        return json.loads(self.fake.body(KEYS.unit_manifest(unit.id)))

    def has(self, key: str) -> bool:
        return ("bucket", key) in self.fake.objects


@pytest.fixture
def sink(fake_s3, monkeypatch) -> StreamSink:
    return StreamSink(fake_s3, serve(fake_s3, monkeypatch))


def uris(*files: PendingFile):
    return sorted(KEYS.location.object_uri(f.key) for f in files)


def test_a_unit_completes_its_files_and_writes_its_manifest(fake_s3, sink):
    mine = (sink.upload(1, 2), sink.upload(3))
    in_flight = sink.upload(9)  # the next unit's, being written
    (result,) = sink.complete(*mine)
    assert result.ok and result.unit == UNIT and (result.rows, result.bytes) == (3, sum(f.bytes for f in mine))
    assert [f.uri for f in result.files] == uris(*mine)
    assert result.manifest_uri == f"s3://bucket/p/_orders-{UNIT.id}.manifest.json"
    assert fake_s3.body(mine[0].key) == b"id\n1\n2\n" and fake_s3.body(mine[1].key) == b"id\n3\n"
    manifest = sink.manifest()
    assert sorted(e["url"] for e in manifest["entries"]) == uris(*mine) and manifest["rows"] == 3
    assert manifest["unit"]["id"] == UNIT.id and manifest["unit"]["window_start"] == "2026-12-07T03:00:00+00:00"
    assert not sink.has(KEYS.unit_commit(UNIT.id))
    assert sink.pending(in_flight)
    assert sink.has(KEYS.sentinel) and sink.has(KEYS.claim)  # the stream goes on
    touched = {kw["Key"] for name, kw in fake_s3.calls[2:] if name in ("PutObject", "DeleteObject")}
    assert not touched & {KEYS.sentinel, KEYS.claim}


def test_a_committed_unit_is_reported_again_and_the_new_attempts_uploads_aborted(fake_s3, sink):
    first = sink.complete(sink.upload(1, 2), sink.upload(3))
    completed = fake_s3.operations().count("CompleteMultipartUpload")
    retry = (sink.upload(1, 2), sink.upload(3))
    assert sink.complete(*retry) == first
    assert fake_s3.operations().count("CompleteMultipartUpload") == completed
    assert sink.aborted(*retry)


def test_a_commit_cut_short_is_finished_with_the_files_its_record_names(fake_s3, sink):
    earlier = (sink.upload(1), sink.upload(2, 3))
    commit_record(fake_s3, KEYS, UNIT, earlier, {})
    sink.finish_upload(earlier[0])  # then that attempt died
    mine = (sink.upload(1), sink.upload(2, 3))
    (result,) = sink.complete(*mine)
    assert result.ok and [f.uri for f in result.files] == uris(*earlier) and result.rows == 3
    assert fake_s3.body(earlier[1].key) == b"id\n2\n3\n" and sink.visible(earlier[0])
    assert sink.aborted(*mine)
    assert sorted(e["url"] for e in sink.manifest()["entries"]) == uris(*earlier)
    assert not sink.has(KEYS.unit_commit(UNIT.id))


def test_an_empty_pane_commits_nothing(fake_s3, sink):
    before = fake_s3.keys()
    assert sink.complete() == []
    assert fake_s3.keys() == before and "PutObject" not in fake_s3.operations()[2:]


def test_an_upload_error_is_the_units_result_and_aborts_only_its_uploads(fake_s3, sink):
    mine, other = sink.upload(1), sink.upload(2)
    (result,) = sink.complete(mine, error="column 'id': 'x' is not an int64")
    assert not result.ok and result.error == "column 'id': 'x' is not an int64"
    assert result.unit == UNIT and result.rows == 0 and result.files == ()
    assert sink.aborted(mine) and sink.pending(other)
    assert not sink.has(KEYS.unit_manifest(UNIT.id)) and sink.has(KEYS.sentinel) and sink.has(KEYS.claim)


def test_an_upload_error_fails_the_pipeline_naming_the_unit(sink):
    with pytest.raises(CopyToS3Error, match=rf"sink_id 'orders', unit {UNIT.id}\) failed: boom"):
        sink.complete(sink.upload(1), error="boom", fail_on_error=True)


def test_a_refused_commit_fails_the_pipeline_and_leaves_the_unit_for_the_retry(fake_s3, sink):
    mine = (sink.upload(1), sink.upload(2))
    fake_s3.refuse("CompleteMultipartUpload", "AccessDenied", times=1, when=lambda kw: kw["Key"] == mine[1].key)
    with pytest.raises(CopyToS3Error, match=rf"unit {UNIT.id}: completing the copy failed"):
        sink.complete(*mine, fail_on_error=True)
    assert sink.pending(mine[1]) and sink.has(KEYS.unit_commit(UNIT.id)) and not sink.has(KEYS.unit_manifest(UNIT.id))
    (result,) = sink.complete(*mine, fail_on_error=True)  # the runner's retry of the unit
    assert result.ok and [f.uri for f in result.files] == uris(*mine)
    assert sink.visible(mine[1]) and not sink.has(KEYS.unit_commit(UNIT.id))


def test_a_refused_commit_is_the_units_result_and_leaves_nothing_of_it(fake_s3, sink):
    mine = (sink.upload(1), sink.upload(2))
    other = sink.upload(3)
    fake_s3.refuse("CompleteMultipartUpload", "AccessDenied", when=lambda kw: kw["Key"] == mine[1].key)
    (result,) = sink.complete(*mine)
    assert result.error.startswith("completing the copy failed: S3 refused CompleteMultipartUpload")
    assert result.unit == UNIT and result.files == ()
    assert sink.aborted(*mine) and sink.pending(other)
    assert not sink.has(KEYS.unit_commit(UNIT.id)) and not sink.has(KEYS.unit_manifest(UNIT.id))


def test_a_refused_commit_of_a_unit_cut_short_leaves_nothing_of_it(fake_s3, sink):
    earlier = (sink.upload(1), sink.upload(2))
    commit_record(fake_s3, KEYS, UNIT, earlier, {})
    sink.finish_upload(earlier[0])
    fake_s3.refuse("CompleteMultipartUpload", "AccessDenied", when=lambda kw: kw["Key"] == earlier[1].key)
    (result,) = sink.complete(sink.upload(1), sink.upload(2))
    assert not result.ok and not sink.has(KEYS.unit_commit(UNIT.id))
    assert not sink.visible(earlier[0]) and sink.aborted(*earlier)


def test_a_unit_whose_record_cannot_be_deleted_is_committed_with_a_warning(fake_s3, sink):
    mine = (sink.upload(1), sink.upload(2))
    fake_s3.refuse("DeleteObject", "AccessDenied", when=lambda kw: kw["Key"] == KEYS.unit_commit(UNIT.id))
    (result,) = sink.complete(*mine)
    assert result.ok and result.rows == sum(f.rows for f in mine)
    assert len(result.warnings) == 1 and "commit record" in result.warnings[0]
    assert sink.has(KEYS.unit_manifest(UNIT.id)) and sink.has(KEYS.unit_commit(UNIT.id))
    assert all(sink.has(e["url"].split("/", 3)[3]) for e in sink.manifest()["entries"])


# --- 4. initialization of a stream over an earlier run ----------------------------------------


@pytest.fixture
def earlier_run(sink):
    """What a stream of ``orders`` left: a committed unit, a unit whose commit was cut short
    (one file completed, one pending), a dead attempt's upload, its sentinel and claim."""
    committed = sink.upload(1)
    sink.complete(committed)
    cut_short = (sink.upload(2), sink.upload(3))
    unit2 = unit_of(W2, pane())
    commit_record(sink.fake, KEYS, unit2, cut_short, {})
    sink.finish_upload(cut_short[0])
    dead = sink.upload(4)
    return committed, cut_short, dead, unit2


def test_a_stream_restarts_over_its_earlier_run_removing_nothing(fake_s3, sink, earlier_run):
    """A stream's initialization runs in every step instance (beam_s3_sink.stream_init): it
    removes nothing, not even a dead attempt's upload (it could be a running writer's); the
    end of the stream aborts that."""
    committed, cut_short, dead, unit2 = earlier_run
    before, calls = fake_s3.keys(), len(fake_s3.calls)
    outcome = initialize(fake_s3, KEYS, "error", stream=True)
    assert outcome.error is None and outcome.done is None and outcome.guard == CONDITIONAL
    assert fake_s3.keys() == before  # no committed file, manifest or record deleted
    assert sink.has(KEYS.unit_manifest(UNIT.id)) and sink.visible(committed, cut_short[0])
    assert sink.has(KEYS.unit_commit(unit2.id)) and sink.pending(cut_short[1])
    assert sink.pending(dead)
    assert not {"AbortMultipartUpload", "DeleteObject"} & {name for name, _ in fake_s3.calls[calls:]}


def test_a_streams_initialization_run_again_writes_its_sentinel_once(fake_s3, sink):
    fake_s3.delete_object(Bucket="bucket", Key=KEYS.sentinel)
    calls = len(fake_s3.calls)
    for _ in range(3):  # the Initialize step, then a Write and a completion instance
        assert initialize(fake_s3, KEYS, "error", stream=True).guard == CONDITIONAL
    puts = [kw["Key"] for name, kw in fake_s3.calls[calls:] if name == "PutObject"]
    assert puts.count(KEYS.sentinel) == 1 and sink.has(KEYS.sentinel) and sink.has(KEYS.claim)


def test_the_restarted_stream_finishes_the_unit_cut_short(fake_s3, sink, earlier_run):
    _, cut_short, _, unit2 = earlier_run
    initialize(fake_s3, KEYS, "error", stream=True)
    (result,) = sink.complete(sink.upload(2), sink.upload(3), win=W2)
    assert result.unit == unit2 and [f.uri for f in result.files] == uris(*cut_short)


@pytest.mark.parametrize("unit_id", ["global-p0", UNIT.id])
@pytest.mark.parametrize("object_of", [OTHER.unit_manifest, OTHER.unit_commit])
def test_another_sink_ids_unit_objects_are_foreign(fake_s3, sink, earlier_run, unit_id, object_of):
    _, _, dead, _ = earlier_run
    fake_s3.put_object(Bucket="bucket", Key=object_of(unit_id), Body=b"[]")
    fake_s3.delete_object(Bucket="bucket", Key=KEYS.claim)  # the earlier run's claim, to see it is released
    before = fake_s3.keys()
    outcome = initialize(fake_s3, KEYS, "error", stream=True)
    assert f"1 object(s) that copy 'orders' did not write are there ({object_of(unit_id)})" in outcome.error
    assert fake_s3.keys() == before and sink.pending(dead)  # nothing written or removed


# --- 5. the end of the stream -------------------------------------------------------------------


@pytest.fixture
def finish(sink):
    """Run the end-of-stream step with ``init``."""

    def run(init=STARTED):
        fn = _FinishStreamFn(WriteSettings(KEYS, sink.config, CsvFormat(header=True), SCHEMA, 2**30))
        fn.setup()
        return list(fn.process((None, [None, init, None])))  # _FinishStream's join: units as None, the outcome

    return run


def test_the_end_of_the_stream_removes_what_no_unit_committed(fake_s3, sink, earlier_run, finish):
    committed, cut_short, dead, unit2 = earlier_run
    another = sink.upload(5, keys=OTHER)
    assert finish() == []
    assert sink.visible(committed) and sink.has(KEYS.unit_manifest(UNIT.id))
    assert not sink.has(KEYS.unit_commit(unit2.id)) and sink.aborted(*cut_short)  # completed one deleted too
    assert sink.aborted(dead) and sink.pending(another)
    assert not sink.has(KEYS.claim) and not sink.has(KEYS.sentinel)
    assert fake_s3.keys() == sorted([committed.key, KEYS.unit_manifest(UNIT.id)])


def test_the_end_of_the_stream_keeps_a_claim_it_did_not_take(fake_s3, sink, finish):
    fake_s3.put_object(Bucket="bucket", Key=KEYS.claim, Body=b'{"sink_id": "someone"}')
    finish(InitOutcome(guard=""))  # if_exists="append": no claim taken
    assert sink.has(KEYS.claim) and not sink.has(KEYS.sentinel)


@pytest.mark.parametrize(
    "init",
    [InitOutcome(error="the path is claimed"), InitOutcome(done=CopyToResult(uri="s3://bucket/p", sink_id="orders"))],
    ids=["error", "done"],
)
def test_the_end_of_a_stream_that_never_started_does_nothing(fake_s3, sink, earlier_run, finish, init):
    before, calls = fake_s3.keys(), len(fake_s3.calls)
    assert finish(init) == []
    assert fake_s3.keys() == before and len(fake_s3.calls) == calls


def test_the_end_of_the_stream_keeps_a_committed_units_files_whose_record_stayed(fake_s3, sink, finish):
    mine = (sink.upload(1), sink.upload(2))
    fake_s3.refuse("DeleteObject", "InternalError", times=1, when=lambda kw: kw["Key"] == KEYS.unit_commit(UNIT.id))
    (result,) = sink.complete(*mine, fail_on_error=True)  # committed; its record stayed
    assert result.ok and result.warnings and sink.has(KEYS.unit_commit(UNIT.id))
    finish()
    assert not sink.has(KEYS.unit_commit(UNIT.id))
    assert sink.has(KEYS.unit_manifest(UNIT.id)) and all(sink.visible(f) for f in mine)


# --- 6. the checks made when a stream's pipeline is built ----------------------------------------

S3 = S3Config(endpoint_url="http://127.0.0.1:9", region_name="us-east-1")
CATALOG = {"type": "sql", "uri": "sqlite:////tmp/x.db"}
ACCUMULATING = dict(
    trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)),
    accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
)
FIXED = beam.WindowInto(FixedWindows(60))


@pytest.fixture
def stream():
    """An unbounded PCollection of dict rows in the global window, in a streaming pipeline (never run)."""
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    rows = p | EventStream().add_elements([1, 2, 3]) | beam.Map(lambda i: {"id": i}).with_output_types(Dict[str, int])
    assert not rows.is_bounded
    return rows


def to_s3(**options) -> CopyToS3:
    return CopyToS3("s3://bucket/p", format="csv", schema=SCHEMA, s3=S3, sink_id="orders", **options)


def to_table(**options) -> CopyToIceberg:
    return CopyToIceberg("ns.orders", catalog=CATALOG, schema=SCHEMA, s3=S3, sink_id="orders", **options)


SINKS = pytest.mark.parametrize("copy", [to_s3, to_table], ids=["CopyToS3", "CopyToIceberg"])


@SINKS
def test_accumulating_panes_are_refused(stream, copy):
    windowed = stream | beam.WindowInto(FixedWindows(60), **ACCUMULATING)
    with pytest.raises(CopyToS3Error, match="accumulating panes.*AccumulationMode.DISCARDING"):
        windowed | copy()


@SINKS
def test_the_global_window_needs_a_triggering_frequency(stream, copy):
    with pytest.raises(CopyToS3Error, match="stream in the global window: pass triggering_frequency=SECONDS"):
        stream | copy()


@SINKS
def test_a_triggering_frequency_is_refused_for_windowed_input(stream, copy):
    with pytest.raises(CopyToS3Error, match="triggering_frequency is for input in the global window"):
        stream | FIXED | copy(triggering_frequency=5)


@SINKS
def test_a_triggering_frequency_is_refused_beside_a_trigger_of_ones_own(stream, copy):
    windowed = stream | beam.WindowInto(
        GlobalWindows(),
        trigger=trigger.Repeatedly(trigger.AfterCount(100)),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
    )
    with pytest.raises(CopyToS3Error, match="has its own trigger; triggering_frequency would replace it"):
        windowed | copy(triggering_frequency=5)


@SINKS
@pytest.mark.parametrize(
    "frequency, says",
    [
        (0, "must be positive, got 0"),
        (-5, "must be positive, got -5"),
        ("5", "must be a number of seconds, got '5'"),
        (True, "must be a number of seconds, got True"),
    ],
)
def test_a_triggering_frequency_that_is_not_a_positive_number_is_refused(stream, copy, frequency, says):
    with pytest.raises(ValueError, match=f"triggering_frequency {says}"):
        stream | copy(triggering_frequency=frequency)


@SINKS
@pytest.mark.parametrize(
    "windowing, options",
    [
        (None, dict(triggering_frequency=5)),
        (None, dict(triggering_frequency=0.5)),
        (FIXED, {}),
        (
            beam.WindowInto(
                GlobalWindows(),
                trigger=trigger.Repeatedly(trigger.AfterCount(100)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            ),
            {},
        ),
    ],
    ids=["triggering_frequency", "fractional_frequency", "fixed_windows", "own_trigger_on_global_window"],
)
def test_an_accepted_stream_outputs_an_unbounded_pcollection_of_results(stream, copy, windowing, options):
    rows = stream | windowing if windowing is not None else stream
    results = rows | copy(**options)
    assert not results.is_bounded


@pytest.mark.parametrize(
    "copy, option",
    [
        (to_s3(num_batches=4), "num_batches"),
        (to_s3(if_exists="replace"), "if_exists='replace'"),
        (to_s3(validate_only=True), "validate_only"),
        (to_s3(upload_graph="per_bundle"), "upload_graph='per_bundle'"),
        (to_table(mode="overwrite"), "mode='overwrite'"),
        (to_table(validate_only=True), "validate_only"),
        (to_table(upload_graph="per_bundle"), "upload_graph='per_bundle'"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_options_a_stream_cannot_take_are_refused_by_name(stream, copy, option):
    transform = type(copy).__name__
    with pytest.raises(CopyToS3Error, match=rf"{transform}: the input is unbounded, which takes no {option}"):
        stream | FIXED | copy


@pytest.mark.parametrize(
    "copy", [to_s3(if_exists="append"), to_table(mode="overwrite_partitions")], ids=["append", "overwrite_partitions"]
)
def test_options_a_stream_can_take_are_accepted(stream, copy):
    assert not (stream | FIXED | copy).is_bounded


@SINKS
@pytest.mark.parametrize(
    "flags,warns",
    [
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], True),
        (["--runner=PrismRunner"], True),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--job_server_timeout=86400"], False),
        (["--runner=PortableRunner", "--job_endpoint=embed"], False),
        ([], False),
    ],
    ids=["job-endpoint", "prism", "timeout-raised", "embedded", "in-process"],
)
def test_a_stream_through_a_job_service_with_the_default_timeout_is_warned_of(copy, flags, warns, caplog):
    p = beam.Pipeline(options=PipelineOptions(["--streaming", *flags]))
    rows = p | EventStream().add_elements([1]) | beam.Map(lambda i: {"id": i}).with_output_types(Dict[str, int])
    with caplog.at_level("WARNING", logger="beam_s3_sink.stream"):
        rows | FIXED | copy()
    said = [r.getMessage() for r in caplog.records if "job_server_timeout" in r.getMessage()]
    assert bool(said) == warns, said
    if warns:
        assert "gives the job up after 300 s" in said[0] and "--job_server_timeout=SECONDS" in said[0]


# --- 7. a stream's graph reads no side input (Flink checkpoints it) -----------------------------


def side_inputs(pipeline: beam.Pipeline):
    """The full labels of the transforms of ``pipeline`` that read a side input."""
    found = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node) -> None:
            if node.side_inputs:
                found.append(node.full_label)

    pipeline.visit(Visitor())
    return found


@SINKS
def test_a_streams_steps_read_no_side_input(stream, copy):
    stream | FIXED | copy()
    assert side_inputs(stream.pipeline) == []


@SINKS
def test_a_bounded_copys_steps_read_their_initialization_as_a_side_input(copy):
    p = beam.Pipeline()
    p | beam.Create([{"id": 1}]).with_output_types(Dict[str, int]) | copy()
    assert {label.rsplit("/", 1)[-1] for label in side_inputs(p)} >= {"Write", "Run"}


@SINKS
def test_a_stream_takes_no_errors_input(stream, copy):
    errors = stream.pipeline | "Errors" >> beam.Create(["upstream failed"])
    transform = type(copy()).__name__
    with pytest.raises(CopyToS3Error, match=rf"{transform}: the input is unbounded, which takes no errors input"):
        stream | FIXED | copy(errors=errors)


class Initialization(beam.DoFn):
    """An initialization DoFn whose outcomes are scripted: one per run."""

    def __init__(self, *outcomes: InitOutcome) -> None:
        self.outcomes, self.runs, self.set_up = list(outcomes), 0, False

    def setup(self) -> None:
        self.set_up = True

    def process(self, _unused, errors=()):
        self.runs += 1
        yield self.outcomes.pop(0)


@pytest.fixture
def no_delays(monkeypatch):
    monkeypatch.setattr(InitializedInStep, "RETRY_DELAYS", (0.0, 0.0))


def test_a_steps_initialization_runs_once_per_instance(no_delays):
    fn = Initialization(STARTED)
    in_step = InitializedInStep(fn)
    in_step.setup()
    assert fn.set_up and [in_step.outcome() for _ in range(3)] == [STARTED] * 3 and fn.runs == 1


def test_a_steps_initialization_is_tried_again_after_an_error(no_delays):
    fn = Initialization(InitOutcome(error="table iceberg_tables already exists"), STARTED)
    in_step = InitializedInStep(fn)
    assert in_step.outcome() == STARTED and fn.runs == 2


def test_a_steps_initialization_that_keeps_failing_is_not_kept(no_delays):
    failed = InitOutcome(error="the path is claimed")
    fn = Initialization(failed, failed, failed, STARTED)
    in_step = InitializedInStep(fn)
    assert in_step.outcome() == failed and fn.runs == 3  # the first try and RETRY_DELAYS' two
    assert in_step.outcome() == STARTED and fn.runs == 4  # the next unit tries again


def test_a_side_input_is_taken_as_it_is():
    assert outcome_of(STARTED, None) is STARTED
    with pytest.raises(ValueError, match="needs a stream's InitializedInStep"):
        outcome_of(None, None)


def test_a_stream_unit_completes_with_the_initialization_it_ran_itself(fake_s3, sink):
    settings = WriteSettings(KEYS, sink.config, CsvFormat(header=True), SCHEMA, 2**30)
    fn = _CompleteFn(settings, False, True, InitializedInStep(_InitializeFn(KEYS, sink.config, "error", True)))
    fn.setup()
    mine = sink.upload(1, 2)
    (result,) = fn.process(UploadReport(files=(mine,), rows=2, bytes=mine.bytes), None, window=W1, pane=pane())
    assert result.ok and result.unit == UNIT and [f.uri for f in result.files] == uris(mine)


def test_a_stream_unit_fails_when_its_initialization_finds_foreign_objects(fake_s3, sink):
    fake_s3.put_object(Bucket="bucket", Key="p/someone-elses.csv", Body=b"x")
    settings = WriteSettings(KEYS, sink.config, CsvFormat(header=True), SCHEMA, 2**30)
    init = InitializedInStep(_InitializeFn(KEYS, sink.config, "error", True))
    init.RETRY_DELAYS = ()
    fn = _CompleteFn(settings, False, True, init)
    fn.setup()
    mine = sink.upload(1)
    (result,) = fn.process(UploadReport(files=(mine,), rows=1, bytes=mine.bytes), None, window=W1, pane=pane())
    assert not result.ok and "is not empty" in result.error and sink.aborted(mine)
    assert not sink.has(KEYS.unit_manifest(UNIT.id))


# --- 8. a dead attempt's uploads of a unit, aborted when the unit commits -------------------------


def test_a_unit_commit_aborts_the_uploads_of_its_writers_that_died(fake_s3, sink):
    dead = sink.upload(1, 2, token=writer_token(UNIT))  # an attempt that died before the checkpoint
    mine = sink.upload(1, 2, token=writer_token(UNIT))
    next_unit = sink.upload(7, token=writer_token(unit_of(W2, pane())))  # being written
    late = sink.upload(8, token=writer_token(unit_of(W1, pane(1, PaneInfoTiming.LATE))))
    other = sink.upload(9)
    (result,) = sink.complete(mine)
    assert result.ok and [f.uri for f in result.files] == uris(mine)
    assert sink.aborted(dead) and sink.pending(next_unit, late, other)


def test_a_unit_found_committed_aborts_the_uploads_of_its_writers_that_died(fake_s3, sink):
    sink.complete(sink.upload(1, token=writer_token(UNIT)))
    dead, retry = sink.upload(1, token=writer_token(UNIT)), sink.upload(1, token=writer_token(UNIT))
    sink.complete(retry)
    assert sink.aborted(dead, retry)


def test_a_unit_cut_short_completes_the_files_its_record_names_whatever_their_token(fake_s3, sink):
    earlier = (sink.upload(1, token=writer_token(UNIT)), sink.upload(2, token=writer_token(UNIT)))
    commit_record(fake_s3, KEYS, UNIT, earlier, {})
    (result,) = sink.complete(sink.upload(1, token=writer_token(UNIT)), sink.upload(2, token=writer_token(UNIT)))
    assert result.ok and [f.uri for f in result.files] == uris(*earlier) and sink.visible(*earlier)
    assert not any(f.upload_id in fake_s3.uploads for f in earlier)  # completed, not aborted


def test_only_an_on_time_pane_of_a_window_has_writers_named_by_their_unit():
    on_time = writer_token(UNIT)
    assert writer_token(UNIT)[:8] == on_time[:8] and writer_token(UNIT) != on_time
    assert writer_token(unit_of(W2, pane()))[:8] != on_time[:8]
    for unit in (unit_of(W1, pane(1, PaneInfoTiming.LATE)), unit_of(GlobalWindow(), pane(0, PaneInfoTiming.EARLY))):
        assert len({writer_token(unit)[:8] for _ in range(20)}) > 1  # random
