"""Removing what an incomplete copy left: :func:`abort_copy` (the CLI's ``--abort``), and
:func:`abort_uploads`, the one place that aborts a copy's pending uploads (initialization,
completion and ``abort_copy`` all call it).

A crashed or failed copy leaves its sentinel, perhaps the claim, pending multipart uploads
(invisible but billed) and, after a failed commit, data files; ``abort_copy`` removes exactly
those, sentinel last, touching nothing of another sink id. A committed copy is refused unless
``force=True``; of a stream, the committed units (their manifests and the files they name)
stay unless ``force=True``, and the rest goes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import AbstractSet, Any, List, Optional, Tuple

from .claim import read_claim_holder
from .config import S3Config
from .errors import CommittedCopyError, S3RequestError
from .keys import CopyKeys, parse_s3_uri, validate_sink_id
from .s3 import call, list_keys, list_uploads, read_object

__all__ = ["abort_copy", "abort_uploads", "AbortReport"]

_log = logging.getLogger(__name__)


def abort_uploads(
    client: Any, keys: CopyKeys, keep: AbstractSet[Tuple[str, str]] = frozenset(), strict: bool = False
) -> Tuple[List[Tuple[str, str]], List[str]]:
    """Abort the pending uploads of ``keys``' data files but those in ``keep`` (matched by
    ``(key, upload id)``: a ``CreateMultipartUpload`` whose answer was lost and that botocore
    retried leaves a second upload of the same key). Returns the ``(key, upload id)`` aborted
    and, unless ``strict`` (then a refusal raises), a warning per refusal: pending uploads are
    invisible, and some S3-compatible stores cannot list or abort them."""
    bucket, aborted, warnings = keys.location.bucket, [], []
    try:
        listed = list_uploads(client, bucket, keys.data_prefix)
        uploads = [upload for upload in listed if keys.is_data_file(upload[0]) and upload not in keep]
    except S3RequestError as exc:
        if strict:
            raise
        _log.warning("could not list pending uploads of copy %s: %s", keys.sink_id, exc)
        return [], [f"could not look for pending uploads to abort: {exc}"]
    for key, upload_id in uploads:
        try:
            call(client, "AbortMultipartUpload", bucket, key, UploadId=upload_id)
            aborted.append((key, upload_id))
        except S3RequestError as exc:
            if strict:
                raise
            _log.warning("could not abort %s: %s", key, exc)
            warnings.append(f"could not abort a pending upload: {exc}")
    return aborted, warnings


@dataclass(frozen=True)
class AbortReport:
    """What :func:`abort_copy` removed.

    Attributes:
      uri, sink_id: the copy.
      deleted: the ``s3://`` URIs of the objects deleted (data files, sentinel, manifest, claim).
      aborted: ``(s3:// URI, upload id)`` of each pending multipart upload aborted.
      committed: whether the copy had finished (only removed with ``force``).
    """

    uri: str
    sink_id: str
    deleted: Tuple[str, ...] = ()
    aborted: Tuple[Tuple[str, str], ...] = ()
    committed: bool = False

    def describe(self) -> str:
        """A few lines a person reads: what was removed."""
        lines = [
            f"copy {self.sink_id!r} in {self.uri}: deleted {len(self.deleted)} object(s), "
            f"aborted {len(self.aborted)} pending upload(s)"
        ]
        lines += [f"  deleted {uri}" for uri in self.deleted]
        lines += [f"  aborted {uri} (upload {upload_id[:16]}...)" for uri, upload_id in self.aborted]
        return "\n".join(lines)


def abort_copy(
    uri: str, sink_id: str, s3: Optional[S3Config] = None, force: bool = False, client: Optional[object] = None
) -> AbortReport:
    """Remove what copy ``sink_id`` left under ``uri``; return what was removed.

    >>> _ = client.put_object(Bucket="bucket", Key="exports/orders/_nightly-INCOMPLETE", Body=b"")
    >>> print(abort_copy("s3://bucket/exports/orders", "nightly", client=client).describe())
    copy 'nightly' in s3://bucket/exports/orders: deleted 1 object(s), aborted 0 pending upload(s)
      deleted s3://bucket/exports/orders/_nightly-INCOMPLETE

    Raises :class:`CommittedCopyError` for a finished copy unless ``force``, and
    ``S3RequestError`` when a request is refused (what was removed before stays removed;
    running it again finishes the job).
    """
    keys = CopyKeys(parse_s3_uri(uri), validate_sink_id(sink_id))
    client = client if client is not None else (s3 or S3Config()).make_client()
    bucket, location = keys.location.bucket, keys.location
    owned = sorted(o["Key"] for o in list_keys(client, bucket, location.list_prefix) if keys.is_owned(o["Key"]))
    committed = keys.manifest in owned and keys.sentinel not in owned
    units = [k for k in owned if keys.is_unit_object(k) and k.endswith(".manifest.json")]
    if units and not force:  # a stream's committed units are data: keep them
        kept = set(units) | {
            entry["url"].split("/", 3)[3]
            for unit in units
            for entry in json.loads(read_object(client, bucket, unit))["entries"]
        }
        owned = [k for k in owned if k not in kept]
    if committed and not force:
        raise CommittedCopyError(
            f"copy {sink_id!r} in {location.uri} is complete (its manifest is there and no sentinel): "
            f"removing it deletes finished data; pass --force (force=True) to remove it anyway"
        )
    aborted = [(location.object_uri(key), upload_id) for key, upload_id in abort_uploads(client, keys, strict=True)[0]]
    deleted = []
    for key in [k for k in owned if k != keys.sentinel]:
        call(client, "DeleteObject", bucket, key)
        deleted.append(location.object_uri(key))
    holder = read_claim_holder(client, bucket, keys.claim)
    if holder is not None and holder["sink_id"] == sink_id:
        call(client, "DeleteObject", bucket, keys.claim)
        deleted.append(location.object_uri(keys.claim))
    # The sentinel goes last: until everything else is gone, readers still see "incomplete".
    if keys.sentinel in owned:
        call(client, "DeleteObject", bucket, keys.sentinel)
        deleted.append(location.object_uri(keys.sentinel))
    report = AbortReport(location.uri, sink_id, tuple(deleted), tuple(aborted), committed)
    _log.info("%s", report.describe())
    return report
