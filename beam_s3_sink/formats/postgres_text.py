"""PostgreSQL ``COPY ... TO`` text format (its default): tab-separated, ``\\N`` for NULL.

Each record batch is rendered column by column (:mod:`.postgres_values`), each field escaped by
PostgreSQL's rule (``CopyAttributeOutText``), and the fields joined into lines, all with
Arrow compute kernels; :mod:`.line_encoder` writes the whole lines that fit in the file::

    batch ──▶ render columns ──▶ backslash escapes ──▶ join lines ──▶ LineEncoder ──▶ stream

The escapes: a backslash becomes ``\\\\``; backspace, form feed, LF, CR, tab and vertical tab
become ``\\b`` ``\\f`` ``\\n`` ``\\r`` ``\\t`` ``\\v``; the delimiter (when it is not one of those)
gets a backslash before it. Other characters pass as they are. A NULL is the NULL string,
written as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EncodeError
from .base import FileEncoder, Format, OutputStream
from .line_encoder import LineEncoder, check_compression, compressed_content_type, compressed_extension, join_lines
from .postgres_values import check_type, column_renderer

__all__ = ["TextFormat"]

_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
# PostgreSQL refuses these as a text-format delimiter: they mean something after a backslash.
_BAD_DELIMITERS = "\\.abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class TextFormat(Format):
    """Text files (``.txt``, ``.txt.gz``, ``.txt.zst``) as PostgreSQL's ``COPY ... TO`` writes them
    in its default text format; load them with ``COPY t FROM ...`` and the same options.

    >>> TextFormat().extension, TextFormat(compression="zstd").extension
    ('txt', 'txt.zst')

    Attributes:
      delimiter: one ASCII character between fields (tab by default).
      null: the text of a NULL (``\\N`` by default). One without a backslash must not be a
        value of the data (COPY FROM would read it as NULL): such a value is refused.
      compression: ``None``, ``"gzip"`` or ``"zstd"``: the whole file; ``max_file_size``
        then counts compressed bytes.
    """

    name: ClassVar[str] = "text"

    delimiter: str = "\t"
    null: str = "\\N"
    compression: Optional[str] = None

    def __post_init__(self) -> None:
        d = self.delimiter
        if not isinstance(d, str) or len(d) != 1 or not d.isascii() or d in "\r\n" or d.lower() in _BAD_DELIMITERS:
            raise ValueError(
                f"TextFormat: delimiter must be one ASCII character other than CR, LF, backslash, "
                f"'.', a letter or a digit, got {d!r}"
            )
        if not isinstance(self.null, str) or any(c in self.null for c in (d, "\r", "\n")):
            raise ValueError(f"TextFormat: null {self.null!r} must be a string without the delimiter, CR or LF")
        check_compression("TextFormat", self.compression)

    @property
    def extension(self) -> str:
        return compressed_extension("txt", self.compression)

    @property
    def content_type(self) -> str:
        return compressed_content_type("text/plain", self.compression)

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            check_type(field)

    def open(self, schema: pa.Schema, out: OutputStream, max_file_size: int) -> FileEncoder:
        return LineEncoder(out, max_file_size, _TextLines(self, schema), self.compression)

    def escape_fields(self, texts: pa.Array) -> pa.Array:
        """Backslash-escape rendered values (NULL stays NULL) as ``CopyAttributeOutText`` does."""
        escapes = dict(_CONTROL_ESCAPES)
        escapes.setdefault(self.delimiter, "\\" + self.delimiter)
        specials = "[" + "".join("\\\\" if c == "\\" else f"\\x{ord(c):02x}" for c in ["\\", *escapes]) + "]"
        if not pc.any(pc.match_substring_regex(texts, specials)).as_py():
            return texts
        texts = pc.replace_substring(texts, "\\", "\\\\")  # first: later escapes add backslashes
        for char, escaped in escapes.items():
            texts = pc.replace_substring(texts, char, escaped)
        return texts


class _TextLines:
    """Renders a batch into text-format lines; the per-column choices are made once per file."""

    def __init__(self, fmt: TextFormat, schema: pa.Schema) -> None:
        self._fmt = fmt
        self._names = schema.names
        self._renderers = [column_renderer(f.type, f.name) for f in schema]
        # COPY FROM compares a field with the NULL string before removing backslashes, so a
        # NULL string with a backslash (the default \N) never matches an escaped value; one
        # without can, and that value would load as NULL: refused (found by hypothesis).
        self._ambiguous_null = "\\" not in fmt.null

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        fmt = self._fmt
        fields = []
        for i, render in enumerate(self._renderers):
            escaped = fmt.escape_fields(render(batch.column(i)))
            if self._ambiguous_null and pc.any(pc.equal(escaped, fmt.null)).as_py():
                raise EncodeError(
                    f"column {self._names[i]!r}: a value is the text {fmt.null!r}, the NULL string of "
                    f"this text format, which COPY ... FROM would load as NULL; use a NULL string that "
                    f"the data cannot hold, such as the default '\\N'"
                )
            fields.append(pc.fill_null(escaped, fmt.null))
        return join_lines(fields, fmt.delimiter)
