"""S3 access: :class:`MultipartStream` (a data file's parts, uploaded on a thread pool, never
completed here) and :func:`call`, through which every request of the package goes, so that
every failure reads alike (:class:`~beam_s3_sink.errors.S3RequestError`: the operation, the
object, S3's answer and what to check). Transient failures are retried by botocore itself
(``S3Config.retry_mode``/``max_attempts``); an answer that lacks a field S3 always sends (an
upload id, a part's ETag, a listing's next marker: :data:`PROMISED`) is retried here as many
times, then fails naming what was missing. :class:`RetryCounter` counts both kinds of retry for
the Beam counter ``beam_s3_sink/retries``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from botocore.exceptions import BotoCoreError, ClientError

from .errors import S3RequestError
from .messages import PendingFile

__all__ = [
    "MultipartStream",
    "PartBuffers",
    "RetryCounter",
    "call",
    "read_object",
    "list_keys",
    "list_uploads",
    "IAM_ACTIONS",
    "PROMISED",
]

_log = logging.getLogger(__name__)


class RetryCounter:
    """Counts the retries botocore makes on one client, from any thread.

    >>> from beam_s3_sink import S3Config
    >>> retries = RetryCounter.attach(S3Config(region_name="us-east-1").make_client())
    >>> retries.drain()  # in the DoFn: Metrics.counter("beam_s3_sink", "retries").inc(retries.drain())
    0

    botocore emits ``request-created`` before every attempt of a request, with the attempt
    number in the request's context; an attempt after the first is a retry. Beam counters
    only record on the thread that runs the DoFn, while part uploads run on a pool, hence
    the count kept here and drained by the DoFn.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = 0

    @classmethod
    def attach(cls, client: Any) -> "RetryCounter":
        """A counter of ``client``'s retries, from now on."""
        counter = cls()
        client.meta.events.register("request-created.s3", counter._on_request_created)
        client._beam_s3_sink_retries = counter  # call() counts its own retries of incomplete answers here
        return counter

    def _on_request_created(self, request: Any, operation_name: str = "?", **_: Any) -> None:
        attempt = (getattr(request, "context", None) or {}).get("retries", {}).get("attempt", 1)
        if attempt > 1:
            _log.debug("retrying S3 %s (attempt %d)", operation_name, attempt)
            with self._lock:
                self._pending += 1

    def count(self) -> None:
        """Count one retry made outside botocore (an incomplete answer, see :func:`call`)."""
        with self._lock:
            self._pending += 1

    def drain(self) -> int:
        """The retries counted since the last call."""
        with self._lock:
            count, self._pending = self._pending, 0
        return count


def error_code(exc: BaseException) -> Optional[str]:
    """S3's error code (``NoSuchBucket``, ``AccessDenied``...) of a failed request, if any."""
    if isinstance(exc, S3RequestError):
        return exc.code
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code")
    return None


def http_status(exc: BaseException) -> int:
    """The HTTP status of S3's answer to a failed request (0 if it did not answer)."""
    if isinstance(exc, S3RequestError):
        return exc.status
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


IAM_ACTIONS = {
    "ListObjectsV2": "s3:ListBucket",
    "ListMultipartUploads": "s3:ListBucketMultipartUploads",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "DeleteObject": "s3:DeleteObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
}
"""The IAM action that allows each S3 operation the sink calls (named in AccessDenied errors)."""


def describe_error(exc: BaseException, operation: str, bucket: str, key: Optional[str] = None) -> str:
    """A one-line message naming the refused operation, the object and what to check."""
    where = f"s3://{bucket}/{key}" if key is not None else f"s3://{bucket}"
    if isinstance(exc, ClientError) and exc.operation_name == "AssumeRole":
        # Raised from inside the S3 call: botocore assumes the role when it needs credentials.
        err = exc.response.get("Error", {})
        return (
            f"assuming the role (sts:AssumeRole) for {operation} on {where} failed: "
            f"{err.get('Code', 'Error')} ({err.get('Message', '')}); check S3Config.role_arn, "
            "external_id and the role's trust policy"
        )
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = err.get("Code", "Error")
        message = err.get("Message", "")
        action = IAM_ACTIONS.get(operation, f"s3:{operation}")
        hint = {
            "NoSuchBucket": "the bucket does not exist: create it or fix the URI",
            "AccessDenied": (
                f"the credentials lack the IAM permission {action} on it (or, when "
                "an expected bucket owner is set, the bucket is another account's)"
            ),
            "InvalidAccessKeyId": "the access key id is not known to the server: check the credentials",
            "SignatureDoesNotMatch": "the secret key does not match the access key id",
            "ExpiredToken": "the session token has expired: refresh the credentials",
        }.get(code)
        text = f"S3 refused {operation} on {where}: {code}"
        if message:
            text += f" ({message})"
        if hint:
            text += f"; {hint}"
        return text
    if isinstance(exc, BotoCoreError):
        return f"S3 request {operation} on {where} failed: {exc}"
    return f"{operation} on {where} failed: {type(exc).__name__}: {exc}"


def _lacking(*fields: str) -> Callable[[Dict[str, Any]], List[str]]:
    return lambda answer: [f for f in fields if not answer.get(f)]


def _next_page(*markers: str) -> Callable[[Dict[str, Any]], List[str]]:
    return lambda answer: [m for m in markers if answer.get("IsTruncated") and not answer.get(m)]


PROMISED: Dict[str, Callable[[Dict[str, Any]], List[str]]] = {
    "CreateMultipartUpload": _lacking("UploadId"),
    "UploadPart": _lacking("ETag"),
    "GetObject": _lacking("Body"),
    "ListObjectsV2": _next_page("NextContinuationToken"),
    "ListMultipartUploads": _next_page("NextKeyMarker", "NextUploadIdMarker"),
}
"""Per operation, the fields of S3's answer that the package reads and S3 always sends: a
function of the answer that gives those it lacks. (A CreateMultipartUpload retried after an
answer without its id may leave an upload behind: completion aborts the copy's strays.)"""


def _attempts(client: Any) -> int:
    retries = getattr(getattr(client, "meta", None), "config", None)
    retries = getattr(retries, "retries", None) or {}
    return int(retries.get("total_max_attempts") or retries.get("max_attempts") or 3)


def call(client: Any, operation: str, bucket: str, key: Optional[str] = None, **kwargs: Any) -> Dict[str, Any]:
    """Call one S3 operation (botocore retries transient errors); raise S3RequestError on failure.

    Every S3 request of the package goes through here, so every failure reads alike and
    carries S3's error code and HTTP status (:class:`~beam_s3_sink.errors.S3RequestError`).
    An answer that lacks what S3 promises (:data:`PROMISED`) is retried like a 500, with the
    client's number of attempts and a jittered backoff, then fails with the code
    ``IncompleteAnswer``, naming the request, the object and the missing fields.

    >>> _ = client.put_object(Bucket="bucket", Key="exports/_nightly-INCOMPLETE", Body=b"")
    >>> call(client, "HeadObject", "bucket", "exports/_nightly-INCOMPLETE")["ContentLength"]
    0
    >>> call(client, "HeadObject", "bucket", "exports/_nightly-manifest.json")
    Traceback (most recent call last):
    ...
    beam_s3_sink.errors.S3RequestError: S3 refused HeadObject on s3://bucket/exports/_nightly-manifest.json: 404...
    """
    method = getattr(client, _snake(operation))
    # A listing names the prefix it lists, so that the message points at the path.
    where = key if key is not None else kwargs.get("Prefix")
    promised, attempts = PROMISED.get(operation), _attempts(client)
    for attempt in range(1, attempts + 1):
        try:
            answer = method(Bucket=bucket, **({"Key": key} if key is not None else {}), **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise S3RequestError(
                describe_error(exc, operation, bucket, where), error_code(exc), http_status(exc)
            ) from exc
        missing = promised(answer) if promised is not None else []
        if not missing:
            return answer
        target = f"s3://{bucket}/{where}" if where is not None else f"s3://{bucket}"
        _log.warning(
            "S3's answer to %s on %s lacks %s (attempt %d of %d)", operation, target, missing, attempt, attempts
        )
        counter = getattr(client, "_beam_s3_sink_retries", None)
        if counter is not None:
            counter.count()
        if attempt < attempts:
            time.sleep(min(5.0, 0.1 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0))
    raise S3RequestError(
        f"S3's answer to {operation} on {target} lacks {' and '.join(missing)}, which S3 always sends "
        f"(after {attempts} attempts): the store, or a proxy or gateway in front of it, answered "
        "incompletely; check the endpoint and rerun the copy",
        "IncompleteAnswer",
        0,
    )


def read_object(client: Any, bucket: str, key: str) -> bytes:
    """The whole body of one object (``GetObject``); a failed read is an S3RequestError too."""
    body = call(client, "GetObject", bucket, key)["Body"]
    try:
        return body.read()
    except BotoCoreError as exc:  # a dropped connection mid-body
        raise S3RequestError(describe_error(exc, "GetObject", bucket, key)) from exc


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def list_keys(client: Any, bucket: str, prefix: str) -> Iterator[Dict[str, Any]]:
    """Every object under ``prefix``: dicts with ``Key``, ``Size``, ``ETag``."""
    token: Optional[str] = None
    while True:
        kwargs: Dict[str, Any] = {"Prefix": prefix}
        if token:
            kwargs["ContinuationToken"] = token
        page = call(client, "ListObjectsV2", bucket, **kwargs)
        yield from page.get("Contents", ())
        if not page.get("IsTruncated"):
            return
        token = page["NextContinuationToken"]


def list_uploads(client: Any, bucket: str, prefix: str) -> Iterator[Tuple[str, str]]:
    """Every multipart upload in progress under ``prefix``, as ``(key, upload id)``."""
    markers: Dict[str, str] = {}
    while True:
        page = call(client, "ListMultipartUploads", bucket, Prefix=prefix, **markers)
        for upload in page.get("Uploads", ()):
            yield upload["Key"], upload["UploadId"]
        if not page.get("IsTruncated"):
            return
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


class PartBuffers:
    """Part buffers of one size, handed out again once uploaded (at most ``keep`` kept).

    >>> buffers = PartBuffers(size=8, keep=2)
    >>> part = buffers.take(); buffers.give(part)
    >>> buffers.take() is part  # filled again, not allocated again
    True
    """

    def __init__(self, size: int, keep: int) -> None:
        self.size = size
        self._keep = keep
        self._free: List[bytearray] = []
        self._lock = threading.Lock()  # taken on encode threads, given back on upload threads

    def take(self) -> bytearray:
        """A buffer of ``size`` bytes (its old contents are overwritten by the stream)."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return bytearray(self.size)

    def give(self, buffer: bytearray) -> None:
        """Take back a buffer whose upload has ended (a shorter last part is dropped)."""
        if len(buffer) == self.size:
            with self._lock:
                if len(self._free) < self._keep:
                    self._free.append(buffer)


class MultipartStream:
    """A write-only stream that uploads what is written as parts of one multipart upload.

    >>> stream = MultipartStream(client, "bucket", "p/id-0123456789abcdef-0001.csv",
    ...                          part_size=8 * 2**20, pool=pool, max_in_flight=4)
    >>> stream.write(b"a,b\\n")
    4
    >>> pending = stream.finish(rows=1)
    >>> pending.rows, pending.bytes, len(pending.parts)  # uploaded, not completed: invisible
    (1, 4, 1)

    The upload is created lazily, on the first part. ``finish`` uploads the remaining bytes
    as the last part (an empty part for an empty file) and returns a :class:`PendingFile`;
    ``abort`` gives the upload up. Neither completes it. ``buffers`` (:class:`PartBuffers`
    of ``part_size``), when given, recycles the part buffers.
    """

    def __init__(
        self,
        client: Any,
        bucket: str,
        key: str,
        *,
        part_size: int,
        pool: ThreadPoolExecutor,
        max_in_flight: int,
        create_args: Optional[Dict[str, Any]] = None,
        part_args: Optional[Dict[str, Any]] = None,
        buffers: Optional[PartBuffers] = None,
    ) -> None:
        if buffers is not None and buffers.size != part_size:
            raise ValueError(f"MultipartStream: buffers of {buffers.size} bytes for parts of {part_size}")
        self._buffers = buffers
        self._client = client
        self.bucket = bucket
        self.key = key
        self._part_size = part_size
        self._pool = pool
        self._max_in_flight = max_in_flight
        self._create_args = create_args or {}
        # e.g. ChecksumAlgorithm: botocore computes the part's checksum, S3 verifies it.
        self._part_args = part_args or {}
        algorithm = self._part_args.get("ChecksumAlgorithm")
        self._checksum_field = f"Checksum{algorithm}" if algorithm else None
        self._buffer: Optional[bytearray] = None  # the part being filled
        self._filled = 0
        self._position = 0
        self._upload_id: Optional[str] = None
        self._futures: List[Future] = []
        self.parts_uploaded = 0

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        # Each part is one buffer of exactly part_size bytes, filled in place and handed to the
        # pool as it is: no slicing, copying or regrowing of a buffer per part.
        view = memoryview(data).cast("B")
        size = len(view)
        self._position += size
        while view:
            if self._buffer is None:
                self._buffer = self._buffers.take() if self._buffers else bytearray(self._part_size)
                self._filled = 0
            take = min(len(view), self._part_size - self._filled)
            self._buffer[self._filled : self._filled + take] = view[:take]
            self._filled += take
            view = view[take:]
            if self._filled == self._part_size:
                chunk, self._buffer = self._buffer, None
                self._submit(chunk)
        return size

    def flush(self) -> None:
        """Nothing to do: a part is uploaded when it is full, the last one by :meth:`finish`."""

    # upload -----------------------------------------------------------------------------
    @property
    def upload_id(self) -> Optional[str]:
        return self._upload_id

    def _ensure_upload(self) -> str:
        if self._upload_id is None:
            response = call(self._client, "CreateMultipartUpload", self.bucket, self.key, **self._create_args)
            self._upload_id = response["UploadId"]
        return self._upload_id

    def _submit(self, chunk: bytearray) -> None:
        upload_id = self._ensure_upload()
        number = len(self._futures) + 1
        # Bound memory: wait for the oldest part in flight before queueing another.
        in_flight = [f for f in self._futures if not f.done()]
        if len(in_flight) >= self._max_in_flight:
            in_flight[0].result()
        self._futures.append(self._pool.submit(self._upload_part, upload_id, number, chunk))

    def _upload_part(self, upload_id: str, number: int, chunk: bytearray) -> Tuple[int, str, str]:
        try:
            response = call(
                self._client,
                "UploadPart",
                self.bucket,
                self.key,
                UploadId=upload_id,
                PartNumber=number,
                Body=chunk,
                **self._part_args,
            )
        finally:  # botocore holds the body no longer, retries included
            if self._buffers is not None:
                self._buffers.give(chunk)
        self.parts_uploaded += 1
        checksum = response.get(self._checksum_field, "") if self._checksum_field else ""
        if self._checksum_field and not checksum:
            raise S3RequestError(
                f"S3 did not return the {self._checksum_field} of part {number} of "
                f"s3://{self.bucket}/{self.key}: the store does not support part checksums; "
                "set ObjectSettings(checksum_algorithm=None)"
            )
        return number, response["ETag"], checksum  # call() made sure there is one

    def finish(self, rows: int) -> PendingFile:
        """Upload the last part, wait for every part, and describe the pending upload."""
        if self._buffer is not None or not self._futures:
            last = self._buffer if self._buffer is not None else bytearray()
            del last[self._filled :]
            self._buffer, self._filled = None, 0
            self._submit(last)
        parts = [f.result() for f in self._futures]
        checksums = tuple(c for _, _, c in parts) if self._checksum_field else ()
        return PendingFile(
            key=self.key,
            upload_id=self._ensure_upload(),
            parts=tuple((n, etag) for n, etag, _ in parts),
            rows=rows,
            bytes=self._position,
            part_checksums=checksums,
        )

    def abort(self) -> None:
        """Give the upload up (best effort): its parts are discarded by S3."""
        for f in self._futures:
            f.cancel()
        for f in self._futures:
            try:
                f.result()
            except (S3RequestError, CancelledError):  # we are aborting anyway
                pass
        if self._upload_id is not None:
            try:
                call(self._client, "AbortMultipartUpload", self.bucket, self.key, UploadId=self._upload_id)
            except S3RequestError as exc:
                _log.warning("could not abort %s: %s", self.key, exc)
