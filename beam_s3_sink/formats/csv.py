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

One departure, where PostgreSQL's own ``COPY TO`` writes a file that its ``COPY FROM`` cuts
short: with ``delimiter="."`` and two columns, a line ``\\.`` (the first field ``\\``, the
second empty) is the end-of-data marker; the field that is a value is quoted instead.

The options are checked as PostgreSQL's ``ProcessCopyOptions`` checks them (the same messages'
substance), plus the few it accepts but cannot load back: see :class:`CsvFormat`.
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
      escape: the character before a quote or escape inside a quoted field (ASCII); by default
        the quote character, as in PostgreSQL (``repr`` and ``==`` show the one in effect).
      force_quote: column names to quote always (except NULLs), or ``True`` for all.
      compression: ``None``, ``"gzip"`` or ``"zstd"``: the whole file; ``max_file_size``
        then counts compressed bytes.

    >>> CsvFormat(quote="'").escape
    "'"

    Refused with a ``ValueError`` naming the option, as PostgreSQL refuses them: a delimiter,
    quote or escape that is not one ASCII character (nor NUL), a delimiter that is CR or LF, a
    NULL string holding CR, LF, the delimiter or the quote, and the same character as delimiter
    and quote. Refused although PostgreSQL accepts them, because ``COPY FROM`` cannot read back
    what ``COPY TO`` writes with them: a quote that is CR or LF, and the NULL string ``\\.``
    (a NULL in a one-column file would end the data).
    """

    name: ClassVar[str] = "csv"

    header: bool = False
    delimiter: str = ","
    null: str = ""
    quote: str = '"'
    escape: Optional[str] = None  # the quote (see __post_init__)
    force_quote: Union[bool, Tuple[str, ...]] = ()
    compression: Optional[str] = None

    def __post_init__(self) -> None:
        if self.escape is None or isinstance(self.escape, _QuoteEscape):
            # The default escape is the quote. Stored marked as such, so that
            # dataclasses.replace(fmt, quote="'") (the CLI's way) takes the new quote's escape.
            object.__setattr__(self, "escape", _QuoteEscape(self.quote) if isinstance(self.quote, str) else None)
        for option in ("delimiter", "quote", "escape"):
            value = getattr(self, option)
            if not isinstance(value, str) or len(value) != 1 or not value.isascii() or value == "\x00":
                raise ValueError(
                    f"CsvFormat: {option} must be one ASCII character other than NUL (PostgreSQL takes a "
                    f"single one-byte character), got {value!r}"
                )
            if value in "\r\n" and option != "escape":
                why = "PostgreSQL refuses it" if option == "delimiter" else "COPY FROM cannot read back a quoted field"
                raise ValueError(f"CsvFormat: {option} must not be CR or LF ({why}), got {value!r}")
        if self.delimiter == self.quote:
            raise ValueError(
                f"CsvFormat: delimiter and quote must differ (PostgreSQL refuses the same character for "
                f"both), got {self.delimiter!r} for both"
            )
        null = self.null
        if not isinstance(null, str):
            raise ValueError(f"CsvFormat: null must be a string, got {null!r}")
        for char, what in ((self.delimiter, "the delimiter"), (self.quote, "the quote"), ("\r", "CR"), ("\n", "LF")):
            if char in null:
                raise ValueError(
                    f"CsvFormat: null {null!r} must not contain {what} {char!r}: PostgreSQL takes a NULL "
                    "string without the delimiter, the quote, CR or LF"
                )
        if "\x00" in null:
            raise ValueError(f"CsvFormat: null {null!r} must not contain NUL (PostgreSQL cannot take it)")
        if null == "\\.":
            raise ValueError(
                "CsvFormat: null '\\\\.' is PostgreSQL's end-of-data marker: COPY FROM would stop at a "
                "NULL in a one-column file; choose another NULL string"
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

    def check_values(self, batch: pa.RecordBatch) -> pa.Array:
        """``batch``'s lines (what refuses a value is rendering it): the encoder writes them."""
        return _CsvLines(self, batch.schema)(batch)

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
        return pc.if_else(needs, self._quoted(texts), texts)

    def _quoted(self, texts: pa.Array) -> pa.Array:
        escape = str(self.escape)  # set by __post_init__
        escaped = texts
        if escape != self.quote:
            escaped = pc.replace_substring(escaped, escape, escape + escape)
        escaped = pc.replace_substring(escaped, self.quote, escape + self.quote)
        return pc.binary_join_element_wise(self.quote, escaped, self.quote, "")

    def header_line(self, schema: pa.Schema) -> bytes:
        names = self.quote_fields(pa.array(schema.names, pa.string()), False, len(schema) == 1)
        fields = names.to_pylist()
        if self.delimiter == "." and fields == ["\\", ""]:  # the line would be the marker \.
            fields[0] = self._quoted(pa.array(["\\"])).to_pylist()[0]
        return (self.delimiter.join(fields) + "\n").encode()


class _QuoteEscape(str):
    """The escape character when none is given: the quote, marked as a default so that
    ``dataclasses.replace`` with another quote takes that quote as the escape too."""

    __slots__ = ()


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
        self._marker_possible = fmt.delimiter == "." and len(schema) == 2

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        fmt = self._fmt
        fields = []
        for i, render in enumerate(self._renderers):
            texts = render(batch.column(i))
            if not self._plain[i]:
                texts = fmt.quote_fields(texts, self._force[i], self._single)
            fields.append(pc.fill_null(texts, fmt.null) if texts.null_count else texts)
        if self._marker_possible:
            self._quote_end_of_data_markers(fields)
        return join_lines(fields, fmt.delimiter)

    def _quote_end_of_data_markers(self, fields: List[pa.Array]) -> None:
        """With the delimiter ``.`` and two columns, the line ``\\.`` (first field ``\\``, second
        empty) would end the data in COPY FROM (PostgreSQL's COPY TO writes it all the same).
        One of the two fields is a value (the NULL string cannot be both ``\\`` and empty):
        quote that one."""
        fmt = self._fmt
        marker = pc.and_(pc.equal(fields[0], "\\"), pc.equal(fields[1], ""))
        if not pc.any(marker).as_py():
            return
        if fmt.null != "\\":  # the first field is the value (a backslash)
            fields[0] = pc.if_else(marker, fmt._quoted(pa.array(["\\"]))[0], fields[0])
        else:  # the first field is a NULL, the second the value ''
            fields[1] = pc.if_else(marker, fmt.quote + fmt.quote, fields[1])
