"""cli/command: the flags, the checks before anything runs, and whole runs against the fake."""

from __future__ import annotations

import csv
import io
import re

import pytest

from beam_s3_sink import S3Config, clients
from beam_s3_sink.cli import UsageError, build_parser, main, plan_copy
from beam_s3_sink.cli.command import _format, as_flags, one_line_error
from beam_s3_sink.cli.orders import orders_shard
from beam_s3_sink.formats import ParquetFormat

ENDPOINT = "--s3_endpoint_url=http://fake.invalid"


def test_a_plan_is_checked_and_writes_nothing():
    plan = plan_copy(
        [
            "--source",
            "generate:10",
            "--output",
            "s3://bucket/p",
            "--format",
            "csv",
            "--header",
            "--max_file_size",
            "1MiB",
            "--sink_id",
            "s1",
        ]
    )
    assert plan.format_name == "csv" and plan.transform.sink_id == "s1" and plan.total_rows == 10
    assert plan.output == "s3://bucket/p"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--output", "s3://bucket/p"], "--source"),
        (["--source", "generate:1", "--output", "gs://b/p"], "not an S3 URI"),
        (["--source", "generate:1", "--output", "s3://bucket/p", "--format", "orc"], "unknown format"),
        (
            ["--source", "generate:1", "--output", "s3://bucket/p", "--header"],
            "--header do\\(es\\) not apply to --format parquet",
        ),
        (
            ["--source", "generate:1", "--output", "s3://bucket/p", "--s3_endpont_url=x"],
            "unknown flag --s3_endpont_url; did you mean --s3_endpoint_url",
        ),
        (["--source", "generate:1", "--output", "s3://bucket/p", "--max_file_size", "lots"], "max_file_size"),
        (["--source", "generate:1", "--output", "s3://bucket/p", "--max_bad_rows", "lots"], "max_bad_rows"),
        (
            ["--source", "generate:1", "--output", "s3://bucket/p", "--bad_rows", "s3://bucket/r"],
            "--bad_rows applies only with --max_bad_rows",
        ),
        (
            [
                "--source",
                "generate:1",
                "--output",
                "s3://b/p",
                "--max_bad_rows",
                "1",
                "--bad_rows",
                "s3://b/r",
                "--dry-run",
            ],
            "--bad_rows does not apply to --dry-run",
        ),
    ],
)
def test_usage_errors(argv, says):
    with pytest.raises(UsageError, match=says):
        plan_copy(argv)


GEN = ["--source", "generate:1", "--output", "s3://bucket/p"]


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--num_batches", "0"], "argument --num_batches: must be a whole number from 1 up, got '0'"),
        (["--num_batches", "-2"], "argument --num_batches: must be a whole number from 1 up, got '-2'"),
        (["--num_batches", "two"], "argument --num_batches: must be a whole number from 1 up, got 'two'"),
        (["--num_batches", "20000"], "^--num_batches .*20000"),  # CopyToS3's bound, in the flag's name
        (
            ["--partition_by", "nope"],
            "^--partition_by column 'nope' is not in the source's schema; its columns are order_id, customer_id, ",
        ),
        (["--partition_by", "country,nope,zz"], "^--partition_by columns 'nope', 'zz' are not in the source's schema"),
        (["--partition_by", "country,,paid"], "argument --partition_by: 'country,,paid' has an empty column name"),
        (["--partition_by", "paid,paid"], r"argument --partition_by: 'paid,paid' names column\(s\) \['paid'\] more"),
        (["--partition_by", "amount"], "'amount' has type double"),  # CopyToS3 checks the types
        (["--keep_partition_columns"], "^--keep_partition_columns applies only with --partition_by"),
        (["--if_exists", "overwrite"], "argument --if_exists: invalid choice: 'overwrite'"),
        (["--row_group_bytes", "100"], "argument --row_group_bytes: must be at least 1024 bytes"),
        (["--row_group_bytes", "lots"], "argument --row_group_bytes: 'lots' is not a size"),
        (
            ["--row_group_bytes", "2MiB", "--max_file_size", "1MiB"],
            "^--row_group_bytes 2,097,152 is more than --max_file_size 1,048,576 bytes",
        ),
        (["--format", "csv", "--row_group_bytes", "64KiB"], r"^--row_group_bytes do\(es\) not apply to --format csv"),
        (["--row_group_size", "1000"], "^--row_group_size is gone: .* write --row_group_bytes SIZE instead"),
        (["--row_group_size=1000"], "^--row_group_size is gone: .* write --row_group_bytes SIZE instead"),
        (["--encode_threads", "2"], "^--encode_threads is gone"),
    ],
)
def test_layout_and_row_group_flags_are_checked_before_anything_runs(flags, says):
    with pytest.raises(UsageError, match=says):
        plan_copy([*GEN, *flags])


def test_row_group_bytes_is_parquets_row_group_size_in_bytes():
    args = build_parser().parse_args([*GEN, "--row_group_bytes", "64KiB"])
    assert _format(args) == ParquetFormat(row_group_size=64 * 1024)
    assert _format(build_parser().parse_args([*GEN, "--row_group_bytes", "4096"])).row_group_size == 4096
    assert _format(build_parser().parse_args(GEN)) == ParquetFormat()


def test_the_layout_flags_plan_a_copy():
    plan = plan_copy(
        [
            *GEN,
            "--partition_by",
            " country , paid",
            "--keep_partition_columns",
            "--num_batches",
            "3",
            "--if_exists",
            "replace",
            "--row_group_bytes",
            "64KiB",
        ]
    )
    assert plan.schema.names[:2] == ["order_id", "customer_id"]


def test_as_flags_names_the_commands_flags():
    assert as_flags("every column is a partition column; pass keep_partition_columns=True or fewer") == (
        "every column is a partition column; pass --keep_partition_columns or fewer"
    )
    assert as_flags("a path takes one copy at a time unless if_exists='append'.") == (
        "a path takes one copy at a time unless --if_exists append."
    )
    assert as_flags("s3://b/p: the num_batches here") == "s3://b/p: the num_batches here", "only a leading name"


def test_help_names_the_flags():
    text = build_parser().format_help()
    assert all(flag in text for flag in ("--source", "--output", "--format", "--dry-run", "--sink_id"))
    new = ("--partition_by", "--keep_partition_columns", "--num_batches", "--if_exists", "--row_group_bytes")
    assert all(flag in text for flag in new)
    assert "--encode_threads" not in text and "--row_group_size" not in text and "rows per row group" not in text


def test_one_line_error():
    assert one_line_error(
        RuntimeError("Traceback...\n  File x\nValueError: the real reason [while running 'Copy/Upload']")
    ) == ("ValueError: the real reason")


@pytest.fixture
def fake_endpoint(fake_s3, monkeypatch):
    """Make every client the CLI makes (the steps', the summary's, --abort's) the fake."""
    monkeypatch.setattr(S3Config, "make_client", lambda self: fake_s3)
    clients.clear_clients()
    yield fake_s3
    clients.clear_clients()


def test_main_copies_and_prints_a_summary(fake_endpoint, capsys):
    status = main(
        ["--source", "generate:50", "--output", "s3://bucket/o", "--format", "csv", "--sink_id", "s1", ENDPOINT]
    )
    out = capsys.readouterr().out
    assert status == 0 and "50" in out and "s3://bucket/o" in out
    assert "o/_s1-manifest.json" in fake_endpoint.keys()
    data = [k for k in fake_endpoint.keys() if k.endswith(".csv")]
    assert sum(len(list(csv.reader(io.StringIO(fake_endpoint.body(k).decode())))) for k in data) == 50


def test_main_dry_run_writes_nothing(fake_endpoint, capsys):
    status = main(["--source", "generate:20", "--output", "s3://bucket/o", "--dry-run", ENDPOINT])
    assert status == 0 and fake_endpoint.calls == []


def test_main_abort(fake_endpoint, capsys):
    fake_endpoint.put_object(Bucket="bucket", Key="o/_s1-INCOMPLETE", Body=b"")
    assert main(["--abort", "s1", "--output", "s3://bucket/o", ENDPOINT]) == 0
    assert "deleted 1 object(s)" in capsys.readouterr().out and fake_endpoint.keys() == []


def test_main_partitions_and_batches(fake_endpoint, capsys):
    argv = ["--source", "generate:300", "--output", "s3://bucket/o", "--format", "csv", "--sink_id", "s1"]
    status = main([*argv, "--partition_by", "country", "--num_batches", "2", ENDPOINT])
    assert status == 0, capsys.readouterr().err
    data = [k for k in fake_endpoint.keys() if k.endswith(".csv")]
    assert data and all(re.fullmatch(r"o/country=[A-Z]{2}/s1-batch-000[01]-0001\.csv", k) for k in data), data
    assert {k.split("/")[1] for k in data} == {f"country={r['country']}" for r in orders_shard(0, 300)}
    rows = [row for k in data for row in csv.reader(io.StringIO(fake_endpoint.body(k).decode()))]
    assert len(rows) == 300 and all(len(row) == 12 for row in rows), "13 columns less the partition column"


def test_main_if_exists(fake_endpoint, capsys):
    fake_endpoint.put_object(Bucket="bucket", Key="o/old.csv", Body=b"old")
    argv = ["--source", "generate:20", "--output", "s3://bucket/o", "--format", "csv", ENDPOINT]
    assert main([*argv, "--sink_id", "refused"]) == 1
    err = capsys.readouterr().err
    assert "is not empty" in err and "o/old.csv" in err and "--if_exists append or replace" in err, err
    assert main([*argv, "--sink_id", "a", "--if_exists", "append"]) == 0
    assert "o/old.csv" in fake_endpoint.keys() and "o/_a-manifest.json" in fake_endpoint.keys()
    assert main([*argv, "--sink_id", "r", "--if_exists", "replace"]) == 0
    assert sorted(k for k in fake_endpoint.keys() if not k.startswith("o/r-")) == ["o/_r-manifest.json"]


def test_main_usage_error_is_exit_2(capsys):
    assert main(["--source", "generate:1"]) == 2
    assert "error:" in capsys.readouterr().err


def test_main_with_max_bad_rows_says_how_many_were_left_out(fake_endpoint, capsys):
    argv = ["--source", "generate:30", "--output", "s3://bucket/o", "--format", "csv", "--sink_id", "s1"]
    status = main([*argv, "--max_bad_rows", "0.5%", "--bad_rows", "s3://bucket/rejects", ENDPOINT])
    out = capsys.readouterr().out
    assert status == 0 and "  bad rows  0 left out (written to s3://bucket/rejects)" in out
    assert "rejects/_s1-bad-rows-manifest.json" in fake_endpoint.keys()  # the rejects' own copy, empty
