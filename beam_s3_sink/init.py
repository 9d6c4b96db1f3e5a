"""Step 1, initialization: runs once, on one worker, before any row is uploaded.

::

    Create([None]) ──▶ PrepareFn ──InitState──▶ AsSingleton side input of upload and finish
                          ▲
          errors ──AsList─┘  (any element: write nothing, carry the error forward)

It lists ``P/`` and decides:

* a manifest of ``ID`` and no sentinel: the copy already finished; report that result again
  and write nothing (an idempotent rerun);
* an object that ``ID`` did not write: fail, naming how many and the first few keys;
* otherwise: remove what an earlier failed run of ``ID`` left (pending multipart uploads, data
  files, a stale manifest) and write the ``INCOMPLETE`` sentinel.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, List

import apache_beam as beam

from .config import S3Config
from .keys import CopyKeys
from .manifest import result_from_manifest
from .results import InitState
from .s3 import S3RequestError, call, list_keys, list_uploads

__all__ = ["PrepareFn", "prepare"]

_log = logging.getLogger(__name__)
_SHOWN_FOREIGN_KEYS = 5


class PrepareFn(beam.DoFn):
    """Validates the destination and writes the sentinel; emits one :class:`InitState`."""

    def __init__(self, keys: CopyKeys, config: S3Config) -> None:
        self._keys = keys
        self._config = config
        self._client: Any = None

    def setup(self) -> None:
        self._client = self._config.make_client()

    def process(self, _unused: Any, errors: Iterable[Any]) -> Iterable[InitState]:
        for error in errors:
            yield InitState(error=f"the copy was aborted before writing anything, by an upstream error: {error}")
            return
        try:
            yield prepare(self._client, self._keys)
        except S3RequestError as exc:
            yield InitState(error=str(exc))


def prepare(client: Any, keys: CopyKeys) -> InitState:
    """Run the init step against S3 (see the module docstring); return what it found."""
    location = keys.location
    bucket = location.bucket
    objects = list(list_keys(client, bucket, location.list_prefix))
    present = {o["Key"] for o in objects}
    if keys.manifest in present and keys.sentinel not in present:
        data = call(client, "GetObject", bucket, keys.manifest)["Body"].read()
        _log.info("copy %s to %s already finished; reporting its result again", keys.sink_id, location.uri)
        return InitState(done=result_from_manifest(data, location.object_uri(keys.manifest)))

    foreign = sorted(k for k in present if not keys.is_owned(k))
    if foreign:
        shown = ", ".join(foreign[:_SHOWN_FOREIGN_KEYS])
        more = f" and {len(foreign) - _SHOWN_FOREIGN_KEYS} more" if len(foreign) > _SHOWN_FOREIGN_KEYS else ""
        return InitState(error=(
            f"{location.uri} is not empty: {len(foreign)} object(s) that copy {keys.sink_id!r} did not "
            f"write are there ({shown}{more}); copy to an empty path, or delete those objects first. "
            "Nothing was written."))

    warnings: List[str] = []
    for key, upload_id in list_uploads(client, bucket, keys.data_prefix):
        if keys.is_data_file(key):
            call(client, "AbortMultipartUpload", bucket, key, UploadId=upload_id)
    leftovers = sorted(k for k in present if k != keys.sentinel)
    for key in leftovers:
        call(client, "DeleteObject", bucket, key)
    if leftovers:
        _log.info("removed %d object(s) left by an earlier failed run of copy %s", len(leftovers), keys.sink_id)
    call(client, "PutObject", bucket, keys.sentinel, Body=b"")
    return InitState(warnings=tuple(warnings))
