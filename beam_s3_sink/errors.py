"""Every exception the package raises derives from :class:`CopyToS3Error`.

::

    CopyToS3Error (RuntimeError)         a copy failed (fail_on_error=True); the message says why and what to do
    ├── S3RequestError                   an S3 request failed: the operation, the object, S3's answer
    │   └── ReplaceError                 if_exists="replace": deleting the old objects failed after the commit
    ├── CommittedCopyError               abort_copy() of a finished copy without force=True
    ├── CommitConflictError              CopyToIceberg: other writers kept committing first (iceberg_commit)
    └── (also ValueError) a value does not fit; caught inside the copy and reported with the object:
        ├── RowError                     a row does not fit the schema (column, type, value)
        ├── CoercionError                a value cannot be made into its column's type
        ├── BatchError                   an Arrow batch does not fit the schema (column, both types)
        ├── EncodeError                  a format cannot encode a value (column, value)
        └── UsageError, SourceError, SchemaSyntaxError   the CLI's (beam_s3_sink.cli): exit 2

So ``except CopyToS3Error`` catches whatever this package raises; the value errors are also
``ValueError``\\ s, as Python code expects of a value that does not fit. Mistakes found when the
pipeline is built (a bad URI, an unknown option) are plain ``ValueError``/``TypeError``.

>>> issubclass(RowError, CopyToS3Error) and issubclass(RowError, ValueError)
True
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "CopyToS3Error",
    "S3RequestError",
    "ReplaceError",
    "CommittedCopyError",
    "RowError",
    "CoercionError",
    "BatchError",
    "EncodeError",
]


class CopyToS3Error(RuntimeError):
    """The copy failed; the message says why and what to do. Raised when ``fail_on_error``,
    and the base of every exception of the package."""


class S3RequestError(CopyToS3Error):
    """An S3 request failed; the message names the operation, the object and S3's answer.

    ``code`` is S3's error code (``NoSuchUpload``, ``PreconditionFailed``...) and ``status`` the
    HTTP status, when S3 answered, so that a caller can tell an expected refusal from a failure.

    >>> S3RequestError("PutObject on k failed", code="PreconditionFailed", status=412).status
    412
    """

    def __init__(self, message: str, code: Optional[str] = None, status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class ReplaceError(S3RequestError):
    """Deleting the replaced objects failed after the new copy committed: the new files and
    the manifest stay, the sentinel stays too, and a rerun with the same sink id finishes."""


class CommittedCopyError(CopyToS3Error):
    """The copy finished (manifest, no sentinel): removing it needs ``force=True``."""


class RowError(CopyToS3Error, ValueError):
    """A row does not fit the schema: names the column, the expected type and the value."""


class CoercionError(CopyToS3Error, ValueError):
    """A value cannot be made into its column's type; the message says why."""


class BatchError(CopyToS3Error, ValueError):
    """A batch does not fit the copy's schema: names the column, both types and the source."""


class EncodeError(CopyToS3Error, ValueError):
    """The format could not encode a value; the message names the column and the value."""
