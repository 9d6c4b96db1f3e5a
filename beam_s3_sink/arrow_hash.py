"""A stable 64-bit hash per row of a record batch, computed a column at a time with numpy.

``num_batches`` puts each row in batch ``hash(row) % N``: the same on every worker and run
(never Python's salted ``hash()``), the same for a dict row and the same values in a
``RecordBatch`` (both conformed to the schema first), with no Python per row. Fixed-width
values hash their bytes, floats after -0.0 and NaN are made one, strings and lists by prefix
sums over their bytes or items; columns combine in schema order through splitmix64.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["row_hashes"]

_P = np.uint64(0x100000001B3)  # FNV's 64-bit prime: odd, so invertible modulo 2**64
_P_INVERSE = np.uint64(pow(0x100000001B3, -1, 2**64))
_K = np.uint64(0x9E3779B97F4A7C15)
_NULL = np.uint64(0x5851F42D4C957F2D)
_CHUNK_ROWS = 65536
_U64 = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise."""
    x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def row_hashes(batch: pa.RecordBatch) -> np.ndarray:
    """One ``uint64`` per row, from every column's values in schema order.

    >>> h = row_hashes(pa.record_batch({"id": [1, 2, 1], "s": ["a", "b", "a"]}))
    >>> bool(h[0] == h[2]), bool(h[0] != h[1])
    (True, True)
    """
    with np.errstate(over="ignore"):
        powers = _Powers()
        out = np.zeros(batch.num_rows, dtype=np.uint64)
        for column in batch.columns:
            out = _mix(out * _K + _column_hash(column, powers))
        return out


class _Powers:
    """P**i and P**-i for i up to the longest slice of bytes seen, made once per batch."""

    def __init__(self) -> None:
        self.up = np.ones(1, dtype=np.uint64)
        self.down = np.ones(1, dtype=np.uint64)

    def upto(self, n: int) -> "_Powers":
        if len(self.up) <= n:
            size = max(n + 1, 2 * len(self.up))
            self.up = np.cumprod(
                np.concatenate([np.ones(1, np.uint64), np.full(size - 1, _P, np.uint64)]), dtype=np.uint64
            )
            self.down = np.cumprod(
                np.concatenate([np.ones(1, np.uint64), np.full(size - 1, _P_INVERSE, np.uint64)]), dtype=np.uint64
            )
        return self


def _column_hash(array: pa.Array, powers: _Powers) -> np.ndarray:
    typ = array.type
    t = pa.types
    if isinstance(typ, pa.ExtensionType):
        array = array.storage
        typ = array.type
    if t.is_dictionary(typ):
        array = array.dictionary_decode()
        typ = array.type
    if t.is_string_view(typ) or t.is_binary_view(typ):
        array = array.cast(pa.string() if t.is_string_view(typ) else pa.binary())
        typ = array.type
    if t.is_boolean(typ):
        values = array.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint64)
    elif t.is_floating(typ):
        floats = array.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64) + 0.0
        floats[np.isnan(floats)] = np.nan
        values = floats.view(np.uint64)
    elif t.is_string(typ) or t.is_binary(typ) or t.is_large_string(typ) or t.is_large_binary(typ):
        values = _bytes_hash(array, powers)
    elif t.is_null(typ):
        return np.full(len(array), _NULL, dtype=np.uint64)
    elif _fixed_width(typ):
        values = _fixed_hash(array)
    elif t.is_struct(typ):
        values = np.full(len(array), np.uint64(typ.num_fields), dtype=np.uint64)
        for field in array.flatten():  # flatten() takes the slice's offset into account
            values = _mix(values * _K + _column_hash(field, powers))
    elif t.is_list(typ) or t.is_large_list(typ) or t.is_map(typ):
        values = _list_hash(array, powers)
    elif t.is_fixed_size_list(typ) or t.is_list_view(typ) or t.is_large_list_view(typ):
        large = t.is_large_list_view(typ)
        values = _list_hash(array.cast(pa.large_list(typ.value_type) if large else pa.list_(typ.value_type)), powers)
    else:
        values = _repr_hash(array, powers)
    values = _mix(values)
    if array.null_count:
        values[array.is_null().to_numpy(zero_copy_only=False)] = _NULL
    return values


def _fixed_width(typ: pa.DataType) -> bool:
    if typ.num_fields:
        return False
    try:
        return typ.bit_width % 8 == 0 and typ.bit_width > 0
    except ValueError:  # not a fixed-width type
        return False


def _fixed_hash(array: pa.Array) -> np.ndarray:
    width = array.type.byte_width
    raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)[array.offset * width : (array.offset + len(array)) * width]
    if width in _U64:
        return raw.view(_U64[width]).astype(np.uint64)
    padded = np.zeros((len(array), (width + 7) // 8 * 8), dtype=np.uint8)
    padded[:, :width] = raw.reshape(len(array), width)
    lanes = padded.view(np.uint64)
    out = np.zeros(len(array), dtype=np.uint64)
    for lane in range(lanes.shape[1]):
        out = _mix(out * _K + lanes[:, lane])
    return out


def _bytes_hash(array: pa.Array, powers: _Powers) -> np.ndarray:
    out = np.empty(len(array), dtype=np.uint64)
    for start in range(0, len(array), _CHUNK_ROWS):
        out[start : start + _CHUNK_ROWS] = _bytes_chunk(array.slice(start, _CHUNK_ROWS), powers)
    return out


def _bytes_chunk(array: pa.Array, powers: _Powers) -> np.ndarray:
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    width = np.int64 if large else np.int32
    offsets = np.frombuffer(array.buffers()[1], dtype=width)[array.offset : array.offset + len(array) + 1]
    offsets = offsets.astype(np.int64)
    low, high = int(offsets[0]), int(offsets[-1])
    data = array.buffers()[2]
    raw = (
        np.frombuffer(data, dtype=np.uint8)[low:high]
        if data is not None and high > low
        else np.zeros(0, dtype=np.uint8)
    ).astype(np.uint64)
    return _sequence_hash(raw, offsets - low, powers)


def _sequence_hash(items: np.ndarray, relative: np.ndarray, powers: _Powers) -> np.ndarray:
    """Per slice ``items[relative[i]:relative[i + 1]]``: Σ item·P^(j - start), then its length."""
    n = len(items)
    table = powers.upto(n)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(items * table.up[1 : n + 1], dtype=np.uint64, out=prefix[1:])
    sums = (prefix[relative[1:]] - prefix[relative[:-1]]) * table.down[relative[:-1]]
    lengths = np.diff(relative).astype(np.uint64)
    return sums * _K + lengths


def _list_hash(array: pa.Array, powers: _Powers) -> np.ndarray:
    """Lists and maps (a map is a list of key/value structs): the items' hashes as a sequence."""
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    low, high = int(offsets[0]), int(offsets[-1])
    items = _column_hash(array.values.slice(low, high - low), powers)  # .values ignores the slice
    return _sequence_hash(items, offsets - low, powers)


def _repr_hash(array: pa.Array, powers: _Powers) -> np.ndarray:
    """Types with no column-wise rule (unions, run-end encoded...): each value's Python repr."""
    texts = [None if v is None else repr(v).encode() for v in array.to_pylist()]
    return _bytes_hash(pa.array(texts, pa.binary()), powers)
