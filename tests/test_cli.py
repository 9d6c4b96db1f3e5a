"""The command ``beam-s3-copy`` (here ``python -m beam_s3_sink.cli``) run as a user runs it: a
subprocess against the moto server.

Each source kind (CSV, JSON Lines, Parquet, generate; local and s3://) and each format the
package has today (parquet, csv) is copied, and the exit code, the summary and the objects are
checked; bad flags, an unreadable source and a schema that does not fit the data exit with 2
and one line, with nothing written. The last test builds the sdist the way Beam's stager does
for ``--setup_file``, installs it into a fresh virtual environment and copies with it.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import os
import re
import subprocess
import sys
import venv

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import data_keys, get_bytes, list_objects, read_manifest, read_parquet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = "id:int64!,name:string,amount:decimal(12,2),at:timestamp[us,UTC]"


def cli(s3_endpoint: str, *args: str, python: str = sys.executable, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """Run the CLI; S3 credentials come from the environment (set by the s3_endpoint fixture)."""
    return subprocess.run(
        [python, "-m", "beam_s3_sink.cli", *args, "--s3_endpoint_url", s3_endpoint],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def summary(out: str) -> dict:
    """The summary table's rows: name -> value."""
    table = out[out.index("Copy finished:") :]
    return dict(re.findall(r"^  (rows|files|bytes|time|manifest)\s+(.+)$", table, re.M))


def error_line(completed: subprocess.CompletedProcess) -> str:
    """The one error line; nothing else of the CLI's, and no traceback."""
    assert "Traceback" not in completed.stderr, completed.stderr
    ours = [line for line in completed.stderr.splitlines() if line.startswith("beam-s3-copy:")]
    assert len(ours) == 1, completed.stderr
    return ours[0]


def rows_of(s3_client, bucket: str, prefix: str) -> pa.Table:
    keys = data_keys(s3_client, bucket, prefix)
    return pa.concat_tables([read_parquet(s3_client, bucket, k) for k in keys]).sort_by("id")


def expected_rows(n: int) -> list:
    utc = datetime.timezone.utc
    return [
        {
            "id": i,
            "name": None if i % 7 == 0 else f'name {i}, "quoted"\nsecond line',
            "amount": decimal.Decimal(f"{i}.25"),
            "at": datetime.datetime(2026, 1, 1, tzinfo=utc) + datetime.timedelta(seconds=i),
        }
        for i in range(n)
    ]


def write_csv(path: str, rows: list) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "name", "amount", "at"])
        for r in rows:
            writer.writerow([r["id"], "" if r["name"] is None else r["name"], r["amount"], r["at"].isoformat()])


def jsonl(rows: list) -> bytes:
    return b"".join(
        json.dumps({"id": r["id"], "name": r["name"], "amount": float(r["amount"]), "at": r["at"].isoformat()}).encode()
        + b"\n"
        for r in rows
    )


def test_help_reads_like_documentation():
    completed = subprocess.run(
        [sys.executable, "-m", "beam_s3_sink.cli", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0
    for text in (
        "--source",
        "generate:ROWS",
        "--schema",
        "--format",
        "examples:",
        "exit status",
        "--runner PortableRunner --job_endpoint",
        "--abort nightly",
    ):
        assert text in completed.stdout


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_generated_rows_copied_with_summary(s3_endpoint, s3_client, bucket, fmt):
    completed = cli(
        s3_endpoint,
        "--source",
        "generate:23456",
        "--output",
        f"s3://{bucket}/gen",
        "--format",
        fmt,
        "--max_file_size",
        "1MiB",
        "--sink_id",
        "cli-gen",
    )
    assert completed.returncode == 0, completed.stderr
    assert "order_id       int64  not null" in completed.stdout, "the schema is printed before the copy"
    table = summary(completed.stdout)
    manifest_key = "gen/_cli-gen-manifest.json"
    assert table["rows"] == "23,456" and table["manifest"] == f"s3://{bucket}/{manifest_key}"
    manifest = read_manifest(s3_client, bucket, manifest_key)
    assert manifest["rows"] == 23456 and table["files"] == str(manifest["files"])
    assert table["bytes"].startswith(f"{manifest['bytes']:,} ")
    keys = data_keys(s3_client, bucket, "gen/")
    assert len(keys) == manifest["files"] and all(k.endswith("." + fmt) for k in keys)
    if fmt == "parquet":
        assert sum(read_parquet(s3_client, bucket, k).num_rows for k in keys) == 23456
    else:
        assert sum(get_bytes(s3_client, bucket, k).count(b"\n") for k in keys) >= 23456
    assert not any(k.endswith("INCOMPLETE") for k in list_objects(s3_client, bucket))


def test_local_csv_files_with_inferred_and_given_schema(s3_endpoint, s3_client, bucket, tmp_path):
    rows = expected_rows(3000)
    write_csv(str(tmp_path / "part-1.csv"), rows[:1000])
    write_csv(str(tmp_path / "part-2.csv"), rows[1000:])
    given = cli(
        s3_endpoint, "--source", str(tmp_path / "part-*.csv"), "--schema", SCHEMA, "--output", f"s3://{bucket}/given"
    )
    assert given.returncode == 0, given.stderr
    assert summary(given.stdout)["rows"] == "3,000"
    table = rows_of(s3_client, bucket, "given/")
    assert table.schema.field("amount").type == pa.decimal128(12, 2)
    assert table.to_pylist() == rows, "quoted line breaks, NULLs, decimals and UTC timestamps arrive exactly"

    inferred = cli(s3_endpoint, "--source", str(tmp_path / "part-*.csv"), "--output", f"s3://{bucket}/inferred")
    assert inferred.returncode == 0, inferred.stderr
    assert re.search(r"^  id\s+int64$", inferred.stdout, re.M), inferred.stdout
    assert rows_of(s3_client, bucket, "inferred/").column("id").to_pylist() == list(range(3000))


def test_jsonl_on_s3_to_postgres_csv(s3_endpoint, s3_client, bucket):
    rows = expected_rows(2500)
    s3_client.put_object(Bucket=bucket, Key="in/a.jsonl", Body=jsonl(rows[:1200]))
    s3_client.put_object(Bucket=bucket, Key="in/b.jsonl", Body=jsonl(rows[1200:]))
    # float64, not decimal: the csv format has no decimal128 yet
    completed = cli(
        s3_endpoint,
        "--source",
        f"s3://{bucket}/in/*.jsonl",
        "--schema",
        SCHEMA.replace("decimal(12,2)", "float64"),
        "--output",
        f"s3://{bucket}/out",
        "--format",
        "csv",
        "--header",
    )
    assert completed.returncode == 0, completed.stderr
    assert summary(completed.stdout)["rows"] == "2,500"
    [key] = data_keys(s3_client, bucket, "out/")
    lines = list(csv.reader(io.StringIO(get_bytes(s3_client, bucket, key).decode())))
    assert lines[0] == ["id", "name", "amount", "at"]
    by_id = {int(line[0]): line for line in lines[1:]}
    assert sorted(by_id) == list(range(2500))
    assert by_id[7] == ["7", "", "7.25", "2026-01-01 00:00:07+00"]
    assert by_id[8][1] == rows[8]["name"]


def test_parquet_on_s3_with_its_own_schema_and_a_json_schema_file(s3_endpoint, s3_client, bucket, tmp_path):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    source = pa.Table.from_pylist(expected_rows(4000), schema=schema)
    for i, part in enumerate((source.slice(0, 1500), source.slice(1500))):
        buffer = io.BytesIO()
        pq.write_table(part, buffer, row_group_size=500)
        s3_client.put_object(Bucket=bucket, Key=f"pq/part-{i}.parquet", Body=buffer.getvalue())
    own = cli(
        s3_endpoint,
        "--source",
        f"s3://{bucket}/pq/*.parquet",
        "--output",
        f"s3://{bucket}/own",
        "--sink_id",
        "own",
        "--compression",
        "zstd",
    )
    assert own.returncode == 0, own.stderr
    assert rows_of(s3_client, bucket, "own/").equals(source)

    manifest = tmp_path / "schema.json"
    manifest.write_bytes(get_bytes(s3_client, bucket, "own/_own-manifest.json"))
    again = cli(
        s3_endpoint,
        "--source",
        f"s3://{bucket}/own/*.parquet",
        "--schema",
        str(manifest),
        "--output",
        f"s3://{bucket}/again",
    )
    assert again.returncode == 0, again.stderr
    assert rows_of(s3_client, bucket, "again/").equals(source)


def bad_csv(tmp_path) -> str:
    path = tmp_path / "bad.csv"
    path.write_text("id,name\n1,a\nx,b\n")
    return str(path)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("typo", "unknown flag --fromat; did you mean --format?"),
        ("format", "unknown format 'xml'"),
        ("format option", "--quote do(es) not apply to --format parquet"),
        ("schema syntax", "schema column 'id': unknown type 'integer'"),
        ("no files", "no non-empty file matches"),
        ("no bucket", "no non-empty file matches s3://no-such-bucket-"),
        ("bad value", "bad.csv: In CSV column #0: CSV conversion error to int64: invalid value 'x'"),
        ("wrong columns", "the data's columns do not match the schema: missing ['nom']; not in the schema ['name']"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(s3_endpoint, s3_client, bucket, tmp_path, case, expected):
    out = ["--output", f"s3://{bucket}/never"]
    args = {
        "typo": ["--source", "generate:10", "--fromat", "csv"],
        "format": ["--source", "generate:10", "--format", "xml"],
        "format option": ["--source", "generate:10", "--quote", "'"],
        "schema syntax": ["--source", bad_csv(tmp_path), "--schema", "id:integer"],
        "no files": ["--source", str(tmp_path / "missing-*.csv")],
        "no bucket": ["--source", f"s3://no-such-bucket-{bucket}/*.parquet"],
        "bad value": ["--source", bad_csv(tmp_path), "--schema", "id:int64,name:string"],
        "wrong columns": ["--source", bad_csv(tmp_path), "--schema", "id:string,nom:string"],
    }[case]
    completed = cli(s3_endpoint, *args, *out)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    line = error_line(completed)
    assert line.startswith("beam-s3-copy: error: ") and expected in line, line
    assert list_objects(s3_client, bucket) == {}, "nothing may be written"


def test_data_that_stops_fitting_later_fails_the_copy_with_no_data_visible(s3_endpoint, s3_client, bucket):
    rows = expected_rows(100)
    s3_client.put_object(Bucket=bucket, Key="in/a.jsonl", Body=jsonl(rows))
    s3_client.put_object(Bucket=bucket, Key="in/z.jsonl", Body=b'{"id": 1, "surprise": true}\n')
    completed = cli(
        s3_endpoint, "--source", f"s3://{bucket}/in/*.jsonl", "--schema", SCHEMA, "--output", f"s3://{bucket}/out"
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    line = error_line(completed)
    assert "field(s) ['surprise'] that are not in the schema" in line, line
    assert data_keys(s3_client, bucket, "out/") == [], "no data file may be visible"


def test_the_sdist_beam_stages_for_workers_installs_and_copies(s3_endpoint, s3_client, bucket, tmp_path):
    """What ``--setup_file ./setup.py`` gives Flink or Dataflow workers is a working package."""
    from apache_beam.runners.portability.stager import Stager

    dist = tmp_path / "dist"
    dist.mkdir()
    sdist = Stager._build_setup_package(os.path.join(ROOT, "setup.py"), str(dist))
    assert sdist.endswith(".tar.gz"), sdist

    env_dir = tmp_path / "venv"
    venv.create(str(env_dir), with_pip=True)
    python = str(env_dir / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies (Beam, pyarrow, boto3) come from this environment's site-packages, listed
    # after the fresh one's: a plain path, so its editable install of this repository is not loaded.
    dependencies = sorted(p for p in sys.path if p.endswith("site-packages"))[0]
    with open(os.path.join(site, "zz-dependencies.pth"), "w") as f:
        f.write(dependencies + "\n")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation", sdist],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [
            python,
            "-c",
            "import importlib.util, beam_s3_sink.cli; print(beam_s3_sink.cli.__file__, "
            "importlib.util.find_spec('pipelines'))",
        ],
        cwd=str(elsewhere),
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert where.returncode == 0, where.stderr
    cli_file, pipelines_spec = where.stdout.split()
    assert cli_file.startswith(site), where.stdout
    assert pipelines_spec == "None", "only beam_s3_sink is installed, not the repository's pipelines/"

    completed = subprocess.run(  # the console script that the package installs
        [
            str(env_dir / "bin" / "beam-s3-copy"),
            "--source",
            "generate:12000",
            "--output",
            f"s3://{bucket}/staged",
            "--format",
            "csv",
            "--header",
            "--sink_id",
            "staged",
            "--s3_endpoint_url",
            s3_endpoint,
        ],
        cwd=str(elsewhere),
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert summary(completed.stdout)["rows"] == "12,000"
    assert read_manifest(s3_client, bucket, "staged/_staged-manifest.json")["rows"] == 12000
    [key] = data_keys(s3_client, bucket, "staged/")
    assert get_bytes(s3_client, bucket, key).startswith(b"order_id,customer_id,")


def test_compressed_csv_and_jsonl_read_by_pyarrow_codecs(s3_endpoint, s3_client, bucket, tmp_path):
    import gzip

    rows = expected_rows(1500)
    write_csv(str(tmp_path / "plain.csv"), rows)
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress((tmp_path / "plain.csv").read_bytes()))
    completed = cli(
        s3_endpoint, "--source", str(tmp_path / "a.csv.gz"), "--schema", SCHEMA, "--output", f"s3://{bucket}/csvgz"
    )
    assert completed.returncode == 0, completed.stderr
    assert rows_of(s3_client, bucket, "csvgz/").to_pylist() == rows
    with pa.CompressedOutputStream(str(tmp_path / "b.jsonl.zst"), "zstd") as out:
        out.write(jsonl(rows))
    completed = cli(
        s3_endpoint,
        "--source",
        str(tmp_path / "b.jsonl.zst"),
        "--schema",
        SCHEMA.replace("decimal(12,2)", "float64"),
        "--output",
        f"s3://{bucket}/jsonzst",
    )
    assert completed.returncode == 0, completed.stderr
    assert rows_of(s3_client, bucket, "jsonzst/").column("id").to_pylist() == list(range(1500))


def test_a_parquet_file_that_does_not_fit_fails_naming_the_file_and_the_column(
    s3_endpoint, s3_client, bucket, tmp_path
):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    good = pa.Table.from_pylist(expected_rows(300), schema=schema)
    pq.write_table(good, tmp_path / "part-0.parquet", row_group_size=100)
    bad = good.set_column(2, "amount", pa.array(["x"] * good.num_rows))
    pq.write_table(bad, tmp_path / "part-1.parquet", row_group_size=100)
    completed = cli(s3_endpoint, "--source", str(tmp_path / "part-*.parquet"), "--output", f"s3://{bucket}/out")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    line = error_line(completed)
    assert "part-1.parquet" in line and "column 'amount' is string in the data" in line, line
    assert "decimal128(12, 2)" in line, line
    assert data_keys(s3_client, bucket, "out/") == [], "no data file may be visible"


def test_progress_line_shows_percent_rate_and_time_left_against_the_total(tmp_path):
    import time as clock

    from beam_s3_sink.cli.progress import ProgressLine, RowCounter

    counter = RowCounter(str(tmp_path))
    counter.setup()
    out = io.StringIO()
    with ProgressLine(str(tmp_path), out=out, log_every=0.1, total_rows=1000):
        counter.add(250)
        counter.flush()
        clock.sleep(0.5)
    lines = out.getvalue().splitlines()
    assert lines and re.fullmatch(
        r"progress: 25% \(250 of 1,000 rows\), [\d,]+ rows/s, \d+ s elapsed, "
        r"about \d+ s left",
        lines[0],
    ), lines
    out = io.StringIO()
    with ProgressLine(str(tmp_path), out=out, log_every=0.1, total_bytes=10_000):
        counter.add(10, 5000)
        counter.flush()
        clock.sleep(0.5)
    assert "progress: 50% (5.00 kB of 10.0 kB, 260 rows)" in out.getvalue(), out.getvalue()
