"""Output formats: Parquet (pyarrow), PostgreSQL's COPY CSV and text, and JSON Lines.

``format=`` of :class:`~beam_s3_sink.CopyToS3` takes a name from :data:`FORMATS` or a format
object with options, such as ``ParquetFormat(compression="zstd")``.
"""

from __future__ import annotations

from typing import Dict, Type, Union

from .base import FileEncoder, Format
from .csv import CsvFormat
from .jsonl import JsonlFormat
from .parquet import ParquetFormat
from .postgres_text import TextFormat

__all__ = [
    "Format",
    "FileEncoder",
    "ParquetFormat",
    "CsvFormat",
    "TextFormat",
    "JsonlFormat",
    "FORMATS",
    "resolve_format",
]

FORMATS: Dict[str, Type[Format]] = {
    ParquetFormat.name: ParquetFormat,
    CsvFormat.name: CsvFormat,
    TextFormat.name: TextFormat,
    JsonlFormat.name: JsonlFormat,
}


def resolve_format(format: Union[str, Format]) -> Format:
    """The format object for a name or an object.

    >>> resolve_format("csv")
    CsvFormat(header=False, delimiter=',', null='', quote='"', escape='"', force_quote=(), compression=None)
    """
    if isinstance(format, Format):
        return format
    if isinstance(format, str) and format.lower() in FORMATS:
        return FORMATS[format.lower()]()
    raise ValueError(
        f"CopyToS3: unknown format {format!r}; use one of {sorted(FORMATS)} or a format object "
        "such as ParquetFormat(compression='zstd')"
    )
