"""What a copy does with objects already under its path that it did not write (``if_exists``):
``"error"`` (default) fails before writing anything, naming them; ``"append"`` leaves them;
``"replace"`` deletes the keys initialization found, once the new copy has committed (after
its manifest, before its sentinel), so a reader always sees a complete copy, and a copy that
fails leaves the old objects in place.
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
