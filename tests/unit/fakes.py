"""An in-memory fake of the small part of boto3's S3 client that the package calls.

The unit tier runs with no server: the writer, :class:`~beam_s3_sink.s3.MultipartStream`,
the claim, clean-up and the steps' S3 code talk to :class:`FakeS3` instead. It keeps objects
and multipart uploads in dicts and answers as S3 does where the package looks: the response
keys it reads, ``ClientError`` with S3's error codes and HTTP status, paginated listings
(small pages, so that continuation is exercised), ``If-None-Match: *`` on ``PutObject``, and
``NoSuchUpload`` for an upload completed or aborted already::

    test ──▶ code under test ──client.upload_part(...)──▶ FakeS3 ──▶ .objects / .uploads / .calls
                                                            ▲
                              fake.refuse("UploadPart", "AccessDenied") (failure injection)

Only what the package uses is here; a call to anything else fails with ``AttributeError``.
"""

from __future__ import annotations

import hashlib
import io
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from botocore.exceptions import ClientError

__all__ = ["FakeS3", "FakeObject", "FakeUpload", "client_error", "FAKE_CONFIG", "serve"]

_STATUS = {
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "NoSuchUpload": 404,
    "AccessDenied": 403,
    "PreconditionFailed": 412,
    "ConditionalRequestConflict": 409,
    "NotImplemented": 501,
    "InvalidPart": 400,
    "SlowDown": 503,
    "InternalError": 500,
    "EntityTooSmall": 400,
}


def client_error(code: str, operation: str, message: str = "") -> ClientError:
    """A ``ClientError`` as botocore raises it for S3's error ``code``."""
    return ClientError(
        {
            "Error": {"Code": code, "Message": message or code},
            "ResponseMetadata": {"HTTPStatusCode": _STATUS.get(code, 400)},
        },
        operation,
    )


@dataclass
class FakeObject:
    """A stored object: its bytes, the request's extra parameters, when it was written."""

    body: bytes
    args: Dict[str, Any]
    last_modified: datetime


@dataclass
class FakeUpload:
    """A multipart upload in progress: its parts by number, as ``(ETag, bytes)``."""

    bucket: str
    key: str
    args: Dict[str, Any]
    parts: Dict[int, Tuple[str, bytes]] = field(default_factory=dict)


class _Events:
    def __init__(self) -> None:
        self.handlers: List[Tuple[str, Callable[..., Any]]] = []

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        self.handlers.append((event, handler))


class _Meta:
    def __init__(self) -> None:
        self.events = _Events()


class FakeS3:
    """The fake client. ``buckets``: the buckets that exist (others: ``NoSuchBucket``).

    ``enforce_if_none_match=False`` makes it a store that ignores the header (the claim's
    fallback); ``page_size`` is the listings' page length; ``part_checksums`` makes
    ``UploadPart`` answer the checksum that ``ChecksumAlgorithm`` asked for.

    >>> s3 = FakeS3()
    >>> s3.put_object(Bucket="bucket", Key="a", Body=b"x")["ETag"] == s3.head_object(Bucket="bucket", Key="a")["ETag"]
    True
    """

    def __init__(
        self,
        buckets: Tuple[str, ...] = ("bucket",),
        *,
        enforce_if_none_match: bool = True,
        page_size: int = 2,
        part_checksums: bool = True,
    ) -> None:
        self.buckets = set(buckets)
        self.objects: Dict[Tuple[str, str], FakeObject] = {}
        self.uploads: Dict[str, FakeUpload] = {}
        self.calls: List[Tuple[str, Dict[str, Any]]] = []
        self.enforce_if_none_match = enforce_if_none_match
        self.page_size = page_size
        self.part_checksums = part_checksums
        self.undeletable: set = set()  # keys DeleteObjects reports as AccessDenied errors
        self.meta = _Meta()
        self._refusals: Dict[str, List[Tuple[str, int, Optional[Callable[[Dict[str, Any]], bool]]]]] = {}
        self._ids = itertools.count(1)
        self._clock = datetime(2026, 1, 1, tzinfo=timezone.utc)

    # test helpers -----------------------------------------------------------------------
    def refuse(
        self, operation: str, code: str, times: int = 10**9, when: Optional[Callable[[Dict[str, Any]], bool]] = None
    ) -> None:
        """Make the next ``times`` calls of ``operation`` (e.g. ``"UploadPart"``) for which
        ``when(kwargs)`` holds fail with S3's error ``code``."""
        self._refusals.setdefault(operation, []).append((code, times, when))

    def keys(self, bucket: str = "bucket") -> List[str]:
        """The keys of the objects in ``bucket``, sorted."""
        return sorted(k for b, k in self.objects if b == bucket)

    def body(self, key: str, bucket: str = "bucket") -> bytes:
        return self.objects[(bucket, key)].body

    def operations(self) -> List[str]:
        """The operations called so far, in order (``"UploadPart"``...)."""
        return [name for name, _ in self.calls]

    def _enter(self, operation: str, kwargs: Dict[str, Any]) -> None:
        self.calls.append((operation, dict(kwargs)))
        for index, (code, times, when) in enumerate(self._refusals.get(operation, [])):
            if times > 0 and (when is None or when(kwargs)):
                self._refusals[operation][index] = (code, times - 1, when)
                raise client_error(code, operation)
        bucket = kwargs.get("Bucket")
        if bucket not in self.buckets:
            raise client_error("NoSuchBucket", operation, "The specified bucket does not exist")

    def _now(self) -> datetime:
        self._clock += timedelta(seconds=1)
        return self._clock

    # objects ------------------------------------------------------------------------------
    def put_object(
        self, *, Bucket: str, Key: str, Body: Any = b"", IfNoneMatch: Optional[str] = None, **args: Any
    ) -> Dict[str, Any]:
        self._enter("PutObject", dict(Bucket=Bucket, Key=Key, IfNoneMatch=IfNoneMatch, **args))
        if IfNoneMatch == "*" and self.enforce_if_none_match and (Bucket, Key) in self.objects:
            raise client_error("PreconditionFailed", "PutObject", "At least one of the pre-conditions failed")
        body = Body if isinstance(Body, bytes) else bytes(Body)
        self.objects[(Bucket, Key)] = FakeObject(body, args, self._now())
        return {"ETag": _etag(body)}

    def _object(self, operation: str, bucket: str, key: str) -> FakeObject:
        found = self.objects.get((bucket, key))
        if found is None:
            raise client_error("NoSuchKey" if operation == "GetObject" else "404", operation)
        return found

    def get_object(self, *, Bucket: str, Key: str) -> Dict[str, Any]:
        self._enter("GetObject", dict(Bucket=Bucket, Key=Key))
        found = self._object("GetObject", Bucket, Key)
        return {"Body": io.BytesIO(found.body), "ContentLength": len(found.body), "ETag": _etag(found.body)}

    def head_object(self, *, Bucket: str, Key: str) -> Dict[str, Any]:
        self._enter("HeadObject", dict(Bucket=Bucket, Key=Key))
        found = self._object("HeadObject", Bucket, Key)
        return {"ContentLength": len(found.body), "ETag": _etag(found.body), **found.args}

    def delete_object(self, *, Bucket: str, Key: str) -> Dict[str, Any]:
        self._enter("DeleteObject", dict(Bucket=Bucket, Key=Key))
        self.objects.pop((Bucket, Key), None)  # S3 answers 204 whether or not it was there
        return {}

    def delete_objects(self, *, Bucket: str, Delete: Dict[str, Any]) -> Dict[str, Any]:
        self._enter("DeleteObjects", dict(Bucket=Bucket, Delete=Delete))
        errors = [
            {"Key": item["Key"], "Code": "AccessDenied", "Message": "Access Denied"}
            for item in Delete["Objects"]
            if item["Key"] in self.undeletable
        ]
        for item in Delete["Objects"]:
            if item["Key"] not in self.undeletable:
                self.objects.pop((Bucket, item["Key"]), None)
        answer: Dict[str, Any] = {"Errors": errors} if errors else {}
        if not Delete.get("Quiet"):
            answer["Deleted"] = [i for i in Delete["Objects"] if i["Key"] not in self.undeletable]
        return answer

    def list_objects_v2(
        self, *, Bucket: str, Prefix: str = "", ContinuationToken: Optional[str] = None, **_: Any
    ) -> Dict[str, Any]:
        self._enter("ListObjectsV2", dict(Bucket=Bucket, Prefix=Prefix, ContinuationToken=ContinuationToken))
        keys = [k for k in self.keys(Bucket) if k.startswith(Prefix)]
        start = int(ContinuationToken or 0)
        page = keys[start : start + self.page_size]
        answer: Dict[str, Any] = {"KeyCount": len(page), "IsTruncated": start + self.page_size < len(keys)}
        if page:
            answer["Contents"] = [
                {
                    "Key": k,
                    "Size": len(self.objects[(Bucket, k)].body),
                    "ETag": _etag(self.objects[(Bucket, k)].body),
                    "LastModified": self.objects[(Bucket, k)].last_modified,
                }
                for k in page
            ]
        if answer["IsTruncated"]:
            answer["NextContinuationToken"] = str(start + self.page_size)
        return answer

    # multipart uploads ------------------------------------------------------------------
    def create_multipart_upload(self, *, Bucket: str, Key: str, **args: Any) -> Dict[str, Any]:
        self._enter("CreateMultipartUpload", dict(Bucket=Bucket, Key=Key, **args))
        upload_id = f"upload-{next(self._ids):04d}"
        self.uploads[upload_id] = FakeUpload(Bucket, Key, args)
        return {"Bucket": Bucket, "Key": Key, "UploadId": upload_id}

    def _upload(self, operation: str, bucket: str, key: str, upload_id: str) -> FakeUpload:
        upload = self.uploads.get(upload_id)
        if upload is None or (upload.bucket, upload.key) != (bucket, key):
            raise client_error("NoSuchUpload", operation, "The specified upload does not exist")
        return upload

    def upload_part(
        self,
        *,
        Bucket: str,
        Key: str,
        UploadId: str,
        PartNumber: int,
        Body: bytes,
        ChecksumAlgorithm: Optional[str] = None,
    ) -> Dict[str, Any]:
        self._enter(
            "UploadPart",
            dict(
                Bucket=Bucket,
                Key=Key,
                UploadId=UploadId,
                PartNumber=PartNumber,
                Body=Body,
                ChecksumAlgorithm=ChecksumAlgorithm,
            ),
        )
        upload = self._upload("UploadPart", Bucket, Key, UploadId)
        etag = _etag(Body)
        upload.parts[PartNumber] = (etag, bytes(Body))
        answer = {"ETag": etag}
        if ChecksumAlgorithm and self.part_checksums:
            answer[f"Checksum{ChecksumAlgorithm}"] = "sum-" + hashlib.sha256(Body).hexdigest()[:8]
        return answer

    def complete_multipart_upload(
        self, *, Bucket: str, Key: str, UploadId: str, MultipartUpload: Dict[str, Any]
    ) -> Dict[str, Any]:
        self._enter(
            "CompleteMultipartUpload", dict(Bucket=Bucket, Key=Key, UploadId=UploadId, MultipartUpload=MultipartUpload)
        )
        upload = self._upload("CompleteMultipartUpload", Bucket, Key, UploadId)
        body = b""
        for part in MultipartUpload["Parts"]:
            stored = upload.parts.get(part["PartNumber"])
            if stored is None or stored[0] != part["ETag"]:
                raise client_error("InvalidPart", "CompleteMultipartUpload")
            body += stored[1]
        del self.uploads[UploadId]
        self.objects[(Bucket, Key)] = FakeObject(body, upload.args, self._now())
        return {"ETag": _etag(body)}

    def abort_multipart_upload(self, *, Bucket: str, Key: str, UploadId: str) -> Dict[str, Any]:
        self._enter("AbortMultipartUpload", dict(Bucket=Bucket, Key=Key, UploadId=UploadId))
        self._upload("AbortMultipartUpload", Bucket, Key, UploadId)
        del self.uploads[UploadId]
        return {}

    def list_multipart_uploads(
        self, *, Bucket: str, Prefix: str = "", KeyMarker: Optional[str] = None, UploadIdMarker: Optional[str] = None
    ) -> Dict[str, Any]:
        self._enter(
            "ListMultipartUploads",
            dict(Bucket=Bucket, Prefix=Prefix, KeyMarker=KeyMarker, UploadIdMarker=UploadIdMarker),
        )
        pending = sorted(
            (u.key, upload_id)
            for upload_id, u in self.uploads.items()
            if u.bucket == Bucket and u.key.startswith(Prefix)
        )
        if KeyMarker is not None:
            pending = [p for p in pending if p > (KeyMarker, UploadIdMarker or "")]
        page = pending[: self.page_size]
        truncated = len(pending) > self.page_size
        answer: Dict[str, Any] = {"Uploads": [{"Key": k, "UploadId": u} for k, u in page], "IsTruncated": truncated}
        if truncated:
            answer["NextKeyMarker"], answer["NextUploadIdMarker"] = page[-1]
        return answer


def _config() -> Any:
    from beam_s3_sink.config import S3Config

    return S3Config(endpoint_url="http://fake.invalid")


FAKE_CONFIG = _config()
"""The S3Config of a copy whose steps talk to the fake (see :func:`serve`)."""


def serve(fake: "FakeS3", monkeypatch: Any, config: Any = FAKE_CONFIG) -> Any:
    """Make ``fake`` the client of every step that runs with ``config`` in this process: the
    steps take their client from :mod:`beam_s3_sink.clients`' per-process cache, so the fake
    goes there (undone when the test ends). Returns ``config``."""
    from beam_s3_sink import clients
    from beam_s3_sink.s3 import RetryCounter

    monkeypatch.setitem(clients._clients, config, (fake, RetryCounter()))
    return config


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(bytes(body)).hexdigest() + '"'
