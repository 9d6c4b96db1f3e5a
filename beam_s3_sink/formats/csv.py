"""PostgreSQL ``COPY ... TO ... (FORMAT csv)`` output.

Each record batch is rendered column by column (:mod:`.pgtext`), each field quoted by
PostgreSQL's rule, and the lines are written whole: a file is full once it reaches
``max_file_size``, and the lines that did not fit start the next file::

    batch ──▶ render columns ──▶ quote fields ──▶ lines ──▶ as many as fit ──▶ stream
                                                            └─ the rest ──▶ next file

PostgreSQL quotes a field when it equals the NULL string, contains the delimiter, the quote
character, CR or LF, or is the end-of-data marker ``\\.``; the quote (and the escape) inside a
quoted field is preceded by the escape character.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import BinaryIO, ClassVar, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from .base import FileEncoder, Format
from .pgtext import check_type, render_column

__all__ = ["CsvFormat"]


@dataclass(frozen=True)
class CsvFormat(Format):
    """CSV files (``.csv``) as PostgreSQL's ``COPY ... (FORMAT csv)`` writes them.

    >>> CsvFormat(header=True).extension
    'csv'

    Attributes:
      header: write the column names as the first line of every file.
      delimiter: one character between fields.
      null: the text of a NULL (an unquoted empty field by default).
      quote: the quoting character.
      escape: the character before a quote inside a quoted field.
      force_quote: column names to quote always (except NULLs), or ``True`` for all.
    """

    name: ClassVar[str] = "csv"

    header: bool = False
    delimiter: str = ","
    null: str = ""
    quote: str = '"'
    escape: str = '"'
    force_quote: Union[bool, Tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for option in ("delimiter", "quote", "escape"):
            value = getattr(self, option)
            if not isinstance(value, str) or len(value) != 1 or value in "\r\n":
                raise ValueError(f"CsvFormat: {option} must be one character other than CR or LF, got {value!r}")
        if self.delimiter == self.quote:
            raise ValueError("CsvFormat: delimiter and quote must differ")
        if self.delimiter in self.null or self.quote in self.null or "\r" in self.null or "\n" in self.null:
            raise ValueError(f"CsvFormat: null {self.null!r} must not contain the delimiter, quote, CR or LF")
        if not isinstance(self.force_quote, bool):
            object.__setattr__(self, "force_quote", tuple(self.force_quote))

    @property
    def extension(self) -> str:
        return "csv"

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            check_type(field)
        if not isinstance(self.force_quote, bool):
            missing = sorted(set(self.force_quote) - set(schema.names))
            if missing:
                raise ValueError(f"CsvFormat: force_quote names columns not in the schema: {missing}")

    def open(self, schema: pa.Schema, out: BinaryIO, max_file_size: int) -> "CsvEncoder":
        return CsvEncoder(self, schema, out, max_file_size)

    # field quoting ---------------------------------------------------------------------
    def quote_field(self, value: str, force: bool) -> str:
        specials = (self.delimiter, self.quote, "\n", "\r")
        if (force or value == self.null or any(c in value for c in specials)
                or (value.startswith("\\.") and len(value) == 2)):
            if self.escape in value and self.escape != self.quote:
                value = value.replace(self.escape, self.escape + self.escape)
            value = value.replace(self.quote, self.escape + self.quote)
            return self.quote + value + self.quote
        return value

    def header_line(self, schema: pa.Schema) -> bytes:
        force = self.force_quote is True
        return (self.delimiter.join(self.quote_field(n, force) for n in schema.names) + "\n").encode()


class CsvEncoder(FileEncoder):
    """One CSV file: lines written whole until the file reaches its size."""

    def __init__(self, fmt: CsvFormat, schema: pa.Schema, out: BinaryIO, max_file_size: int) -> None:
        super().__init__(out, max_file_size)
        self._fmt = fmt
        self._schema = schema
        forced = fmt.force_quote
        self._force = [forced is True or (forced is not False and name in forced) for name in schema.names]
        if fmt.header:
            out.write(fmt.header_line(schema))

    def _lines(self, batch: pa.RecordBatch) -> List[bytes]:
        fmt = self._fmt
        columns: List[Sequence[str]] = []
        for index, name in enumerate(self._schema.names):
            force = self._force[index]
            columns.append([fmt.null if v is None else fmt.quote_field(v, force)
                            for v in render_column(batch.column(index), name)])
        delimiter = fmt.delimiter
        return [(delimiter.join(fields) + "\n").encode() for fields in zip(*columns)]

    def write(self, batch: pa.RecordBatch) -> Optional[pa.RecordBatch]:
        lines = self._lines(batch)
        room = self.max_file_size - self.out.tell()
        ends = list(accumulate(len(line) for line in lines))
        fit = sum(1 for end in ends if end <= room)
        if fit == 0 and self.rows == 0:
            fit = 1  # a row larger than the limit gets a file of its own
        self.out.write(b"".join(lines[:fit]))
        self.rows += fit
        return batch.slice(fit) if fit < len(lines) else None

    @property
    def full(self) -> bool:
        return self.out.tell() >= self.max_file_size

    def close(self) -> None:
        pass
