"""PostgreSQL ``COPY ... TO ... (FORMAT csv)`` output.

Each record batch is rendered column by column (:mod:`.postgres_values`), each field quoted by
PostgreSQL's rule (``CopyAttributeOutCSV``), and the fields joined into lines, all with
Arrow compute kernels; :mod:`.line_encoder` writes the whole lines that fit in the file::

    batch ──▶ render columns ──▶ quote fields ──▶ join lines ──▶ LineEncoder ──▶ stream

PostgreSQL quotes a field when it is forced to (``force_quote``, never for NULLs), equals the
NULL string, contains the delimiter, the quote character, CR or LF, or is the end-of-data
marker ``\\.`` as the only column of a line; inside a quoted field the quote and the escape
character are preceded by the escape character. A NULL is the NULL string, unquoted. The
header line holds the column names, quoted by the same rule but never forced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, List, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from .base import FileEncoder, Format, OutputStream
from .line_encoder import LineEncoder, check_compression, compressed_content_type, compressed_extension, join_lines
from .postgres_values import check_type, column_renderer

__all__ = ["CsvFormat"]


@dataclass(frozen=True)
class CsvFormat(Format):
    """CSV files (``.csv``, ``.csv.gz``, ``.csv.zst``) as PostgreSQL's ``COPY ... (FORMAT csv)``
    writes them; load them with the same options: ``COPY t FROM ... (FORMAT csv, HEADER)``.

    >>> CsvFormat(header=True, compression="gzip").extension
    'csv.gz'
    >>> CsvFormat().content_type
    'text/csv'

    Attributes:
      header: write the column names as the first line of every file.
      delimiter: one ASCII character between fields.
      null: the text of a NULL (an unquoted empty field by default).
      quote: the quoting character (ASCII).
      escape: the character before a quote or escape inside a quoted field (ASCII).
      force_quote: column names to quote always (except NULLs), or ``True`` for all.
      compression: ``None``, ``"gzip"`` or ``"zstd"``: the whole file; ``max_file_size``
        then counts compressed bytes.
    """

    name: ClassVar[str] = "csv"

    header: bool = False
    delimiter: str = ","
    null: str = ""
    quote: str = '"'
    escape: str = '"'
    force_quote: Union[bool, Tuple[str, ...]] = ()
    compression: Optional[str] = None

    def __post_init__(self) -> None:
        for option in ("delimiter", "quote", "escape"):
            value = getattr(self, option)
            if not isinstance(value, str) or len(value) != 1 or not value.isascii() or value in "\r\n":
                raise ValueError(f"CsvFormat: {option} must be one ASCII character other than CR or LF, got {value!r}")
        if self.delimiter == self.quote:
            raise ValueError("CsvFormat: delimiter and quote must differ")
        if not isinstance(self.null, str) or any(c in self.null for c in (self.delimiter, self.quote, "\r", "\n")):
            raise ValueError(
                f"CsvFormat: null {self.null!r} must be a string without the delimiter, the quote, CR or LF"
            )
        if isinstance(self.force_quote, str):
            raise ValueError(
                f"CsvFormat: force_quote takes a list of column names or True, got the string {self.force_quote!r}"
            )
        if not isinstance(self.force_quote, bool):
            object.__setattr__(self, "force_quote", tuple(self.force_quote))
        check_compression("CsvFormat", self.compression)

    @property
    def extension(self) -> str:
        return compressed_extension("csv", self.compression)

    @property
    def content_type(self) -> str:
        return compressed_content_type("text/csv", self.compression)

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            check_type(field)
        if not isinstance(self.force_quote, bool):
            missing = sorted(set(self.force_quote) - set(schema.names))
            if missing:
                raise ValueError(
                    f"CsvFormat: force_quote names columns not in the schema: {missing}; the columns are {schema.names}"
                )

    def open(self, schema: pa.Schema, out: OutputStream, max_file_size: int) -> FileEncoder:
        header = self.header_line(schema) if self.header else b""
        return LineEncoder(out, max_file_size, _CsvLines(self, schema), self.compression, header)

    # field quoting ---------------------------------------------------------------------
    def quote_fields(self, texts: pa.Array, force: bool, single_column: bool) -> pa.Array:
        """Quote and escape rendered values (NULL stays NULL) as ``CopyAttributeOutCSV`` does."""
        if force:
            needs = pc.invert(texts.is_null())
        else:
            needs = pc.equal(texts, self.null)
            for special in {self.delimiter, self.quote, "\n", "\r"}:
                needs = pc.or_(needs, pc.match_substring(texts, special))
            if single_column:
                needs = pc.or_(needs, pc.equal(texts, "\\."))
        if not pc.any(needs).as_py():
            return texts
        escaped = texts
        if self.escape != self.quote:
            escaped = pc.replace_substring(escaped, self.escape, self.escape + self.escape)
        escaped = pc.replace_substring(escaped, self.quote, self.escape + self.quote)
        quoted = pc.binary_join_element_wise(self.quote, escaped, self.quote, "")
        return pc.if_else(needs, quoted, texts)

    def header_line(self, schema: pa.Schema) -> bytes:
        names = self.quote_fields(pa.array(schema.names, pa.string()), False, len(schema) == 1)
        return (self.delimiter.join(names.to_pylist()) + "\n").encode()


_DIGITS = "0123456789"
# The characters PostgreSQL's text of a value of these types is made of (see .postgres_values).
_ALPHABETS = (
    (pa.types.is_boolean, "tf"),
    (pa.types.is_integer, _DIGITS + "-"),
    (pa.types.is_floating, _DIGITS + "-+.eNaInfity"),
    (pa.types.is_date, _DIGITS + "- BC"),
    (pa.types.is_time, _DIGITS + ":."),
    (pa.types.is_timestamp, _DIGITS + "-:. +BC"),
)


def never_quoted(fmt: CsvFormat, typ: pa.DataType) -> bool:
    """Whether no value of ``typ`` can need quoting under ``fmt`` (unless forced): its text
    never holds the delimiter, the quote, CR or LF, never equals the NULL string and is
    never ``\\.``. Such columns skip the quoting kernels.

    >>> never_quoted(CsvFormat(), pa.int64()), never_quoted(CsvFormat(delimiter="-"), pa.int64())
    (True, False)
    """
    if isinstance(typ, pa.BaseExtensionType):
        return False
    for test, alphabet in _ALPHABETS:
        if test(typ):
            special = {fmt.delimiter, fmt.quote, "\n", "\r"}
            null_possible = fmt.null != "" and set(fmt.null) <= set(alphabet)
            return not (special & set(alphabet)) and not null_possible
    return False


class _CsvLines:
    """Renders a batch into CSV lines; the per-column choices are made once per file."""

    def __init__(self, fmt: CsvFormat, schema: pa.Schema) -> None:
        forced = fmt.force_quote
        self._fmt = fmt
        self._renderers = [column_renderer(f.type, f.name) for f in schema]
        self._force: List[bool] = [forced is True or (forced is not False and n in forced) for n in schema.names]
        self._plain = [not force and never_quoted(fmt, f.type) for f, force in zip(schema, self._force)]
        self._single = len(schema) == 1

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        fmt = self._fmt
        fields = []
        for i, render in enumerate(self._renderers):
            texts = render(batch.column(i))
            if not self._plain[i]:
                texts = fmt.quote_fields(texts, self._force[i], self._single)
            fields.append(pc.fill_null(texts, fmt.null) if texts.null_count else texts)
        return join_lines(fields, fmt.delimiter)
