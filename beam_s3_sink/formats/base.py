"""The interface every output format implements; a format owns every fact about itself.

A format is a frozen, picklable value (its options). On a worker it opens a
:class:`FileEncoder` per data file; the upload step feeds the encoder Arrow record batches
and watches ``full`` to start the next file::

    rows ──▶ RecordBatch ──▶ encoder.write(batch) ──▶ stream (MultipartStream)
                                 │ returns the rows that did not fit, if any
                                 └─ encoder.full ──▶ close() ──▶ next file

Nothing outside ``beam_s3_sink.formats`` looks at which format a copy uses: the keys take the
format's :attr:`~Format.extension`, the objects its :attr:`~Format.content_type`, the manifest
its :meth:`~Format.describe` and :meth:`~Format.file_schema`, and the ``num_batches`` batch number
hash (:mod:`beam_s3_sink.arrow_hash`) depends on Arrow types alone. So adding a format is one
module and one test file (and its name in ``formats/__init__.py``). The module defines:

* a frozen dataclass subclassing :class:`Format`, with ``name`` (what ``format="..."``
  takes) and its options, checked in ``__post_init__``, and

  1. :attr:`~Format.extension` — the data files' extension (``csv.gz``);
  2. :attr:`~Format.content_type` — their ``Content-Type`` (``text/csv``);
  3. :meth:`~Format.check_schema` — reject, when the pipeline is built, a schema it cannot write;
  4. :meth:`~Format.open` — start one data file, returning a :class:`FileEncoder`;

  (:meth:`~Format.file_schema` and :meth:`~Format.describe` have defaults);
* a :class:`FileEncoder` subclass with :meth:`~FileEncoder.write`, :attr:`~FileEncoder.full`
  and :meth:`~FileEncoder.close` (and :meth:`~FileEncoder.stats`, which may stay empty).
  Line formats reuse :class:`~beam_s3_sink.formats.line_encoder.LineEncoder` and only turn a
  record batch into lines (their :meth:`~Format.check_values` returns those lines, which the
  encoder then writes as they are). A value it cannot encode raises
  :class:`~beam_s3_sink.errors.EncodeError` naming the column (or ``pyarrow.ArrowException``).

>>> import pyarrow as pa
>>> from beam_s3_sink.formats import resolve_format
>>> fmt = resolve_format("jsonl")
>>> fmt.extension, fmt.content_type
('jsonl', 'application/jsonl')
"""

from __future__ import annotations

import abc
import io
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Optional, Protocol, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EncodeError

if TYPE_CHECKING:
    from .stats import ColumnStats

__all__ = ["Format", "FileEncoder", "OutputStream", "KeepOpen", "ENCODE_ERRORS", "uuid_text"]

ENCODE_ERRORS = (EncodeError, pa.ArrowException)
"""What an encoder raises for a value it cannot write: its own :class:`EncodeError` (naming
the column), or pyarrow's error from a kernel or the Parquet writer. Anything else is a bug,
and is left to fail the bundle."""


class OutputStream(Protocol):
    """Where an encoder writes a data file: a ``MultipartStream``, or ``io.BytesIO`` in tests.

    pyarrow's writers take any such file object; ``tell`` is how the encoders measure a file.
    """

    def write(self, data: Any) -> int: ...

    def tell(self) -> int: ...

    def flush(self) -> None: ...


class KeepOpen(io.RawIOBase):
    """Passes writes to ``out`` but never closes it: pyarrow closes what it wraps, and the
    caller still needs the stream (``MultipartStream.finish``, ``BytesIO.getvalue``)."""

    def __init__(self, out: OutputStream) -> None:
        super().__init__()
        self._out = out

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._out.write(data)
        return memoryview(data).nbytes

    def tell(self) -> int:
        return self._out.tell()

    def close(self) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_text(array: pa.Array) -> pa.Array:
    """UUIDs (16 bytes each, or ``pa.uuid()``) as their 36-character text, a whole array at a time.

    >>> import uuid
    >>> uuid_text(pa.array([uuid.UUID(int=1).bytes, None], pa.uuid())).to_pylist()
    ['00000000-0000-0000-0000-000000000001', None]
    """
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    count = len(storage)
    data = np.frombuffer(storage.buffers()[1], dtype=np.uint8)
    raw = data[storage.offset * 16 : (storage.offset + count) * 16].reshape(count, 16)
    digits = np.empty((count, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 15]
    text = np.full((count, 36), ord("-"), dtype=np.uint8)
    text[:, np.r_[0:8, 9:13, 14:18, 19:23, 24:36]] = digits
    offsets = pa.array(np.arange(0, 36 * (count + 1), 36, dtype=np.int32))
    values = pa.StringArray.from_buffers(count, offsets.buffers()[1], pa.py_buffer(text.tobytes()))
    return values if storage.null_count == 0 else pc.if_else(storage.is_valid(), values, pa.scalar(None, pa.string()))


class FileEncoder(abc.ABC):
    """Encodes record batches into one data file. Made by :meth:`Format.open`."""

    def __init__(self, out: OutputStream, max_file_size: int) -> None:
        self.out = out
        self.max_file_size = max_file_size
        self.rows = 0

    @abc.abstractmethod
    def write(self, batch: pa.RecordBatch, checked: Optional[pa.Array] = None) -> Optional[pa.RecordBatch]:
        """Encode ``batch``; return the rows that did not fit in this file, the last rows of
        ``batch`` (None if all did).

        An encoder always takes at least one row into an empty file, so that a row larger
        than the file-size limit still gets a file of its own. ``checked``: what
        :meth:`Format.check_values` returned for ``batch`` (a line format's lines), written
        instead of being made again; an encoder whose format returns None ignores it.
        """

    @property
    @abc.abstractmethod
    def full(self) -> bool:
        """True once the file has reached its size: the caller closes it and opens the next."""

    @abc.abstractmethod
    def close(self) -> None:
        """Write what is buffered and the file's trailer (Parquet footer, compressor end)."""

    def stats(self) -> Tuple["ColumnStats", ...]:
        """After :meth:`close`: per column, the null count and min/max of the file (:mod:`..stats`)."""
        return ()


class Format(abc.ABC):
    """Options of one output format; frozen and picklable. Subclasses are dataclasses."""

    name: ClassVar[str]

    @property
    @abc.abstractmethod
    def extension(self) -> str:
        """The data files' extension, without the dot: ``parquet``, ``csv.gz``..."""

    @property
    @abc.abstractmethod
    def content_type(self) -> str:
        """The data files' ``Content-Type``: ``application/vnd.apache.parquet``, ``text/csv``,
        ``application/gzip`` for a gzipped CSV... (``ObjectSettings.content_type`` overrides it)."""

    def check_schema(self, schema: pa.Schema) -> None:  # noqa: B027 - a hook: by default every schema is accepted
        """Raise ``ValueError`` (at pipeline construction) for a schema this format cannot write."""

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema the data files hold for rows of ``schema`` (the manifest records it)."""
        return schema

    @abc.abstractmethod
    def open(self, schema: pa.Schema, out: OutputStream, max_file_size: int) -> FileEncoder:
        """Start one data file written to ``out``."""

    def check_values(self, batch: pa.RecordBatch) -> Optional[pa.Array]:
        """Raise one of ``ENCODE_ERRORS`` if this format cannot write a value of ``batch`` (rows
        of the schema files are opened with); ``max_bad_rows`` screens batches with it.

        Returns None, or one item per row that an encoder of this format writes as it is
        (``FileEncoder.write``'s ``checked``): the line formats return their lines, so that
        a screened batch is rendered once. By default ``batch`` is encoded into memory that
        is dropped; a format that knows where its refusals come from checks only that
        (Parquet: the columns it converts)."""
        encoder = self.open(batch.schema, io.BytesIO(), 2**62)
        encoder.write(batch)
        encoder.close()
        return None

    def describe(self) -> Dict[str, Any]:
        """The format and its options, for the manifest."""
        import dataclasses

        options: Dict[str, Any] = dataclasses.asdict(self) if dataclasses.is_dataclass(self) else {}
        return {"name": self.name, "extension": self.extension, "options": options}
