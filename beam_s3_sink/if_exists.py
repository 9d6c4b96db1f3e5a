"""What a copy does with objects already under its path that it did not write (``if_exists``).

* ``"error"`` (default): fail before writing anything, naming the objects.
* ``"append"``: leave them alone; the new files go next to them.
* ``"replace"``: delete them, but only once the new copy has committed. Init records the
  keys it found (so that objects written meanwhile by someone else are never touched), and
  completion deletes exactly those, after the manifest and before the sentinel::

      complete every new upload ─▶ write manifest ─▶ delete the old keys ─▶ delete sentinel
      (new files appear whole)     (names a          (readers now see the     (the copy is
                                    complete copy)    new copy, and less old)   finished)

  So a reader listing the path sees every old object until every new file is complete, and
  the manifest it finds always names a complete copy. A copy that fails leaves the old
  objects in place.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from .errors import ReplaceError, S3RequestError
from .s3 import call

__all__ = ["IF_EXISTS", "check_if_exists", "delete_keys"]

_log = logging.getLogger(__name__)
IF_EXISTS = ("error", "append", "replace")
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys


def check_if_exists(if_exists: str) -> str:
    """Return ``if_exists`` if valid, else raise ``ValueError``.

    >>> check_if_exists("replace")
    'replace'
    """
    if if_exists not in IF_EXISTS:
        raise ValueError(f"CopyToS3: if_exists must be one of {list(IF_EXISTS)}, got {if_exists!r}")
    return if_exists


def delete_keys(client: Any, bucket: str, keys: Sequence[str]) -> None:
    """Delete ``keys`` with ``DeleteObjects``, 1000 at a time; raise :class:`ReplaceError`
    naming the first key S3 refused to delete.

    >>> delete_keys(client, "bucket", ["old/part-0.parquet"])
    """
    for start in range(0, len(keys), _DELETE_BATCH):
        chunk = keys[start : start + _DELETE_BATCH]
        try:
            response = call(
                client, "DeleteObjects", bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
        except S3RequestError as exc:
            raise ReplaceError(_replace_failed(str(exc))) from exc
        errors = response.get("Errors") or ()
        if errors:
            first = errors[0]
            raise ReplaceError(
                _replace_failed(
                    f"S3 refused to delete s3://{bucket}/{first.get('Key')} ({first.get('Code')}: "
                    f"{first.get('Message')}) and {len(errors) - 1} more"
                )
            )
    if keys:
        _log.info("deleted %d replaced object(s) in s3://%s", len(keys), bucket)


def _replace_failed(why: str) -> str:
    return (
        f"the new copy is complete and its manifest written, but deleting the objects it "
        f"replaces failed: {why}. The sentinel is left in place; rerun with the same sink_id "
        "to finish replacing"
    )
