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

import importlib
from typing import TYPE_CHECKING, Any, List

#: Each public name and the module that defines it. A name is imported on first use (PEP 562), so
#: that ``import beam_s3_sink`` costs next to nothing and a process imports Beam, pyarrow and boto3
#: only when it uses a name that needs them (docs/benchmarks.md, "The fixed cost").
_NAMES = {
    "CopyToS3": "transform",
    "CopyToIceberg": "iceberg",
    "CopyToDelta": "delta",
    "CopyToResult": "results",
    "CopiedFile": "results",
    "StreamUnit": "results",
    "CopyToS3Error": "errors",
    "S3Config": "config",
    "ObjectSettings": "object_settings",
    "Format": "formats",
    "ParquetFormat": "formats",
    "CsvFormat": "formats",
    "TextFormat": "formats",
    "JsonlFormat": "formats",
    "abort_copy": "cleanup",
    "abort_table_copy": "iceberg",
    "abort_delta_copy": "delta",
    "AbortReport": "cleanup",
    "CommittedCopyError": "errors",
    "BadRow": "bad_rows",
    "CopyOutputs": "bad_rows",
}

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_NAMES))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from .bad_rows import BadRow, CopyOutputs  # noqa: F401
    from .cleanup import AbortReport, abort_copy  # noqa: F401
    from .config import S3Config  # noqa: F401
    from .delta import CopyToDelta, abort_delta_copy  # noqa: F401
    from .errors import CommittedCopyError, CopyToS3Error  # noqa: F401
    from .formats import CsvFormat, Format, JsonlFormat, ParquetFormat, TextFormat  # noqa: F401
    from .iceberg import CopyToIceberg, abort_table_copy  # noqa: F401
    from .object_settings import ObjectSettings  # noqa: F401
    from .results import CopiedFile, CopyToResult, StreamUnit  # noqa: F401
    from .transform import CopyToS3  # noqa: F401
