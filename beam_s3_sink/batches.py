"""Elements become Arrow record batches here, and only here; the ``Batch`` half of the upload step.

:class:`Batcher` turns rows (dicts, ``beam.Row``, NamedTuples: :func:`~.schema.rows_to_batch`)
and Arrow elements (conformed: :mod:`.arrow_input`) into record batches of the copy's schema
of about ``BATCH_BYTES``. :class:`_BatchFn` (no side input, no S3, so runners fuse it with
whatever makes the rows) packs them into keyed Arrow IPC blobs for ``Write``: one blob per
batch (:class:`Batches`, no copy) when the two steps are fused, blobs of about ``BLOB_BYTES`` (ZSTD) keyed by writer group
or by ``num_batches`` batch number before a ``GroupByKey``. An element that does not fit travels as an
error blob carrying its message, and the writer that receives it fails the copy with it; with
``max_bad_rows`` (:mod:`.bad_rows`) the bad rows found travel instead as a dead-letter blob
(their JSON), which the writer counts in its report.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from .arrow_hash import row_hashes
from .arrow_input import ARROW_TYPES, conform, conform_batches
from .bad_rows import (
    NO_BAD_ROWS,
    BadRow,
    BadRowLimit,
    TooManyBadRows,
    bisect,
    column_of_arrow,
    column_of_row,
    element_json,
)
from .clients import NAMESPACE
from .errors import CopyToS3Error
from .keys import new_token
from .schema import as_mapping, rows_to_batch

__all__ = [
    "Batcher",
    "BlobError",
    "encode_blob",
    "decode_blob",
    "encode_dead_letters",
    "dead_letters_of",
    "split_by_batch_number",
    "takes_batches",
]

BATCH_BYTES = 4 * 2**20
"""Arrow bytes of a batch made from rows, about (its rows: ``BATCH_BYTES`` / bytes per row)."""
MAX_BATCH_ROWS = 16384
BLOB_BYTES = 8 * 2**20
"""Before a ``GroupByKey``: Arrow bytes a ``_BatchFn`` holds before it sends them as blobs."""
GROUP_BYTES = 64 * 2**20
"""Without ``num_batches``: Arrow bytes under one key, about (what one ``Write`` call receives)."""
HANDLED = (CopyToS3Error, pa.ArrowException)
"""What fails a copy rather than its bundle: an element or a value that does not fit, a value
a format cannot encode, a refused request. Anything else is a bug, left to fail the bundle
(which the runner retries)."""
_ARROW, _ERROR, _BAD = b"A", b"E", b"B"
Key = Union[str, int]


class BlobError(CopyToS3Error):
    """What an error blob carries: why the elements before the ``GroupByKey`` did not fit."""


class Batcher:
    """Turns elements into record batches of ``schema``.

    >>> batcher = Batcher(pa.schema([("id", pa.int64())]))
    >>> batcher.add({"id": 1}), batcher.add(pa.table({"id": [2, 3]}))[-1].num_rows
    ([], 2)
    >>> [b.num_rows for b in batcher.flush()]
    []

    :meth:`add` raises :class:`~.errors.RowError` or :class:`~.errors.BatchError` (naming the
    column, the value or both types) for an element that does not fit; with a ``limit`` that
    lets bad rows through (``max_bad_rows``), a batch that does not convert is split
    (:func:`~.bad_rows.bisect`) and its bad rows kept in :attr:`bad` instead, until more than
    the limit's count are found (then it raises):

    >>> batcher = Batcher(pa.schema([("id", pa.int64())]), limit=BadRowLimit(5))
    >>> [b.num_rows for b in batcher.add(pa.table({"id": [1, 2]}))], batcher.add({"id": "x"})
    ([2], [])
    >>> [b.num_rows for b in batcher.flush()], [(b.element, b.column) for b in batcher.take_bad()]
    ([], [('{"id": "x"}', 'id')])
    """

    def __init__(self, schema: pa.Schema, batch_bytes: int = BATCH_BYTES, limit: BadRowLimit = NO_BAD_ROWS) -> None:
        self.schema = schema
        self._batch_bytes = batch_bytes
        self._rows: List[Any] = []
        self._batch_rows = 1024  # rows per batch, from the last batch's bytes per row
        self._limit = limit
        self.bad: List[BadRow] = []  # found since the last take_bad()
        self.bad_count = 0  # found in all

    def add(self, element: Any) -> List[pa.RecordBatch]:
        """The batches complete once ``element`` is taken (rows before an Arrow element first)."""
        rows = self._rows
        if type(element) is dict:  # the common case, kept lean: this runs once per row
            rows.append(element)
            return self._convert() if len(rows) >= self._batch_rows else []
        if isinstance(element, ARROW_TYPES):
            return self._convert() + self._conform(element)
        rows.append(as_mapping(element))
        return self._convert() if len(rows) >= self._batch_rows else []

    def flush(self) -> List[pa.RecordBatch]:
        """The rows held, as a batch (none if none are held)."""
        return self._convert()

    def take_bad(self) -> List[BadRow]:
        """The bad rows found since the last call (without sink id and unit: completion adds them)."""
        bad, self.bad = self.bad, []
        return bad

    def _convert(self) -> List[pa.RecordBatch]:
        rows, self._rows = self._rows, []
        if not rows:
            return []
        try:
            batch = rows_to_batch(rows, self.schema)
        except HANDLED as exc:
            if not self._limit.enabled:
                raise
            return self._split(rows, len(rows), lambda part: [rows_to_batch(part, self.schema)], _rows_slice, exc)
        per_row = max(1, batch.nbytes // batch.num_rows)
        self._batch_rows = max(1, min(MAX_BATCH_ROWS, self._batch_bytes // per_row))
        return [batch]

    def _conform(self, data: Any) -> List[pa.RecordBatch]:
        try:
            return conform_batches(data, self.schema)
        except HANDLED as exc:
            if not self._limit.enabled:
                raise
            pieces = data.to_batches() if isinstance(data, pa.Table) else [data]
            first: Optional[BaseException] = exc if len(pieces) == 1 else None
            return [
                batch
                for piece in pieces
                for batch in self._split(piece, piece.num_rows, self._conform_piece, _arrow_slice, first)
            ]

    def _conform_piece(self, piece: pa.RecordBatch) -> List[pa.RecordBatch]:
        return conform_batches(piece, self.schema)

    def _split(self, items: Any, size: int, convert: Any, split: Any, first: Optional[BaseException]) -> List[Any]:
        """The batches of the good rows of ``items``; the bad ones become dead letters."""
        bound = self._limit.local_bound()
        left = None if bound is None else bound - self.bad_count
        try:
            good, bad = bisect(items, size, convert, split, HANDLED, left, first)
        except TooManyBadRows as exc:
            reason = str(exc.bad[0][1])
            raise CopyToS3Error(
                f"more than max_bad_rows={self._limit} bad rows in one bundle; the first: {reason}"
            ) from exc.bad[0][1]
        for index, error in bad:
            self.bad.append(self._dead_letter(split(items, index, index + 1), error))
        self.bad_count += len(bad)
        return [batch for batches in good for batch in batches]

    def _dead_letter(self, item: Any, error: BaseException) -> BadRow:
        if isinstance(item, pa.RecordBatch):
            row = item.to_pylist()[0]
            column = column_of_arrow(item, self.schema, conform)
        else:
            row = item[0]
            column = column_of_row(row, self.schema, rows_to_batch)
        return BadRow(element_json(row), column, str(error), "", None)


def _rows_slice(rows: Sequence[Any], start: int, stop: int) -> Sequence[Any]:
    return rows[start:stop]


def _arrow_slice(batch: pa.RecordBatch, start: int, stop: int) -> pa.RecordBatch:
    return batch.slice(start, stop - start)


def encode_blob(batches: List[pa.RecordBatch], schema: pa.Schema, compression: Optional[str] = "zstd") -> bytes:
    """Batches as one Arrow IPC stream, after a tag byte.

    >>> schema = pa.schema([("id", pa.int64())])
    >>> [b.num_rows for b in decode_blob(encode_blob([pa.record_batch([[1, 2]], schema=schema)], schema))]
    [2]
    """
    sink = pa.BufferOutputStream()
    sink.write(_ARROW)
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as out:
        for batch in batches:
            out.write_batch(batch)
    return sink.getvalue().to_pybytes()


def encode_dead_letters(bad: Sequence[BadRow]) -> bytes:
    """Dead letters (element, column, reason) as one blob for ``Write``.

    >>> dead_letters_of(encode_dead_letters([BadRow("{}", "id", "no", "", None)]))
    (BadRow(element='{}', column='id', reason='no', sink_id='', unit=None),)
    """
    return _BAD + json.dumps([[b.element, b.column, b.reason] for b in bad]).encode("utf-8")


def dead_letters_of(blob: Union[bytes, "Batches"]) -> Optional[Tuple[BadRow, ...]]:
    """The dead letters a blob (or :class:`Batches`) carries, or None if it carries rows or an error."""
    if isinstance(blob, Batches):
        return blob.bad or None
    if blob[:1] != _BAD:
        return None
    return tuple(BadRow(element, column, reason, "", None) for element, column, reason in json.loads(blob[1:]))


class Batches:
    """Record batches handed from ``Batch`` to ``Write`` in one process (fused: no copy), or the
    error that stopped them, or dead letters; its coder weighs it by ``nbytes``, encoding
    nothing, when Beam samples element sizes, and encodes it as a blob only if a runner ever
    separates the steps."""

    __slots__ = ("batches", "error", "bad")

    def __init__(
        self, batches: Sequence[pa.RecordBatch] = (), error: Optional[str] = None, bad: Sequence[BadRow] = ()
    ) -> None:
        self.batches, self.error, self.bad = tuple(batches), error, tuple(bad)


class BatchesCoder(beam.coders.Coder):
    """The coder of :class:`Batches` (see there).

    >>> coder, batch = BatchesCoder(), pa.record_batch({"id": [1, 2]})
    >>> [b.num_rows for b in coder.decode(coder.encode(Batches([batch]))).batches], coder.estimate_size(Batches([batch]))
    ([2], 16)
    """

    def encode(self, value: Batches) -> bytes:
        if value.error is not None:
            return _ERROR + value.error.encode()
        if value.bad:
            return encode_dead_letters(value.bad)
        return encode_blob(list(value.batches), value.batches[0].schema, None) if value.batches else b""

    def decode(self, encoded: bytes) -> Batches:
        bad = dead_letters_of(encoded) if encoded else None
        if bad is not None:
            return Batches(bad=bad)
        try:
            return Batches(list(decode_blob(encoded)) if encoded else ())
        except BlobError as exc:
            return Batches(error=str(exc))

    def estimate_size(self, value: Batches) -> int:
        return sum(b.nbytes for b in value.batches)

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return Batches


beam.coders.registry.register_coder(Batches, BatchesCoder)


def decode_blob(blob: Union[bytes, Batches]) -> Iterator[pa.RecordBatch]:
    """The record batches of a blob (or of :class:`Batches`); an error raises its :class:`BlobError`."""
    if isinstance(blob, Batches):
        if blob.error is not None:
            raise BlobError(blob.error)
        yield from blob.batches
        return
    if blob[:1] == _ERROR:
        raise BlobError(blob[1:].decode())
    with pa.ipc.open_stream(pa.py_buffer(memoryview(blob)[1:])) as reader:
        yield from reader


def split_by_batch_number(batch: pa.RecordBatch, num_batches: int) -> List[Tuple[int, pa.RecordBatch]]:
    """(batch number, rows) for each ``num_batches`` batch the rows of ``batch`` hash to: a stable
    64-bit hash of each row's values (:mod:`.arrow_hash`) modulo ``num_batches``, the same on
    every worker and every run, so a rerun of the same data writes the same keys.

    >>> [(n, b.num_rows) for n, b in split_by_batch_number(pa.record_batch({"id": [1, 1, 2]}), 4)]
    [(0, 1), (1, 2)]
    """
    numbers = (row_hashes(batch) % np.uint64(num_batches)).astype(np.int64)
    return [(int(numbers[first]), rows) for first, rows in split_runs(batch, numbers)]


def split_runs(batch: pa.RecordBatch, codes: np.ndarray) -> List[Tuple[int, pa.RecordBatch]]:
    """(index of its first row, rows) per distinct value of ``codes``, in the order of the
    values: one stable argsort and one ``take`` (no copy when every row has one value)."""
    if len(codes) == 0 or (codes == codes[0]).all():
        return [(0, batch)]
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    bounds = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), batch.num_rows]
    taken = batch.take(pa.array(order))
    return [(int(order[a]), taken.slice(a, b - a)) for a, b in zip(bounds, bounds[1:])]


def takes_batches(element_type: Any) -> bool:
    """True when Beam hands ``element_type``'s elements over as ``pyarrow.Table`` batches (the
    output of a batched ``DoFn``, see ``apache_beam.typehints.arrow_type_compatibility``)."""
    from apache_beam.typehints.batch import BatchConverter
    from apache_beam.typehints.native_type_compatibility import convert_to_beam_type

    try:
        BatchConverter.from_typehints(element_type=convert_to_beam_type(element_type), batch_type=pa.Table)
    except (TypeError, ValueError, NotImplementedError, KeyError):  # no converter for this type: rows only
        return False
    return True


class _BatchFn(beam.DoFn):
    """Elements in, ``(key, blob)`` out; see the module docstring.

    ``grouped=False``: every batch is sent at once, as :class:`Batches` (``Write`` is fused
    with this step and writes per bundle). ``grouped=True``: batches are held up to
    ``blob_bytes`` and sent as ZSTD blobs keyed ``"<instance token>-<group>"`` (a new group
    every ``group_bytes``), or by batch number with ``num_batches``.
    """

    def __init__(
        self,
        schema: pa.Schema,
        grouped: bool,
        num_batches: Optional[int] = None,
        blob_bytes: int = BLOB_BYTES,
        group_bytes: int = GROUP_BYTES,
        limit: BadRowLimit = NO_BAD_ROWS,
    ) -> None:
        self._schema = schema
        self._limit = limit
        self._grouped = grouped
        self._num_batches = num_batches
        self._blob_bytes = blob_bytes if grouped else 0
        self._group_bytes = group_bytes

    def setup(self) -> None:
        self._instance = new_token()
        self._group = 0
        self._in_group = 0  # Arrow bytes sent under the current group's key

    def start_bundle(self) -> None:
        self._batcher = Batcher(self._schema, limit=self._limit)
        self._held: Dict[Key, List[pa.RecordBatch]] = {}
        self._held_bytes = 0
        self._failed = False

    def process(self, element: Any) -> Iterable[Any]:
        if self._failed:  # the copy fails: the rest of the bundle is not worth converting
            return ()
        try:
            batches = self._batcher.add(element)
        except HANDLED as exc:
            return self._refuse(exc)
        out = self._route(batches) if batches else []
        return out + self._dead_letters() if self._batcher.bad else out

    def finish_bundle(self) -> Iterable[WindowedValue]:
        out: List[Any] = []
        if not self._failed:
            try:
                out = self._route(self._batcher.flush(), flush=True) + self._dead_letters()
            except HANDLED as exc:
                out = self._refuse(exc)
        for pair in out:
            yield WindowedValue(pair, GlobalWindow().max_timestamp(), [GlobalWindow()])

    def _route(self, batches: List[pa.RecordBatch], flush: bool = False) -> List[Any]:
        if not self._grouped:
            return [Batches(batches)] if batches else []
        for batch in batches:
            pieces = split_by_batch_number(batch, self._num_batches) if self._num_batches else [("", batch)]
            for key, piece in pieces:
                self._held.setdefault(key, []).append(piece)
            self._held_bytes += batch.nbytes
        if self._held_bytes < self._blob_bytes and not flush:
            return []
        held, self._held, size, self._held_bytes = self._held, {}, self._held_bytes, 0
        return [(self._key(key, size), encode_blob(batches, self._schema)) for key, batches in held.items()]

    def _key(self, number: Key, size: int) -> Key:
        if self._num_batches:
            return number
        if self._in_group and self._in_group + size > self._group_bytes:
            self._group, self._in_group = self._group + 1, 0
        self._in_group += size
        return f"{self._instance}-{self._group:06d}"

    def _dead_letters(self) -> List[Any]:
        """The bad rows found since the last call, as one element for ``Write`` (the key of the
        next blob, batch 0 with ``num_batches``)."""
        bad = self._batcher.take_bad()
        if not bad:
            return []
        if not self._grouped:
            return [Batches(bad=bad)]
        key: Key = 0 if self._num_batches else self._key("", 0)
        return [(key, encode_dead_letters(bad))]

    def _refuse(self, exc: BaseException) -> List[Any]:
        """An error blob under the key of the next blob (batch 0 with ``num_batches``)."""
        self._failed = True
        if not self._grouped:
            return [Batches(error=str(exc))]
        key: Key = 0 if self._num_batches else self._key("", 0)
        return [(key, _ERROR + str(exc).encode())]


class _ArrowBatchFn(_BatchFn):
    """:class:`_BatchFn` that also takes a batched ``DoFn``'s ``pa.Table`` batches as they are
    (Beam would otherwise explode them into Python rows)."""

    def get_input_batch_type(self, input_element_type: Any) -> Any:
        return pa.Table

    @beam.DoFn.yields_elements
    def process_batch(self, batch: pa.Table) -> Iterable[Any]:
        return self.process(batch)


class _StreamBatchFn(_BatchFn):
    """:class:`_BatchFn` for a stream (grouped): rows are held per window, and each window's
    blobs go out in that window, to the ``GroupByKey`` where its trigger fires. A row that does
    not fit fails its window's unit only."""

    _STATE = ("_batcher", "_held", "_held_bytes", "_failed")

    def setup(self) -> None:
        super().setup()
        self._received_counter = Metrics.counter(NAMESPACE, "rows_received")  # minus "rows": not committed

    def start_bundle(self) -> None:
        self._windows: Dict[Any, Tuple[Any, ...]] = {}
        self._window: Any = None  # the window whose state is in the attributes (most rows: the last one's)
        self._received = 0

    def process(self, element: Any, window: Any = beam.DoFn.WindowParam) -> Iterable[Any]:
        self._received += element.num_rows if isinstance(element, ARROW_TYPES) else 1
        if window != self._window:
            self._enter(window)
        return super().process(element)

    def finish_bundle(self) -> Iterable[WindowedValue]:
        self._received_counter.inc(self._received)
        if self._window is not None:
            self._windows[self._window] = tuple(getattr(self, name) for name in self._STATE)
        for window in list(self._windows):
            self._enter(window)
            for blob in super().finish_bundle():
                yield WindowedValue(blob.value, window.max_timestamp(), [window])
        self._windows, self._window = {}, None

    def _enter(self, window: Any) -> None:
        """Keep the current window's state, and make ``window``'s current."""
        if self._window is not None:
            self._windows[self._window] = tuple(getattr(self, name) for name in self._STATE)
        if window in self._windows:
            for name, value in zip(self._STATE, self._windows[window]):
                setattr(self, name, value)
        else:
            super().start_bundle()
        self._window = window
