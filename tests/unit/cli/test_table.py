"""cli/table and the --table flags of cli/command: --catalog's three forms, the secrets that are
never shown, and every flag that does not go with --table, refused before anything is read."""

from __future__ import annotations

import io
import json
import logging

import pytest

from beam_s3_sink import S3Config
from beam_s3_sink.cli import UsageError, plan_copy
from beam_s3_sink.cli.command import abort_main
from beam_s3_sink.cli.table import (
    CatalogError,
    Secrets,
    catalog_with_s3_flags,
    describe_catalog,
    parse_catalog,
    parse_table,
    s3_flags_given,
)

SECRET = "s3cr3t-never-shown"


def test_catalog_as_json_as_a_file_and_as_a_name(tmp_path):
    props = {"type": "sql", "uri": "sqlite:///c.db", "s3.path-style-access": True, "commit.retry.num-retries": 4}
    expected = {"type": "sql", "uri": "sqlite:///c.db", "s3.path-style-access": "true", "commit.retry.num-retries": "4"}
    assert parse_catalog(json.dumps(props)) == expected
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(props))
    assert parse_catalog(f"@{path}") == expected
    assert parse_catalog("  prod ") == "prod"
    assert parse_catalog("my_catalog.v2") == "my_catalog.v2"


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"type": "sql", "token": "' + SECRET, "--catalog is not valid JSON (Unterminated string"),
        ('["type", "sql"]', "--catalog must be a JSON object of catalog properties, not a JSON list"),
        (
            '{"credential": {"id": "' + SECRET + '"}}',
            "property 'credential' must be a string, number or boolean, not ***",
        ),
        ('{"uri": ["a"]}', "property 'uri' must be a string, number or boolean, not list"),
        (
            "@/no/such/catalog.json",
            "--catalog @/no/such/catalog.json: cannot read the file (No such file or directory)",
        ),
        ("not a name", "--catalog takes a JSON object of pyiceberg catalog properties"),
        ("", "--catalog takes a JSON object"),
    ],
)
def test_a_bad_catalog_is_named_and_never_quoted(text, says):
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text)
    assert says in str(caught.value) and SECRET not in str(caught.value)


def test_secrets_are_every_secret_key_and_every_uri_password():
    catalog = {
        "uri": "postgresql+psycopg://me:pg-pass-word@db:5432/cat",
        "s3.secret-access-key": "aws-secret-key",
        "s3.session-token": "sess-token",
        "credential": "client-id:client-secret-part",
        "rest.signing-name": "s3tables",
        "s3.access-key-id": "AKIAPUBLIC",
    }
    secrets = Secrets.of(catalog)
    text = " ".join(catalog.values()) + " and client-secret-part alone"
    masked = secrets.mask(text)
    for value in ("pg-pass-word", "aws-secret-key", "sess-token", "client-id:client-secret-part", "client-secret-part"):
        assert value not in masked
    assert "s3tables" in masked and "AKIAPUBLIC" in masked, "what is not a secret stays"
    assert Secrets.of("prod").mask("prod") == "prod"


def test_the_log_masks_the_secrets_too():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # main() may have set CRITICAL in an earlier test
    try:
        Secrets.of({"token": SECRET}).install()
        logging.getLogger("pyiceberg.test").warning("connecting with %s", SECRET)
        try:
            raise RuntimeError(f"refused: {SECRET}")
        except RuntimeError:
            logging.getLogger("beam.test").exception("failed")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert SECRET not in stream.getvalue() and stream.getvalue().count("***") == 2, stream.getvalue()


def test_describe_catalog_shows_no_password():
    described = describe_catalog({"type": "sql", "uri": "postgresql+psycopg://me:pw-x@db/cat", "token": "t"})
    assert described == "sql catalog postgresql+psycopg://me:***@db/cat"
    assert describe_catalog({"uri": "http://127.0.0.1:8181"}) == "rest catalog http://127.0.0.1:8181"
    assert describe_catalog({"type": "glue"}) == "glue catalog"


def test_s3_flags_fill_what_the_catalog_does_not_say():
    flags = S3Config(endpoint_url="http://127.0.0.1:9000", access_key_id="AK", secret_access_key="SK")
    assert s3_flags_given(flags) and not s3_flags_given(S3Config())
    merged = catalog_with_s3_flags({"type": "sql", "s3.endpoint": "http://catalog:9000"}, flags)
    assert merged == {
        "type": "sql",
        "s3.endpoint": "http://catalog:9000",
        "s3.access-key-id": "AK",
        "s3.secret-access-key": "SK",
        "s3.path-style-access": "true",
    }
    assert catalog_with_s3_flags("prod", flags) == "prod"


def test_table_names():
    assert parse_table("a.b.c") == "a.b.c"
    for bad in ("orders", ".orders", "a..b", "a. "):
        with pytest.raises(ValueError, match="--table must be NAMESPACE.TABLE"):
            parse_table(bad)


CATALOG = json.dumps(
    {"type": "sql", "uri": "sqlite:////nonexistent/dir/c.db", "s3.access-key-id": "AK", "s3.secret-access-key": SECRET}
)
TABLE = ["--source", "generate:10", "--table", "ns.t", "--catalog", CATALOG]


@pytest.mark.parametrize(
    "argv, says",
    [
        (
            ["--source", "generate:10"],
            "^give exactly one of --output s3://BUCKET/PATH, --table NS.TABLE and --delta s3://BUCKET/PATH",
        ),
        (TABLE + ["--output", "s3://b/p"], "^give exactly one of --output .* \\(not --output and --table\\)"),
        (["--source", "generate:10", "--table", "ns.t"], "^--table needs --catalog"),
        (
            ["--source", "generate:10", "--output", "s3://b/p", "--catalog", CATALOG],
            "^--catalog applies only with --table",
        ),
        (
            ["--source", "generate:10", "--output", "s3://b/p", "--mode", "overwrite"],
            "^--mode applies only with --table",
        ),
        (TABLE + ["--format", "csv"], "^--format csv: an Iceberg table \\(--table\\) is written as Parquet only"),
        (TABLE + ["--format", "jsonl"], "^--format jsonl: "),
        (
            TABLE + ["--if_exists", "replace"],
            "^--if_exists applies only with --output, not with --table \\(for a table, --mode",
        ),
        (TABLE + ["--num_batches", "2"], "^--num_batches applies only with --output"),
        (TABLE + ["--keep_partition_columns"], "^--keep_partition_columns applies only with --output"),
        (
            TABLE + ["--compression", "zstd", "--row_group_bytes", "1MiB"],
            "^--compression, --row_group_bytes do\\(es\\) not apply to --table",
        ),
        (TABLE + ["--mode", "upsert"], "argument --mode: invalid choice: 'upsert'"),
        (["--source", "generate:10", "--table", "orders", "--catalog", "prod"], "^--table must be NAMESPACE.TABLE"),
        (["--source", "generate:10", "--table", "a.b", "--catalog", "{oops"], "^--catalog is not valid JSON"),
        (TABLE + ["--partition_by", "nope"], "^--partition_by column 'nope' is not in the source's schema"),
        (TABLE + ["--partition_by", "day(nope)"], "^--partition_by column 'nope' is not in the source's schema"),
        (
            TABLE + ["--partition_by", "week(ordered_at)"],
            "^--partition_by: partition_by 'week\\(ordered_at\\)': unknown",
        ),
        (TABLE, "^--catalog: the sql catalog sqlite:////nonexistent/dir/c.db does not load: "),
    ],
)
def test_table_usage_errors_name_the_flag_and_no_secret(argv, says):
    with pytest.raises(UsageError, match=says) as caught:
        plan_copy(argv)
    assert SECRET not in str(caught.value)


def test_partition_by_takes_transforms_for_a_table():
    plan = plan_copy(TABLE + ["--dry-run", "--partition_by", "days(ordered_at),bucket(16, order_id),country"])
    assert [str(e) for e in plan.transform._partition_by] == ["day(ordered_at)", "bucket(16, order_id)", "country"]


def test_a_dry_run_into_a_table_touches_no_catalog():
    plan = plan_copy(TABLE + ["--dry-run", "--partition_by", "country"])  # the catalog cannot load
    assert plan.dry_run and plan.output == "table ns.t" and plan.format_name == "parquet"
    assert plan.table is not None and plan.table.name == "ns.t"
    assert SECRET not in repr(plan.transform._catalog)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--abort", "x"], "give exactly one of --output s3://BUCKET/PATH, --table NS.TABLE and --delta"),
        (["--abort", "x", "--table", "a.b"], "--table needs --catalog"),
        (["--abort", "x", "--output", "s3://b/p", "--catalog", "prod"], "--catalog applies only with --table"),
        (["--abort", "x", "--table", "a.b", "--catalog", "prod", "--force"], "--force applies only with --output"),
        (["--abort", "x", "--table", "a.b", "--catalog", CATALOG], "--catalog: the sql catalog sqlite:////nonexistent"),
    ],
)
def test_abort_of_a_table_copy_refuses_bad_flags(argv, says, capsys):
    assert abort_main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and SECRET not in err, err


def test_a_table_without_pyiceberg_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyiceberg" else real(name, *a))
    with pytest.raises(UsageError, match=r"^--table needs pyiceberg, .*: pip install 'beam_s3_sink\[iceberg\]'$"):
        plan_copy(TABLE)
