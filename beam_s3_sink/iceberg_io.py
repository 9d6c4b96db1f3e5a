"""The FileIO through which pyiceberg writes a table's metadata during a copy's commit.

pyiceberg writes the metadata of a commit (manifests ``metadata/...-m0.avro``, the manifest
list ``snap-...avro`` and, for a SQL catalog, ``...metadata.json``) through the table's FileIO.
Its default, ``PyArrowFileIO``, writes every S3 object as a multipart upload; when the commit
fails for good at ``CompleteMultipartUpload`` (or dies between two of its requests), that
upload stays pending under the table's ``metadata/``: invisible, but stored and billed until a
lifecycle rule removes it, and no copy can tell it from another writer's upload in flight.

:class:`PutObjectFileIO` is ``PyArrowFileIO`` with one change: an ``s3://`` object it writes
is buffered in memory and stored by a single ``PutObject`` when the stream closes (metadata
files are small: kilobytes to a few MiB), through the package's own client
(:func:`~.clients.shared_client`: botocore's retries, :func:`~.s3.call`'s errors). A
``PutObject`` either stores the whole object or nothing, so a failed commit leaves no pending
upload, and a transient fault is retried by botocore as for the data files. A stream closed by
an exception stores nothing. Reads, deletes and other schemes stay ``PyArrowFileIO``'s (a read
leaves nothing behind; a table scan reads data files through pyarrow's filesystem).

:class:`~.iceberg.Catalog` loads every catalog with ``py-io-impl`` set to it, unless the
catalog's properties name a FileIO of their own.

Why this and not aborting the pending metadata uploads after a failed commit: only the writer
knows which uploads under ``metadata/`` are its own (another engine's commit may be writing
there right now), and a worker that dies mid-commit aborts nothing; a single ``PutObject``
leaves nothing to clean up in either case.
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import Any, Mapping, Optional, Type
from urllib.parse import urlparse

from pyiceberg.io import InputFile, OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO

from .clients import shared_client
from .config import S3Config
from .errors import S3RequestError
from .iceberg_settings import s3_config_of
from .s3 import call

__all__ = ["PutObjectFileIO"]

_S3_SCHEMES = ("s3", "s3a", "s3n")


class PutObjectFileIO(PyArrowFileIO):
    """pyiceberg's ``PyArrowFileIO`` whose ``s3://`` outputs are each one ``PutObject``.

    pyiceberg makes it from the catalog's properties (``py-io-impl``:
    :data:`~.iceberg_settings.PUT_OBJECT_FILE_IO`); the S3 client comes from the same ``s3.*`` properties
    (:func:`s3_config_of`), as ``PyArrowFileIO``'s own filesystem does.
    """

    def __init__(self, properties: Mapping[str, Any] = {}) -> None:  # noqa: B006 - pyiceberg's signature
        super().__init__(properties=dict(properties))
        self._config = s3_config_of(self.properties) or S3Config()

    def new_output(self, location: str) -> OutputFile:  # type: ignore[override]  # not a PyArrowFile for s3://
        """An output for ``location``: one ``PutObject`` on close for ``s3://``, else pyarrow's."""
        parsed = urlparse(location)
        if parsed.scheme not in _S3_SCHEMES:
            return super().new_output(location)
        return _PutObjectFile(location, parsed.netloc, parsed.path.lstrip("/"), self)

    def client(self) -> Any:
        """This process's client for the FileIO's S3 settings (made on first use)."""
        return shared_client(self._config)[0]


class _PutObjectFile(OutputFile):
    """An ``s3://`` object written whole by one ``PutObject``."""

    def __init__(self, location: str, bucket: str, key: str, file_io: PutObjectFileIO) -> None:
        super().__init__(location)
        self._bucket, self._key, self._io = bucket, key, file_io

    def _head(self) -> Optional[dict]:
        try:
            return call(self._io.client(), "HeadObject", self._bucket, self._key)
        except S3RequestError as exc:
            if exc.status == 404 or exc.code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def __len__(self) -> int:
        head = self._head()
        if head is None:
            raise FileNotFoundError(f"Cannot get file info, file not found: {self.location}")
        return int(head["ContentLength"])

    def exists(self) -> bool:
        return self._head() is not None

    def to_input_file(self) -> InputFile:
        return self._io.new_input(self.location)

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return _PutOnClose(self)

    def put(self, body: bytes) -> None:
        call(self._io.client(), "PutObject", self._bucket, self._key, Body=body)


class _PutOnClose(io.BytesIO):
    """Bytes gathered in memory, stored by one ``PutObject`` at ``close()``; nothing is stored
    when the ``with`` block raised."""

    def __init__(self, target: _PutObjectFile) -> None:
        super().__init__()
        self._target: Optional[_PutObjectFile] = target

    def close(self) -> None:
        target, self._target = self._target, None
        if target is not None and not self.closed:
            try:
                target.put(self.getvalue())
            finally:
                super().close()
        else:
            super().close()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is not None:
            self._target = None  # a partial object is never stored
        self.close()
