"""PostgreSQL ``COPY ... TO`` text format (its default): tab-separated, ``\\N`` for NULL.

Each record batch is rendered column by column (:mod:`.postgres_values`), each field escaped by
PostgreSQL's rule (``CopyAttributeOutText``), and the fields joined into lines, all with
Arrow compute kernels; :mod:`.line_encoder` writes the whole lines that fit in the file::

    batch ──▶ render columns ──▶ backslash escapes ──▶ join lines ──▶ LineEncoder ──▶ stream

The escapes: a backslash becomes ``\\\\``; backspace, form feed, LF, CR, tab and vertical tab
become ``\\b`` ``\\f`` ``\\n`` ``\\r`` ``\\t`` ``\\v``; the delimiter (when it is not one of those)
gets a backslash before it. Other characters pass as they are. A NULL is the NULL string,
written as it is.

The options are checked as PostgreSQL's ``ProcessCopyOptions`` checks them, plus the NULL
strings it accepts but cannot load back: see :class:`TextFormat`.
"""

from __future__ import annotations

import re
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
# PostgreSQL refuses these as a text-format delimiter: they mean something after a backslash
# (its list exactly: upper-case letters are accepted).
_BAD_DELIMITERS = "\\.abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class TextFormat(Format):
    """Text files (``.txt``, ``.txt.gz``, ``.txt.zst``) as PostgreSQL's ``COPY ... TO`` writes them
    in its default text format; load them with ``COPY t FROM ...`` and the same options.

    >>> TextFormat().extension, TextFormat(compression="zstd").extension
    ('txt', 'txt.zst')

    Attributes:
      delimiter: one ASCII character between fields (tab by default).
      null: the text of a NULL (``\\N`` by default). No value of the data may be written as
        this text (COPY FROM would read it as NULL): such a value is refused, naming the column.
        The default ``\\N`` is never a written value (a data ``\\N`` is written ``\\\\N``).
      compression: ``None``, ``"gzip"`` or ``"zstd"``: the whole file; ``max_file_size``
        then counts compressed bytes.

    Refused with a ``ValueError`` naming the option, as PostgreSQL refuses them: a delimiter
    that is not one ASCII character (nor NUL), or is CR, LF, a backslash, ``.``, a lower-case
    letter or a digit; a NULL string holding CR, LF or the delimiter. Refused although
    PostgreSQL accepts them, because ``COPY FROM`` cannot read back a NULL written with them:
    a NULL string holding ``\\.`` (the end-of-data marker) or ending in a lone backslash.
    """

    name: ClassVar[str] = "text"

    delimiter: str = "\t"
    null: str = "\\N"
    compression: Optional[str] = None

    def __post_init__(self) -> None:
        d = self.delimiter
        if not isinstance(d, str) or len(d) != 1 or not d.isascii() or d in "\x00\r\n" or d in _BAD_DELIMITERS:
            raise ValueError(
                f"TextFormat: delimiter must be one ASCII character other than NUL, CR, LF, backslash, "
                f"'.', a lower-case letter or a digit (PostgreSQL refuses those in the text format), got {d!r}"
            )
        null = self.null
        if not isinstance(null, str):
            raise ValueError(f"TextFormat: null must be a string, got {null!r}")
        for char, what in ((d, "the delimiter"), ("\r", "CR"), ("\n", "LF")):
            if char in null:
                raise ValueError(
                    f"TextFormat: null {null!r} must not contain {what} {char!r}: PostgreSQL takes a NULL "
                    "string without the delimiter, CR or LF"
                )
        if "\x00" in null:
            raise ValueError(f"TextFormat: null {null!r} must not contain NUL (PostgreSQL cannot take it)")
        # COPY FROM (CopyReadLineText) reads a backslash and the character after it as a pair,
        # and the pair \. as the end of the data: a NULL string ending in a lone backslash or
        # holding the pair \. does not load back.
        if re.fullmatch(r"(?:[^\\]|\\.)*", null, re.DOTALL) is None:
            raise ValueError(
                f"TextFormat: null {null!r} must not end in a lone backslash: COPY FROM would read the "
                "character after it as part of the NULL"
            )
        if re.match(r"(?:[^\\]|\\[^.])*\\\.", null, re.DOTALL):
            raise ValueError(
                f"TextFormat: null {null!r} must not contain \\. (PostgreSQL's end-of-data marker): "
                "COPY FROM would stop at a NULL"
            )
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

    def check_values(self, batch: pa.RecordBatch) -> pa.Array:
        """``batch``'s lines (what refuses a value is rendering it): the encoder writes them."""
        return _TextLines(self, batch.schema)(batch)

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


def value_written_as(text: str, delimiter: str) -> Optional[str]:
    """The value that the text format writes as ``text``, or ``None`` when no value is.

    >>> value_written_as("<null>", "\\t"), value_written_as("\\\\t", "\\t"), value_written_as("\\\\N", "\\t")
    ('<null>', '\\t', None)
    """
    escapes = dict(_CONTROL_ESCAPES)
    escapes.setdefault(delimiter, "\\" + delimiter)
    unescape = {written[1]: char for char, written in escapes.items()}
    unescape["\\"] = "\\"
    value, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 == len(text) or text[i + 1] not in unescape:
                return None
            value.append(unescape[text[i + 1]])
            i += 2
        elif char in escapes:  # always written escaped
            return None
        else:
            value.append(char)
            i += 1
    return "".join(value)


class _TextLines:
    """Renders a batch into text-format lines; the per-column choices are made once per file."""

    def __init__(self, fmt: TextFormat, schema: pa.Schema) -> None:
        self._fmt = fmt
        self._names = schema.names
        self._renderers = [column_renderer(f.type, f.name) for f in schema]
        # COPY FROM compares a field with the NULL string before removing backslashes, so a
        # value written as the NULL string would load as NULL: refused (found by hypothesis).
        # The default \N is no value's text; <null> is the value <null>'s, \t a tab's.
        self._null_value = value_written_as(fmt.null, fmt.delimiter)

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        fmt = self._fmt
        fields = []
        for i, render in enumerate(self._renderers):
            texts = render(batch.column(i))
            if self._null_value is not None and pc.any(pc.equal(texts, self._null_value)).as_py():
                value = self._null_value
                shown = repr(value) if value == fmt.null else f"{value!r}, written {fmt.null!r}"
                raise EncodeError(
                    f"column {self._names[i]!r}: a value is the text {shown}, the NULL string of "
                    f"this text format, which COPY ... FROM would load as NULL; use a NULL string that "
                    f"the data cannot hold, such as the default '\\N'"
                )
            fields.append(pc.fill_null(fmt.escape_fields(texts), fmt.null))
        return join_lines(fields, fmt.delimiter)
