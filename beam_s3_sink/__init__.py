"""beam_s3_sink: copy a Beam PCollection to S3 as Parquet, PostgreSQL COPY CSV/text, or JSON
Lines (:class:`CopyToS3`), or into an Apache Iceberg table as one snapshot (:class:`CopyToIceberg`)
or a Delta Lake table as one version (:class:`CopyToDelta`); a stream is committed unit by unit, one per window pane (:mod:`beam_s3_sink.stream`).

The Beam counterpart of Materialize's ``COPY ... TO 's3://...'``: three steps (initialization
on one worker, upload on every worker, one completion), data files made visible only when the
whole copy has succeeded, and exactly one :class:`CopyToResult`; the architecture, in one
picture, is :mod:`beam_s3_sink.transform`'s. The command ``beam-s3-copy``
(:mod:`beam_s3_sink.cli`) runs such a copy from the shell.

>>> import pyarrow as pa
>>> from beam_s3_sink import CopyToS3
>>> copy = CopyToS3("s3://bucket/exports/orders", format="parquet", schema=pa.schema([("id", pa.int64())]))
>>> copy.sink_id.startswith("copy-")  # rows | copy: one CopyToResult
True

Every exception the package raises is a :class:`CopyToS3Error` (:mod:`.errors`).
"""

from .bad_rows import BadRow, CopyOutputs
from .cleanup import AbortReport, abort_copy
from .config import S3Config
from .delta import CopyToDelta, abort_delta_copy
from .errors import CommittedCopyError, CopyToS3Error
from .formats import CsvFormat, Format, JsonlFormat, ParquetFormat, TextFormat
from .iceberg import CopyToIceberg, abort_table_copy
from .object_settings import ObjectSettings
from .results import CopiedFile, CopyToResult, StreamUnit
from .transform import CopyToS3

__all__ = [
    "CopyToS3",
    "CopyToIceberg",
    "CopyToDelta",
    "CopyToResult",
    "CopiedFile",
    "StreamUnit",
    "CopyToS3Error",
    "S3Config",
    "ObjectSettings",
    "Format",
    "ParquetFormat",
    "CsvFormat",
    "TextFormat",
    "JsonlFormat",
    "abort_copy",
    "abort_table_copy",
    "abort_delta_copy",
    "AbortReport",
    "CommittedCopyError",
    "BadRow",
    "CopyOutputs",
]
