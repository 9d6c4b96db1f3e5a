"""cli/delta and the --delta flags of cli/command: every flag that does not go with --delta,
refused before anything is read; a dry run that opens no table. (The copies themselves:
tests/test_cli.py.)"""

from __future__ import annotations

import pytest

from beam_s3_sink.cli import UsageError, plan_copy
from beam_s3_sink.cli.command import abort_main

DELTA = ["--source", "generate:10", "--delta", "s3://lake/tables/orders"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (DELTA + ["--output", "s3://b/p"], "^give exactly one of --output .* \\(not --output and --delta\\)"),
        (DELTA + ["--table", "a.b"], "^give exactly one of .* \\(not --table and --delta\\)"),
        (["--source", "generate:10", "--delta", "s3://lake"], "^--delta s3://lake is a bucket: give the table's root"),
        (["--source", "generate:10", "--delta", "/local/path"], "^--delta: "),
        (DELTA + ["--catalog", "prod"], "^--catalog applies only with --table NS.TABLE, not with --delta"),
        (DELTA + ["--schema_evolution", "add_columns"], "^--schema_evolution applies only with --table"),
        (
            DELTA + ["--if_exists", "replace"],
            "^--if_exists applies only with --output, not with --delta \\(for a table",
        ),
        (DELTA + ["--num_batches", "2"], "^--num_batches applies only with --output, not with --delta"),
        (DELTA + ["--format", "csv"], "^--format csv: a Delta table \\(--delta\\) is written as Parquet only"),
        (DELTA + ["--compression", "zstd"], "^--compression do\\(es\\) not apply to --delta"),
        (DELTA + ["--partition_by", "day(ordered_at)"], "^--partition_by column 'day\\(ordered_at\\)' is not in"),
        (DELTA + ["--mode", "upsert"], "argument --mode: invalid choice: 'upsert'"),
        (
            ["--source", "generate:10", "--output", "s3://b/p", "--mode", "overwrite"],
            "^--mode applies only with --table NS.TABLE or --delta s3://BUCKET/PATH",
        ),
    ],
)
def test_delta_usage_errors_name_the_flag(argv, says):
    with pytest.raises(UsageError, match=says):
        plan_copy(argv)


def test_a_dry_run_into_a_delta_table_opens_no_table():
    plan = plan_copy(DELTA + ["--dry-run", "--partition_by", "country", "--mode", "overwrite"])  # no such store
    assert plan.dry_run and plan.output == "Delta table s3://lake/tables/orders" and plan.format_name == "parquet"
    assert plan.delta is not None and plan.delta.uri == "s3://lake/tables/orders"
    assert type(plan.transform).__name__ == "CopyToDelta" and plan.transform._partition_by == ("country",)


def test_a_delta_table_without_deltalake_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deltalake" else real(name, *a))
    with pytest.raises(UsageError, match=r"^--delta needs deltalake, .*: pip install 'beam_s3_sink\[delta\]'$"):
        plan_copy(DELTA)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--abort", "x", "--delta", "s3://b/t", "--output", "s3://b/p"], "give exactly one of --output"),
        (["--abort", "x", "--delta", "s3://b/t", "--catalog", "prod"], "--catalog applies only with --table"),
        (["--abort", "x", "--delta", "s3://b/t", "--force"], "--force applies only with --output"),
        (["--abort", "x", "--delta", "s3://lake"], "--delta s3://lake is a bucket"),
    ],
)
def test_abort_of_a_delta_copy_refuses_bad_flags(argv, says, capsys):
    assert abort_main(argv) == 2
    assert says in capsys.readouterr().err
