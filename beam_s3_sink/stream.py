"""Streaming copies: an unbounded PCollection committed unit by unit, one unit per window pane.

What differs from a bounded copy (the steps are the same, see :mod:`.transform`):

- **Windowing** (:func:`stream_windowing`): the input's own windows and trigger decide the
  units; input in the global window with Beam's default trigger needs ``triggering_frequency``,
  which cuts it into event-time intervals of that many seconds, each committed once the
  watermark passes its end (rows behind the watermark are dropped, as Beam drops late rows).
  Panes must be discarding (an accumulating pane repeats the rows of the panes before it).
- **Upload**: always the grouped graph; ``Batch`` holds rows per window and its blobs go
  through the ``GroupByKey`` in their window, where the trigger fires (and Beam drops the rows
  of expired windows), so each writer writes the rows of one key's pane.
- **Completion**, per window firing: the writers' reports of one firing merge into one, and
  that unit (:class:`~.results.StreamUnit`: window and pane, so the same on every attempt) is
  committed with :func:`commit_record` (S3) or one snapshot (Iceberg). A unit already committed
  is reported again and this attempt's uploads are aborted; a unit whose commit was cut short is
  finished with the files its commit record names. An empty pane commits nothing.
- **No side input** (:mod:`.stream_init`), so that Flink checkpoints the stream: ``Write`` and
  completion run the stream's initialization themselves (idempotent, removing nothing), and the
  end of the stream joins ``Initialize``'s outcome with the results by a ``GroupByKey``.
- **The end of the stream** (:class:`_FinishStream`): once every unit is committed, pending
  uploads that no unit named (attempts that died) are aborted, the claim is released and the
  sentinel deleted.

Exactly once holds where a replayed pane holds the rows it held the first time: event-time
panes do (``triggering_frequency`` makes those); processing-time panes (a trigger of the
user's with early or processing-time firings) may not, as for every Beam sink without stable
input.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any, FrozenSet, Iterable, List, Optional, Tuple

import apache_beam as beam
from apache_beam.pvalue import PCollection
from apache_beam.transforms import trigger
from apache_beam.transforms.window import FixedWindows, GlobalWindow, GlobalWindows
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import PaneInfoTiming

from .claim import CONDITIONAL, put_if_absent, release_claim
from .cleanup import abort_uploads
from .clients import _S3DoFn
from .errors import CopyToS3Error, S3RequestError
from .formats.stats import stats_from_json, stats_json
from .keys import CopyKeys, new_token
from .messages import InitOutcome, PendingFile
from .results import StreamUnit
from .s3 import call, list_keys, list_uploads, read_object
from .writer import WriteSettings

__all__ = [
    "stream_windowing",
    "unit_of",
    "commit_record",
    "writer_token",
    "abort_dead_uploads",
    "warn_of_job_server_timeout",
]

_log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def stream_windowing(rows: PCollection, triggering_frequency: Optional[float], transform: str) -> PCollection:
    """``rows`` windowed so that each pane the trigger fires is one unit, or an error naming
    what to change. Raised when the pipeline is built."""
    warn_of_job_server_timeout(rows.pipeline.options, transform)
    windowing = rows.windowing
    producer = rows.producer.full_label if rows.producer is not None else str(rows)
    if windowing.accumulation_mode == trigger.AccumulationMode.ACCUMULATING:
        raise CopyToS3Error(
            f"{transform}: the input of {producer!r} fires accumulating panes; each pane is committed as "
            "one unit, so accumulating panes would copy rows twice. Window it with "
            "accumulation_mode=AccumulationMode.DISCARDING."
        )
    if not isinstance(windowing.windowfn, GlobalWindows):
        if triggering_frequency is not None:
            raise CopyToS3Error(
                f"{transform}: triggering_frequency is for input in the global window; the input of "
                f"{producer!r} is windowed ({windowing.windowfn}), and each pane its trigger fires is "
                "one unit. Leave triggering_frequency out, or set the trigger in its WindowInto."
            )
        return rows
    if triggering_frequency is None:
        if not windowing.is_default():  # the user's own trigger on the global window: its panes
            return rows
        raise CopyToS3Error(
            f"{transform}: the input of {producer!r} is a stream in the global window: pass "
            "triggering_frequency=SECONDS to commit it in event-time intervals of that length, one "
            "unit each, or window it (beam.WindowInto(FixedWindows(...))) to commit each window."
        )
    if isinstance(triggering_frequency, bool) or not isinstance(triggering_frequency, (int, float)):
        raise ValueError(f"{transform}: triggering_frequency must be a number of seconds, got {triggering_frequency!r}")
    if triggering_frequency <= 0:
        raise ValueError(f"{transform}: triggering_frequency must be positive, got {triggering_frequency!r}")
    if not windowing.is_default():
        raise CopyToS3Error(
            f"{transform}: the input of {producer!r} has its own trigger; triggering_frequency would "
            "replace it. Leave triggering_frequency out (each pane of your trigger is one unit)."
        )
    # Event-time intervals, as Beam's WriteToParquet(triggering_frequency) makes them: a replay
    # fills each with the same rows, so its unit is the same. (Processing-time panes are not:
    # a replay on Flink fired other rows under the same pane indexes, whose rows were lost.)
    return rows | "EveryInterval" >> beam.WindowInto(
        FixedWindows(triggering_frequency),
        trigger=trigger.AfterWatermark(),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
        allowed_lateness=0,
    )


def unit_of(window: Any, pane: Any) -> StreamUnit:
    """The unit of a firing: its window and its pane (index and timing).

    >>> from apache_beam.transforms.window import IntervalWindow
    >>> from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming
    >>> unit_of(IntervalWindow(0, 10), PaneInfo(True, False, PaneInfoTiming.ON_TIME, 0, 0)).id
    '19700101T000000Z-19700101T000010Z-p0'
    """
    timing = PaneInfoTiming.to_string(pane.timing)
    if isinstance(window, GlobalWindow):
        return StreamUnit(None, None, pane.index, timing)
    return StreamUnit(_utc(window.start), _utc(window.end), pane.index, timing)


def _utc(moment: Timestamp) -> datetime:
    return _EPOCH + timedelta(microseconds=moment.micros)


# --- S3: a unit's commit record ---------------------------------------------------------------


def committed_unit(client: Any, keys: CopyKeys, unit: StreamUnit) -> Optional[bytes]:
    """The manifest of ``unit`` if an earlier attempt committed it, else None."""
    return _read_if_there(client, keys.location.bucket, keys.unit_manifest(unit.id))


def commit_record(
    client: Any, keys: CopyKeys, unit: StreamUnit, files: Tuple[PendingFile, ...], put_args: Any
) -> Tuple[PendingFile, ...]:
    """The files ``unit`` commits: ``files``, recorded in ``P/_ID-<unit>.commit.json`` before any
    is completed; or, when an earlier attempt's record is there (its commit was cut short), the
    files that record names, which this attempt completes instead of its own."""
    bucket, key = keys.location.bucket, keys.unit_commit(unit.id)
    body = json.dumps([_pending_json(f) for f in files]).encode()
    earlier = _read_if_there(client, bucket, key)  # read first: some stores ignore If-None-Match
    if earlier is None:
        answer = put_if_absent(client, bucket, key, body, put_args)
        if answer is None:
            return files
        earlier = _read_if_there(client, bucket, key) if answer != "NotImplemented" else None
        if earlier is None:  # no conditional writes here, or the record went meanwhile
            call(client, "PutObject", bucket, key, Body=body, **put_args)
            return files
    _log.info("unit %s of copy %s: finishing the commit an earlier attempt began", unit.id, keys.sink_id)
    return tuple(_pending_from_json(f) for f in json.loads(earlier))


def _read_if_there(client: Any, bucket: str, key: str) -> Optional[bytes]:
    try:
        return read_object(client, bucket, key)
    except S3RequestError as exc:
        if exc.code in ("NoSuchKey", "404") or exc.status == 404:
            return None
        raise


def _pending_json(f: PendingFile) -> Any:
    return {
        "key": f.key,
        "upload_id": f.upload_id,
        "parts": [list(p) for p in f.parts],
        "rows": f.rows,
        "bytes": f.bytes,
        "part_checksums": list(f.part_checksums),
        "stats": stats_json(f.stats),
        **({"partition": [list(v) for v in f.partition]} if f.partition else {}),
    }


def _pending_from_json(d: Any) -> PendingFile:
    return PendingFile(
        d["key"],
        d["upload_id"],
        tuple((int(n), str(e)) for n, e in d["parts"]),
        int(d["rows"]),
        int(d["bytes"]),
        tuple(d["part_checksums"]),
        stats_from_json(d["stats"]),
        tuple((str(name), value) for name, value in d.get("partition", ())),
    )


# --- a dead attempt's uploads of a unit ------------------------------------------------------------

_UNIT_TOKEN_DIGITS = 8


def writer_token(unit: StreamUnit) -> str:
    """A stream writer's file token: for a unit of an on-time pane, :data:`_UNIT_TOKEN_DIGITS`
    hex digits naming the unit (the same on every attempt) and random ones; else a random token.

    >>> unit = StreamUnit(None, None, 0, "EARLY")
    >>> len(writer_token(unit)) == 16 and writer_token(unit) != writer_token(unit)
    True
    """
    prefix = _unit_prefix(unit)
    token = new_token()
    return token if prefix is None else prefix + token[len(prefix) :]


def _unit_prefix(unit: StreamUnit) -> Optional[str]:
    """The token prefix of ``unit``'s writers: only an on-time pane of a window, which completion
    commits once every writer of the attempt that fired it has reported (the watermark holds it
    back until then), so that any other upload under the prefix is a dead attempt's."""
    if unit.start is None or unit.timing != "ON_TIME":
        return None
    return hashlib.sha256(unit.id.encode()).hexdigest()[:_UNIT_TOKEN_DIGITS]


def abort_dead_uploads(
    client: Any, keys: CopyKeys, unit: StreamUnit, keep: FrozenSet[Tuple[str, str]]
) -> List[Tuple[str, str]]:
    """Abort the pending uploads of ``unit``'s writers but ``keep`` (the files its commit names):
    those of attempts that died, e.g. before the checkpoint a restarted job restored (see
    :func:`_unit_prefix`). Best effort: what is left, the end of the stream aborts."""
    prefix = _unit_prefix(unit)
    if prefix is None:
        return []
    bucket, name, aborted = keys.location.bucket, f"{keys.sink_id}-{prefix}", []
    try:
        for key, upload_id in list(list_uploads(client, bucket, keys.data_prefix)):
            if keys.is_data_file(key) and key.rsplit("/", 1)[-1].startswith(name) and (key, upload_id) not in keep:
                call(client, "AbortMultipartUpload", bucket, key, UploadId=upload_id)
                aborted.append((key, upload_id))
    except S3RequestError as exc:
        _log.warning("unit %s of copy %s: could not abort a dead attempt's uploads: %s", unit.id, keys.sink_id, exc)
    if aborted:
        _log.info("unit %s of copy %s: aborted %d upload(s) of attempts that died", unit.id, keys.sink_id, len(aborted))
    return aborted


_JOB_SERVICE_RUNNERS = ("FlinkRunner", "SparkRunner", "PrismRunner")  # each starts a job service of its own


def warn_of_job_server_timeout(options: Any, transform: str) -> bool:
    """Log a warning (and return True) when a stream goes to a job service with Beam's default
    ``--job_server_timeout``: ``PortableRunner`` puts that deadline (300 s) on the job's state
    and message streams, so the launcher gives the job up after five minutes, and with LOOPBACK
    workers the job dies with it.

    >>> from apache_beam.options.pipeline_options import PipelineOptions
    >>> warn_of_job_server_timeout(PipelineOptions(["--runner=PrismRunner"]), "CopyToS3")
    True
    >>> warn_of_job_server_timeout(PipelineOptions(["--runner=PrismRunner", "--job_server_timeout=86400"]), "CopyToS3")
    False
    """
    from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions, StandardOptions

    if options is None:
        return False
    portable = options.view_as(PortableOptions)
    runner = options.view_as(StandardOptions).runner or ""
    runner = runner if isinstance(runner, str) else type(runner).__name__
    via_job_service = (portable.job_endpoint not in (None, "", "embed")) or runner.endswith(_JOB_SERVICE_RUNNERS)
    default = PipelineOptions([]).view_as(PortableOptions).job_server_timeout
    if not via_job_service or portable.job_server_timeout != default:
        return False
    _log.warning(
        "%s: this stream is launched through a job service with --job_server_timeout=%s (Beam's "
        "default): the launcher gives the job up after %s s (DEADLINE_EXCEEDED), and with LOOPBACK "
        "workers the stream dies with it. Pass --job_server_timeout=SECONDS for as long as it runs "
        "(e.g. 86400 for a day), or launch it detached.",
        transform,
        default,
        default,
    )
    return True


# --- the end of the stream --------------------------------------------------------------------


class _FinishStream(beam.PTransform):
    """Runs ``finish_fn`` once, when the stream has ended and every unit is committed: the
    results (each as None) and the one ``InitOutcome`` (so that it fires even when no unit was)
    are gathered in the global window, which closes only when the watermark reaches its end,
    and ``finish_fn`` takes the outcome from the gathered values (a join, not a side input:
    Flink checkpoints it, see :mod:`.stream_init`)."""

    def __init__(self, finish_fn: beam.DoFn, init: PCollection) -> None:
        super().__init__()
        self._finish_fn, self._init = finish_fn, init

    def expand(self, results: PCollection) -> PCollection:
        ends = [  # one WindowInto each: Beam 2.78 checks a transform's type hints per instance
            pcoll
            | f"{name}AtEnd"
            >> beam.WindowInto(
                GlobalWindows(), trigger=trigger.AfterWatermark(), accumulation_mode=trigger.AccumulationMode.DISCARDING
            )
            for name, pcoll in (("Units", results), ("Init", self._init))
        ]
        return (
            ends
            | "Both" >> beam.Flatten()
            | "Key" >> beam.Map(_keyed_outcome)
            | "Gather" >> beam.GroupByKey()
            | "Run" >> beam.ParDo(self._finish_fn)
        )


def _keyed_outcome(value: Any) -> Tuple[None, Optional[InitOutcome]]:
    """One key for all; a unit's result as None (only the initialization's outcome is kept)."""
    return None, value if isinstance(value, InitOutcome) else None


def gathered_outcome(values: Iterable[Optional[InitOutcome]]) -> InitOutcome:
    """The initialization's outcome among the values :class:`_FinishStream` gathered.

    >>> gathered_outcome([None, InitOutcome(guard="conditional"), None]).guard
    'conditional'
    """
    outcomes = [v for v in values if v is not None]
    if len(outcomes) != 1:
        raise CopyToS3Error(f"the end of the stream gathered {len(outcomes)} initialization outcomes, not 1")
    return outcomes[0]


class _FinishStreamFn(_S3DoFn):
    """At the end of a stream into S3: abort the uploads no unit named, release the claim,
    delete the sentinel (a table overrides :meth:`_finish`)."""

    def __init__(self, settings: WriteSettings) -> None:
        super().__init__(settings.config)
        self._settings = settings

    def process(self, gathered: Tuple[None, Iterable[Optional[InitOutcome]]]) -> Iterable[None]:
        init = gathered_outcome(gathered[1])
        if init.error is not None or init.done is not None:
            return ()
        keys = (init.settings or self._settings).keys
        try:
            self._finish(keys, init)
        except S3RequestError as exc:  # the units are committed: nothing is lost, say what is left
            _log.warning("copy %s: cleaning up at the end of the stream failed: %s", keys.sink_id, exc)
        _log.info("the stream of copy %s to %s ended", keys.sink_id, keys.location.uri)
        return ()

    def _finish(self, keys: CopyKeys, init: InitOutcome) -> None:
        bucket = keys.location.bucket
        for record in [o["Key"] for o in list_keys(self._client, bucket, keys.location.list_prefix)]:
            if keys.is_unit_object(record) and record.endswith(".commit.json"):
                self._drop_record(keys, record)
        abort_uploads(self._client, keys)
        if init.guard == CONDITIONAL:
            release_claim(self._client, keys)
        call(self._client, "DeleteObject", keys.location.bucket, keys.sentinel)

    def _drop_record(self, keys: CopyKeys, record: str) -> None:
        """A commit record still there at the end: a unit cut short that no attempt replayed
        (the stream ended before it), or a committed unit whose record could not be deleted.
        The files of an uncommitted one go (completed ones are deleted), then the record."""
        bucket = keys.location.bucket
        manifest = record[: -len(".commit.json")] + ".manifest.json"
        committed = _read_if_there(self._client, bucket, manifest) is not None
        for f in [] if committed else json.loads(_read_if_there(self._client, bucket, record) or b"[]"):
            try:
                call(self._client, "AbortMultipartUpload", bucket, f["key"], UploadId=f["upload_id"])
            except S3RequestError:  # completed already
                call(self._client, "DeleteObject", bucket, f["key"])
        call(self._client, "DeleteObject", bucket, record)
        if not committed:
            _log.warning("copy %s: removed the files of a unit whose commit was cut short (%s)", keys.sink_id, record)
