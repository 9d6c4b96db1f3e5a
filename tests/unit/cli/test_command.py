"""cli/command: the flags, the checks before anything runs, and whole runs against the fake."""

from __future__ import annotations

import csv
import io

import pytest

from beam_s3_sink import S3Config, clients
from beam_s3_sink.cli import UsageError, build_parser, main, plan_copy
from beam_s3_sink.cli.command import one_line_error

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
    ],
)
def test_usage_errors(argv, says):
    with pytest.raises(UsageError, match=says):
        plan_copy(argv)


def test_help_names_the_flags():
    text = build_parser().format_help()
    assert all(flag in text for flag in ("--source", "--output", "--format", "--dry-run", "--sink_id"))


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


def test_main_usage_error_is_exit_2(capsys):
    assert main(["--source", "generate:1"]) == 2
    assert "error:" in capsys.readouterr().err
