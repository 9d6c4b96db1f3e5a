"""The command ``beam-s3-copy`` (here ``python -m beam_s3_sink.cli``) run as a user runs it: a
subprocess against the moto server.

Each source kind (CSV, JSON Lines, Parquet, generate; local and s3://) and each format the
package has today (parquet, csv) is copied, and the exit code, the summary and the objects are
checked; bad flags, an unreadable source and a schema that does not fit the data exit with 2
and one line, with nothing written. The last test builds the sdist the way Beam's stager does
for ``--setup_file``, installs it into a fresh virtual environment and copies with it. The
layout flags (``--partition_by``, ``--keep_partition_columns``, ``--num_batches``,
``--if_exists``) and ``--row_group_bytes`` each copy for real, and the objects that land (keys,
columns, rows, row groups' encoded bytes) are read back.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import os
import re
import shlex
import subprocess
import sys
import venv

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import data_keys, get_bytes, list_objects, pending_uploads, read_manifest, read_parquet
from pipelines.s3servers import ACCESS_KEY, REGION, SECRET_KEY

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
    assert "part-1.parquet" in line and "column 'amount'" in line and "holds string" in line, line
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


# -- the layout flags and --row_group_bytes (issue 28): real runs against moto ------------------
def manifest_rows(s3_client, bucket: str, key: str) -> dict:
    """The manifest's data files: s3:// URL -> rows."""
    return {e["url"]: e["meta"]["record_count"] for e in read_manifest(s3_client, bucket, key)["entries"]}


def parquet_meta(s3_client, bucket: str, key: str) -> pq.FileMetaData:
    return pq.ParquetFile(io.BytesIO(get_bytes(s3_client, bucket, key))).metadata


@pytest.mark.parametrize("source", ["generate", "parquet"])
def test_row_group_bytes_bounds_the_encoded_row_groups(s3_endpoint, s3_client, bucket, tmp_path, source):
    """``--row_group_bytes 64KiB``: row groups of about 64 KiB as stored (compressed), whatever
    their rows; from rows (generate) and from one Parquet row group of 100,000 rows."""
    target, limit = 64 * 1024, 2**20
    if source == "generate":
        args, rows = ["--source", "generate:60000"], 60000
    else:
        rows = 100_000
        table = pa.table(
            {
                "id": pa.array(range(rows), pa.int64()),
                "name": [f"name {i * 7919 % 100_003}" for i in range(rows)],
                "value": [i * 0.37 for i in range(rows)],
            }
        )
        pq.write_table(table, tmp_path / "big.parquet", row_group_size=rows)
        args = ["--source", str(tmp_path / "big.parquet")]
    completed = cli(
        s3_endpoint,
        *args,
        "--output",
        f"s3://{bucket}/rg",
        "--row_group_bytes",
        "64KiB",
        "--max_file_size",
        "1MiB",
    )
    assert completed.returncode == 0, completed.stderr
    sizes = list_objects(s3_client, bucket, "rg/")
    groups = []  # (rows, encoded bytes) of every row group of every file
    for key in data_keys(s3_client, bucket, "rg/"):
        meta = parquet_meta(s3_client, bucket, key)
        these = [
            (
                meta.row_group(i).num_rows,
                sum(meta.row_group(i).column(c).total_compressed_size for c in range(meta.num_columns)),
            )
            for i in range(meta.num_row_groups)
        ]
        assert sizes[key] <= limit + max(size for _, size in these), (key, sizes[key])
        groups += these
    encoded = sorted(size for _, size in groups)
    assert sum(n for n, _ in groups) == rows and len(groups) >= 10, groups
    assert encoded[-1] <= target * 1.25, f"a row group is {encoded[-1]:,} bytes, past 64 KiB: {groups}"
    assert encoded[len(encoded) // 2] >= target * 0.75, f"row groups well under 64 KiB: {groups}"
    assert max(n for n, _ in groups) < 20_000, "64KiB is bytes, not 65,536 rows"


def test_row_group_size_the_old_spelling_fails_naming_the_new_flag(s3_endpoint, s3_client, bucket):
    completed = cli(s3_endpoint, "--source", "generate:10", "--output", f"s3://{bucket}/p", "--row_group_size", "10000")
    assert completed.returncode == 2, completed.stdout + completed.stderr
    line = error_line(completed)
    assert "--row_group_size is gone" in line and "--row_group_bytes SIZE" in line, line
    assert list_objects(s3_client, bucket) == {}


def partition_rows(n: int) -> list:
    regions = ("north", "south", "north/east")
    return [
        {"id": i, "day": datetime.date(2026, 1, 1 + i % 2), "region": regions[i % 3], "amount": i * 1.5}
        for i in range(n)
    ]


@pytest.mark.parametrize("keep", [False, True], ids=["columns-in-path", "keep_partition_columns"])
def test_partition_by_writes_hive_directories(s3_endpoint, s3_client, bucket, tmp_path, keep):
    rows = partition_rows(600)
    with open(tmp_path / "in.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "day", "region", "amount"])
        writer.writerows([r["id"], r["day"].isoformat(), r["region"], r["amount"]] for r in rows)
    completed = cli(
        s3_endpoint,
        "--source",
        str(tmp_path / "in.csv"),
        "--schema",
        "id:int64!,day:date32,region:string,amount:float64",
        "--output",
        f"s3://{bucket}/hive",
        "--partition_by",
        "day,region",
        *(["--keep_partition_columns"] if keep else []),
        "--sink_id",
        "parts",
    )
    assert completed.returncode == 0, completed.stderr
    found = {}  # (day, region) as the path says -> ids in its files
    for key in data_keys(s3_client, bucket, "hive/"):
        match = re.fullmatch(r"hive/day=([\d-]+)/region=([^/]+)/parts-[0-9a-f]{16}-\d{4}\.parquet", key)
        assert match, key
        day, region = match.group(1), match.group(2).replace("%2F", "/")
        table = read_parquet(s3_client, bucket, key)
        if keep:
            assert table.column_names == ["id", "day", "region", "amount"]
            assert set(table.column("day").to_pylist()) == {datetime.date.fromisoformat(day)}
            assert set(table.column("region").to_pylist()) == {region}
        else:
            assert table.column_names == ["id", "amount"], "the partition columns are in the path only"
        found.setdefault((day, region), set()).update(table.column("id").to_pylist())
    expected = {}
    for r in rows:
        expected.setdefault((r["day"].isoformat(), r["region"]), set()).add(r["id"])
    assert found == expected, "six directories, each with exactly its rows ('/' escaped as %2F)"
    manifest = manifest_rows(s3_client, bucket, "hive/_parts-manifest.json")
    assert sum(manifest.values()) == 600 and any("/region=north%2Feast/" in url for url in manifest)


def batch_ids(s3_client, bucket: str, prefix: str, sink_id: str) -> dict:
    """batch number -> (order ids, file numbers) of a --num_batches copy's files."""
    batches: dict = {}
    for key in data_keys(s3_client, bucket, prefix):
        match = re.fullmatch(rf"{re.escape(prefix)}{sink_id}-batch-(\d{{4}})-(\d{{4}})\.parquet", key)
        if match:
            ids, files = batches.setdefault(int(match.group(1)), (set(), set()))
            ids.update(read_parquet(s3_client, bucket, key).column("order_id").to_pylist())
            files.add(int(match.group(2)))
    return batches


def test_num_batches_files_per_batch_and_if_exists_append_keeps_what_is_there(s3_endpoint, s3_client, bucket):
    args = ["--source", "generate:30000", "--output", f"s3://{bucket}/batches", "--num_batches", "3"]
    first = cli(s3_endpoint, *args, "--max_file_size", "256KiB", "--sink_id", "first")
    assert first.returncode == 0, first.stderr
    batches = batch_ids(s3_client, bucket, "batches/", "first")
    assert sorted(batches) == [0, 1, 2], "files ID-batch-<bbbb>-<nnnn>, one batch per number"
    assert sorted(len(ids) for ids, _ in batches.values())[0] > 5000, "a hash spreads the rows"
    assert set().union(*(ids for ids, _ in batches.values())) == set(range(30000))
    assert all(files == set(range(1, len(files) + 1)) for _, files in batches.values())
    assert any(len(files) >= 2 for _, files in batches.values()), "a batch starts a new file past 256KiB"
    before = list_objects(s3_client, bucket, "batches/")

    again = cli(s3_endpoint, *args, "--if_exists", "append", "--sink_id", "second")
    assert again.returncode == 0, again.stderr
    after = list_objects(s3_client, bucket, "batches/")
    assert {k: after.get(k) for k in before} == before, "append keeps every object that was there"
    second = batch_ids(s3_client, bucket, "batches/", "second")
    assert {b: ids for b, (ids, _) in second.items()} == {b: ids for b, (ids, _) in batches.items()}, (
        "the same data puts the same rows in the same batches"
    )
    assert sum(manifest_rows(s3_client, bucket, "batches/_second-manifest.json").values()) == 30000


def test_if_exists_error_refuses_and_replace_removes_the_old_objects_after_commit(s3_endpoint, s3_client, bucket):
    out = ["--output", f"s3://{bucket}/p"]
    assert cli(s3_endpoint, "--source", "generate:500", *out, "--sink_id", "old").returncode == 0
    s3_client.put_object(Bucket=bucket, Key="p/notes/readme.txt", Body=b"not a copy's")
    old = list_objects(s3_client, bucket, "p/")

    refused = cli(s3_endpoint, "--source", "generate:100", *out, "--sink_id", "new")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = error_line(refused)
    assert f"s3://{bucket}/p is not empty: {len(old)} object(s) that copy 'new' did not write" in line, line
    assert "Copy 'old' has committed there" in line and "--if_exists append or replace" in line, line
    assert list_objects(s3_client, bucket, "p/") == old, "refused: nothing written"

    s3_client.put_object(Bucket=bucket, Key="in/a.jsonl", Body=jsonl(expected_rows(50)))
    s3_client.put_object(Bucket=bucket, Key="in/z.jsonl", Body=b'{"id": 1, "surprise": true}\n')
    source = ["--source", f"s3://{bucket}/in/*.jsonl", "--schema", SCHEMA]
    failed = cli(s3_endpoint, *source, *out, "--if_exists", "replace", "--sink_id", "failed")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    left = list_objects(s3_client, bucket, "p/")
    assert {k: left.get(k) for k in old} == old, "a replace that fails leaves the old objects in place"
    # The read failed before CopyToS3's completion step ran, so, as for a killed copy, its
    # sentinel and the path's claim stay until --abort removes them (nothing else).
    assert cli(s3_endpoint, "--abort", "failed", *out).returncode == 0
    assert list_objects(s3_client, bucket, "p/") == old

    replaced = cli(s3_endpoint, "--source", "generate:100", *out, "--sink_id", "new", "--if_exists", "replace")
    assert replaced.returncode == 0, replaced.stderr
    now = list_objects(s3_client, bucket, "p/")
    assert all(k.startswith(("p/new-", "p/_new-manifest.json")) for k in now), sorted(now)
    assert sum(manifest_rows(s3_client, bucket, "p/_new-manifest.json").values()) == 100


def test_the_partitioned_example_of_the_docs_writes_the_files_it_shows(s3_endpoint, s3_client, bucket):
    """docs/cli.md, "Partitions, batches and a path that is not empty": its command, run against
    moto, writes the files (and rows) its output lists."""
    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as f:
        text = f.read()
    part = text[text.index("## Partitions, batches and a path that is not empty") :]
    block = re.search(r"^```sh\n(.*?)^```$", part, re.M | re.S).group(1)
    command, shown = "", []
    for line in block.splitlines():
        if line.startswith("$ ") or command.endswith("\\"):
            command = command.rstrip("\\") + " " + line.lstrip("$ ").strip()
        else:
            shown.append(line)
    args = shlex.split(command.replace("s3://my-bucket/", f"s3://{bucket}/my-bucket/"))
    assert args[0] == "beam-s3-copy", args
    args[args.index("--s3_endpoint_url") : args.index("--s3_endpoint_url") + 2] = []  # cli() adds moto's
    completed = cli(s3_endpoint, *args[1:])
    assert completed.returncode == 0, completed.stderr
    files = manifest_rows(s3_client, bucket, "my-bucket/exports/orders/_nightly-manifest.json")
    listed = re.findall(r"^\s+([\d,]+) rows\s+[\d,]+ B  (s3://\S+)$", "\n".join(shown), re.M)
    assert len(listed) >= 5, shown
    for rows, url in listed:
        assert files[url.replace("s3://my-bucket/", f"s3://{bucket}/my-bucket/")] == int(rows.replace(",", ""))
    table = summary(completed.stdout)
    assert f"  files     {table['files']}" in shown and f"  rows      {table['rows']}" in shown


# -- --table NS.TABLE --catalog ...: CopyToIceberg from the command line, on real catalogs ---------

TABLE_SCHEMA = SCHEMA + ",region:string"
REGIONS = ("eu", "us", "ap")


def table_cli(*args: str, env: dict = None) -> subprocess.CompletedProcess:
    """Run the CLI with no S3 flag: the catalog's ``s3.*`` properties reach its store."""
    return subprocess.run(
        [sys.executable, "-m", "beam_s3_sink.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=None if env is None else {**os.environ, **env},
    )


def table_summary(out: str) -> dict:
    """The table summary's rows: name -> value."""
    table = out[out.index("Copy finished:") :]
    return dict(re.findall(r"^  (table|snapshot|rows|files|bytes|replaced|time|metadata)\s+(.+)$", table, re.M))


def region_rows(ids) -> list:
    by_id = {r["id"]: r for r in expected_rows(max(ids) + 1)}
    return [dict(by_id[i], region=REGIONS[i % 3]) for i in ids]


def write_region_jsonl(path, rows: list) -> str:
    lines = [json.loads(line) for line in jsonl(rows).splitlines()]
    with open(path, "w", encoding="utf-8") as f:
        for line, row in zip(lines, rows):
            f.write(json.dumps(dict(line, region=row["region"])) + "\n")
    return str(path)


def catalog_file(tmp_path, catalog) -> str:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog.props))
    return f"@{path}"


def table_name(prefix: str = "cli") -> str:
    import uuid

    return f"{prefix}.t{uuid.uuid4().hex[:10]}"


def test_table_append_rerun_overwrite_partitions_overwrite_read_back_exactly(iceberg_sqlite, tmp_path):
    """Each state of the table, read back by pyiceberg, is exactly the rows copied; the summary
    names the table and the snapshot that holds them."""
    from iceberg_catalogs import load, read_pyiceberg

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    dest = ["--schema", TABLE_SCHEMA, "--table", name, "--catalog", catalog]

    def read() -> list:
        return read_pyiceberg(iceberg_sqlite, name).sort_by("id").to_pylist()

    first = region_rows(range(300))
    source = write_region_jsonl(tmp_path / "first.jsonl", first)
    done = table_cli("--source", source, *dest, "--partition_by", "region", "--sink_id", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    table = load(iceberg_sqlite).load_table(name)
    snapshot = table.current_snapshot().snapshot_id
    shown = table_summary(done.stdout)
    assert shown["table"].startswith(f"{name} (sql catalog sqlite:///"), shown
    assert shown["snapshot"] == f"{snapshot} (append)" and shown["rows"] == "300" and shown["files"] == "3"
    assert shown["metadata"] == table.metadata_location
    assert f"to table {name} (sql catalog" in done.stdout and ", mode append, as parquet" in done.stdout
    assert read() == first
    assert [f.name for f in table.spec().fields] == ["region"]

    again = table_cli("--source", source, *dest, "--partition_by", "region", "--sink_id", "a")
    assert again.returncode == 0, again.stderr
    assert table_summary(again.stdout)["snapshot"] == (
        f"{snapshot} (append, committed by an earlier run of sink id a: nothing new)"
    )
    assert len(load(iceberg_sqlite).load_table(name).snapshots()) == 1 and read() == first

    eu = [dict(r, region="eu") for r in region_rows(range(1000, 1020))]
    source = write_region_jsonl(tmp_path / "eu.jsonl", eu)
    # no --partition_by: a copy into an existing table takes its partitions
    done = table_cli("--source", source, *dest, "--mode", "overwrite_partitions", "--sink_id", "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert table_summary(done.stdout)["replaced"] == "100 rows in 1 file(s)"
    expected = sorted([r for r in first if r["region"] != "eu"] + eu, key=lambda r: r["id"])
    assert read() == expected

    last = region_rows(range(2000, 2005))
    source = write_region_jsonl(tmp_path / "last.jsonl", last)
    done = table_cli("--source", source, *dest, "--mode", "overwrite", "--sink_id", "c")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = table_summary(done.stdout)
    assert shown["rows"] == "5" and shown["replaced"] == f"{len(expected)} rows in 3 file(s)", shown
    assert read() == last
    table = load(iceberg_sqlite).load_table(name)
    assert table.current_snapshot().summary["beam-s3-sink.sink-id"] == "c"
    assert shown["snapshot"] == f"{table.current_snapshot().snapshot_id} (overwrite)"
    bucket = iceberg_sqlite.warehouse[len("s3://") :].split("/")[0]
    assert pending_uploads(iceberg_sqlite.s3.make_client(), bucket) == []


def test_table_partitioned_by_transforms_from_the_command_line(iceberg_sqlite, tmp_path):
    """--partition_by with transforms creates the table's spec; a later copy without it takes
    the table's spec, and one naming another spec is refused."""
    from iceberg_catalogs import load, read_pyiceberg

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    dest = ["--schema", TABLE_SCHEMA, "--table", name, "--catalog", catalog]
    first = region_rows(range(60))
    source = write_region_jsonl(tmp_path / "first.jsonl", first)
    done = table_cli("--source", source, *dest, "--partition_by", "bucket(4, id),region", "--sink_id", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    table = load(iceberg_sqlite).load_table(name)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("id_bucket", "bucket[4]"),
        ("region", "identity"),
    ]
    assert table_summary(done.stdout)["files"] == "12"  # 4 buckets of 3 regions
    more = region_rows(range(100, 130))
    done = table_cli("--source", write_region_jsonl(tmp_path / "more.jsonl", more), *dest, "--sink_id", "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert read_pyiceberg(iceberg_sqlite, name).sort_by("id").to_pylist() == first + more
    refused = table_cli("--source", source, *dest, "--partition_by", "region", "--sink_id", "c")
    assert refused.returncode != 0 and "table" in refused.stderr and "bucket(4, id),region" in refused.stderr, (
        refused.stderr
    )


def test_table_copy_into_the_rest_catalog_with_sigv4(iceberg_rest):
    """SeaweedFS's REST catalog (Amazon S3 Tables' protocol), the catalog given inline: the
    generated orders land partitioned by country; no secret is shown."""
    from iceberg_catalogs import load, read_pyiceberg

    name = table_name("clirest")
    done = table_cli(
        "--source",
        "generate:3000",
        "--table",
        name,
        "--catalog",
        json.dumps(iceberg_rest.props),
        "--partition_by",
        "country",
        "--max_file_size",
        "1MiB",
        "--sink_id",
        "rest",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert iceberg_rest.s3.secret_access_key not in done.stdout + done.stderr
    shown = table_summary(done.stdout)
    table = load(iceberg_rest).load_table(name)
    assert shown["snapshot"] == f"{table.current_snapshot().snapshot_id} (append)" and shown["rows"] == "3,000"
    assert shown["table"] == f"{name} (rest catalog {iceberg_rest.props['uri']})"
    read = read_pyiceberg(iceberg_rest, name)
    assert read.num_rows == 3000 and sorted(read.column("order_id").to_pylist()) == list(range(3000))
    files = table.inspect.files().to_pylist()
    assert int(shown["files"]) == len(files) == len({f["partition"]["country"] for f in files})


def test_table_copy_into_a_catalog_that_pyiceberg_resolves_by_name(s3_endpoint, s3_client, bucket, tmp_path):
    """--catalog NAME: pyiceberg finds the catalog's properties (here in PYICEBERG_CATALOG__* variables)."""
    from iceberg_catalogs import read_pyiceberg

    props = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/named.db",
        "warehouse": f"s3://{bucket}/warehouse",
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION,
        "s3.path-style-access": "true",
    }
    env = {f"PYICEBERG_CATALOG__LAKE__{k.upper().replace('.', '__').replace('-', '_')}": v for k, v in props.items()}
    name = table_name()
    done = table_cli("--source", "generate:500", "--table", name, "--catalog", "lake", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert table_summary(done.stdout)["table"] == f"{name} (catalog 'lake')"
    assert read_pyiceberg(props, name, name="lake").num_rows == 500
    assert SECRET_KEY not in done.stdout + done.stderr


def test_table_refusals_exit_2_naming_the_flag_and_a_failed_copy_leaves_the_table(iceberg_sqlite, tmp_path):
    """A copy that does not fit the table, other partitions, or an unreachable catalog: exit 2,
    one line naming the flag, nothing written; a copy that fails while it runs: exit 1, the table
    unchanged. No secret of the catalog in any of it, --verbose log included."""
    from iceberg_catalogs import load

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    secret = iceberg_sqlite.s3.secret_access_key
    source = write_region_jsonl(tmp_path / "in.jsonl", region_rows(range(50)))
    dest = ["--table", name, "--catalog", catalog]
    assert table_cli("--source", source, "--schema", TABLE_SCHEMA, *dest, "--partition_by", "region").returncode == 0
    before = load(iceberg_sqlite).load_table(name).current_snapshot().snapshot_id

    cases = {
        "a column the table lacks": (
            ["--schema", SCHEMA + ",region:string,extra:int32"],
            f"--table {name}: the copy does not fit the table: column 'extra' (int32) of the copy is not in the table",
        ),
        "a mistyped column": (
            ["--schema", "id:int64!,name:string,amount:float64,at:timestamp[us,UTC],region:string"],
            "column 'amount' is decimal(12, 2) in the table, double (Arrow double) in the copy",
        ),
        "other partitions": (
            ["--schema", TABLE_SCHEMA, "--partition_by", "name"],
            f"--partition_by name: table {name} is partitioned by region; give --partition_by region",
        ),
    }
    for case, (flags, says) in cases.items():
        done = table_cli("--source", source, *dest, *flags)
        assert done.returncode == 2, (case, done.stdout + done.stderr)
        line = error_line(done)
        assert says in line, (case, line)
    unreachable = json.dumps(
        {
            "type": "sql",
            "uri": "postgresql+psycopg://me:pg-password-never-shown@127.0.0.1:1/catalog",
            "token": "token-never-shown",
        }
    )
    done = table_cli("--source", source, "--schema", TABLE_SCHEMA, "--table", name, "--catalog", unreachable)
    assert done.returncode == 2
    line = error_line(done)
    assert line.startswith("beam-s3-copy: error: --catalog: the sql catalog postgresql+psycopg://me:***@127.0.0.1:1/")
    assert "never-shown" not in done.stdout + done.stderr

    bad = tmp_path / "bad"
    bad.mkdir()
    write_region_jsonl(bad / "a.jsonl", region_rows(range(50)))
    (bad / "b.jsonl").write_text('{"id": 99, "surprise": true}\n')
    inline = json.dumps(iceberg_sqlite.props)
    done = table_cli(
        "--source", str(bad / "*.jsonl"), "--schema", TABLE_SCHEMA, "--table", name, "--catalog", inline, "--verbose"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [
        line for line in done.stderr.splitlines() if line.startswith("beam-s3-copy:")
    ]  # --verbose: and Beam's log
    assert "field(s) ['surprise'] that are not in the schema" in line, line
    assert secret not in done.stdout + done.stderr, "the --verbose log shows no secret"
    table = load(iceberg_sqlite).load_table(name)
    assert table.current_snapshot().snapshot_id == before and table.scan().to_arrow().num_rows == 50


def test_schema_evolution_flag_adds_the_column_in_the_copys_commit(iceberg_sqlite, tmp_path):
    """Without --schema_evolution a new column is refused (exit 2, naming the flag); with it, the
    column is added in the copy's one commit and the old rows read it as null."""
    from iceberg_catalogs import load

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    source = write_region_jsonl(tmp_path / "in.jsonl", region_rows(range(20)))
    dest = ["--table", name, "--catalog", catalog]
    assert table_cli("--source", source, "--schema", TABLE_SCHEMA, *dest).returncode == 0
    more = tmp_path / "more.jsonl"
    with open(source, encoding="utf-8") as f:
        more.write_text("".join(json.dumps(dict(json.loads(line), note="n")) + "\n" for line in f))
    grown = ["--source", str(more), "--schema", TABLE_SCHEMA + ",note:string", *dest]
    refused = table_cli(*grown)
    assert refused.returncode == 2 and "--schema_evolution add_columns" in error_line(refused), refused.stderr
    done = table_cli(*grown, "--schema_evolution", "add_columns")
    assert done.returncode == 0, done.stdout + done.stderr
    table = load(iceberg_sqlite).load_table(name)
    assert len(table.snapshots()) == 2 and table.schema().find_field("note").optional
    notes = table.scan().to_arrow().column("note").to_pylist()
    assert notes.count("n") == 20 and notes.count(None) == 20
    misplaced = table_cli(
        "--source", source, "--schema", TABLE_SCHEMA, "--output", "s3://b/p", "--schema_evolution", "add_columns"
    )
    assert misplaced.returncode == 2 and "--schema_evolution applies only with --table" in error_line(misplaced)


def test_abort_of_a_table_copy_and_a_dry_run(iceberg_sqlite, tmp_path):
    """--abort SINK_ID --table removes a crashed copy's pending uploads and uncommitted files, and
    refuses a committed copy; --dry-run checks the rows and touches no catalog."""
    from iceberg_catalogs import load

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    source = write_region_jsonl(tmp_path / "in.jsonl", region_rows(range(20)))
    dest = ["--table", name, "--catalog", catalog]
    dry = table_cli("--source", source, "--schema", TABLE_SCHEMA, *dest, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"Dry run (nothing written to table {name}): 20 rows checked, 0 would fail" in dry.stdout
    assert not load(iceberg_sqlite).table_exists(name), "a dry run creates no table"

    assert table_cli("--source", source, "--schema", TABLE_SCHEMA, *dest, "--sink_id", "base").returncode == 0
    table = load(iceberg_sqlite).load_table(name)
    bucket, _, path = table.location()[len("s3://") :].partition("/")
    client = iceberg_sqlite.s3.make_client()
    orphan = f"{path}/data/crashed-0123456789abcdef-0001.parquet"
    client.put_object(Bucket=bucket, Key=orphan, Body=b"completed, never committed")
    client.create_multipart_upload(Bucket=bucket, Key=f"{path}/data/crashed-0123456789abcdef-0002.parquet")
    done = table_cli("--abort", "crashed", *dest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deleted 1 object(s), aborted 1 pending upload(s)" in done.stdout
    assert f"  deleted s3://{bucket}/{orphan}" in done.stdout
    assert pending_uploads(client, bucket) == []
    refused = table_cli("--abort", "base", *dest)
    assert refused.returncode == 2
    assert f"copy 'base' into {name} committed snapshot {table.current_snapshot().snapshot_id}" in error_line(refused)
    assert load(iceberg_sqlite).load_table(name).scan().to_arrow().num_rows == 20


def test_a_rerun_whose_snapshot_expired_leaves_the_table_readable(iceberg_sqlite, tmp_path):
    """Once a copy's snapshot has expired its rerun cannot tell that it committed (so it commits
    again), but its clean-up must not delete the files the table still holds."""
    from iceberg_catalogs import load, read_pyiceberg

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    dest = ["--schema", TABLE_SCHEMA, "--table", name, "--catalog", catalog]
    first = write_region_jsonl(tmp_path / "a.jsonl", region_rows(range(10)))
    second = write_region_jsonl(tmp_path / "b.jsonl", region_rows(range(10, 20)))
    assert table_cli("--source", first, *dest, "--sink_id", "a").returncode == 0
    assert table_cli("--source", second, *dest, "--sink_id", "b").returncode == 0
    table = load(iceberg_sqlite).load_table(name)
    [a] = [s for s in table.snapshots() if s.summary["beam-s3-sink.sink-id"] == "a"]
    table.maintenance.expire_snapshots().by_id(a.snapshot_id).commit()
    again = table_cli("--source", first, *dest, "--sink_id", "a")
    assert again.returncode == 0, again.stdout + again.stderr
    ids = sorted(read_pyiceberg(iceberg_sqlite, name).column("id").to_pylist())
    assert ids == sorted(list(range(20)) + list(range(10))), "every file the table references is still there"


def test_max_bad_rows_leaves_values_the_format_cannot_encode_out_and_writes_them(s3_endpoint, s3_client, bucket):
    rows = expected_rows(200)
    for i in (5, 90, 170):
        rows[i]["name"] = f"NUL\x00 {i}"  # PostgreSQL's CSV cannot hold a NUL character
    s3_client.put_object(Bucket=bucket, Key="in/a.jsonl", Body=jsonl(rows))
    base = ["--source", f"s3://{bucket}/in/a.jsonl", "--schema", SCHEMA, "--format", "csv"]
    completed = cli(
        s3_endpoint,
        *base,
        "--output",
        f"s3://{bucket}/out",
        "--sink_id",
        "dl",
        "--max_bad_rows",
        "5",
        "--bad_rows",
        f"s3://{bucket}/rejects",
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert summary(completed.stdout)["rows"] == "197"
    assert f"  bad rows  3 left out (written to s3://{bucket}/rejects)" in completed.stdout
    assert read_manifest(s3_client, bucket, "out/_dl-manifest.json")["bad_rows"] == 3
    (key,) = data_keys(s3_client, bucket, "rejects/")
    letters = [json.loads(line) for line in get_bytes(s3_client, bucket, key).decode().splitlines()]
    assert sorted(json.loads(b["element"])["id"] for b in letters) == [5, 90, 170]
    assert {(b["column"], b["sink_id"], b["unit"]) for b in letters} == {("name", "dl", None)}
    assert all("cannot encode column 'name'" in b["reason"] for b in letters)

    failed = cli(
        s3_endpoint,
        *base,
        "--output",
        f"s3://{bucket}/out2",
        "--max_bad_rows",
        "2",
        "--bad_rows",
        f"s3://{bucket}/rejects2",
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "max_bad_rows=2" in error_line(failed)
    assert data_keys(s3_client, bucket, "out2/") == [] and data_keys(s3_client, bucket, "rejects2/") == []
    assert pending_uploads(s3_client, bucket) == []


def test_max_bad_rows_leaves_source_values_that_do_not_fit_out(s3_endpoint, s3_client, bucket, tmp_path):
    """Two CSV files: a small one with a bad value in its first block (which the plan reads), and
    one of three reader blocks (quoted line breaks in them) whose first block fits and whose later
    ones hold a bad value, a decimal too large and a NULL in a NOT NULL column. The good rows
    land exactly, each bad one is a dead letter naming its column and value; one more bad row
    than the limit fails the copy, leaving nothing."""
    rows = expected_rows(40_000)
    bad = {
        3: ("amount", "abc"),
        20_000: ("at", "not a time"),
        30_000: ("amount", "12345678901234.00"),
        39_000: ("id", ""),
    }
    for name, part in (("a.csv", rows[:10]), ("b.csv", rows[10:])):
        path = str(tmp_path / name)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "name", "amount", "at"])
            for r in part:
                cells = {
                    "id": r["id"],
                    "name": "" if r["name"] is None else r["name"],
                    "amount": r["amount"],
                    "at": r["at"].isoformat(),
                }
                if r["id"] in bad:
                    cells[bad[r["id"]][0]] = bad[r["id"]][1]
                writer.writerow(cells.values())
        s3_client.upload_file(path, bucket, f"in/{name}")
    assert os.path.getsize(path) > 2 * 2**20, "three blocks of the reader"
    base = ["--source", f"s3://{bucket}/in/*.csv", "--schema", SCHEMA]
    completed = cli(
        s3_endpoint, *base, "--output", f"s3://{bucket}/out", "--sink_id", "src", "--max_bad_rows", "4",
        "--bad_rows", f"s3://{bucket}/rejects",
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"  bad rows  4 left out (written to s3://{bucket}/rejects)" in completed.stdout
    got = rows_of(s3_client, bucket, "out/")
    assert got.column("id").to_pylist() == [i for i in range(40_000) if i not in bad]
    assert got.column("name").to_pylist() == [r["name"] for r in rows if r["id"] not in bad]
    assert got.column("amount").to_pylist() == [r["amount"] for r in rows if r["id"] not in bad]
    (key,) = data_keys(s3_client, bucket, "rejects/")
    letters = [json.loads(line) for line in get_bytes(s3_client, bucket, key).decode().splitlines()]
    by_name = {json.loads(b["element"])["name"]: b for b in letters}
    assert sorted(by_name) == sorted(rows[i]["name"] for i in bad)
    for i, (column, text) in bad.items():
        letter = by_name[rows[i]["name"]]
        element = json.loads(letter["element"])
        assert letter["column"] == column, letter
        if column == "id":
            assert element["id"] is None and "not nullable" in letter["reason"], letter
        else:
            assert element[column] == text and repr(text) in letter["reason"], letter
            assert element["id"] == i, "the values that fit arrive converted"

    failed = cli(s3_endpoint, *base, "--output", f"s3://{bucket}/out2", "--max_bad_rows", "3")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "max_bad_rows=3" in error_line(failed)
    assert data_keys(s3_client, bucket, "out2/") == [] and pending_uploads(s3_client, bucket) == []


def test_max_bad_rows_leaves_json_lines_that_do_not_fit_out_but_not_a_broken_file(s3_endpoint, s3_client, bucket):
    lines = [
        b'{"id": 1, "name": "a", "amount": 1.5, "at": "2026-01-01T00:00:00Z"}',
        b'{"id": "two", "name": "b", "amount": 2.5, "at": "2026-01-01T00:00:00Z"}',
        b'{"id": 3, "name": "c", "amount": 3.5, "at": "2026-01-01T00:00:00Z", "extra": 1}',
        b'{"name": "d"}',
        b'{"id": 5, "name": "e", "amount": 5.5, "at": "2026-01-01T00:00:00Z"}',
    ]
    s3_client.put_object(Bucket=bucket, Key="in/a.jsonl", Body=b"\n".join(lines) + b"\n")
    base = ["--source", f"s3://{bucket}/in/a.jsonl", "--schema", SCHEMA, "--max_bad_rows", "3"]
    completed = cli(s3_endpoint, *base, "--output", f"s3://{bucket}/out", "--bad_rows", f"s3://{bucket}/rejects")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert rows_of(s3_client, bucket, "out/").column("id").to_pylist() == [1, 5]
    (key,) = data_keys(s3_client, bucket, "rejects/")
    letters = [json.loads(line) for line in get_bytes(s3_client, bucket, key).decode().splitlines()]
    assert sorted((json.loads(b["element"])["name"], b["column"]) for b in letters) == [
        ("b", "id"),
        ("c", "extra"),
        ("d", "id"),
    ]

    s3_client.put_object(Bucket=bucket, Key="in/broken.jsonl", Body=b"\n".join([lines[0], b"not json", lines[4]]))
    broken = cli(s3_endpoint, "--source", f"s3://{bucket}/in/broken.jsonl", "--schema", SCHEMA, "--max_bad_rows", "3",
                 "--output", f"s3://{bucket}/out3")  # fmt: skip
    assert broken.returncode == 2 and "a line is not a JSON object" in error_line(broken), broken.stderr
    assert list_objects(s3_client, bucket, "out3/") == {}


def test_bad_rows_needs_max_bad_rows(s3_endpoint, s3_client, bucket):
    completed = cli(
        s3_endpoint, "--source", "generate:10", "--output", f"s3://{bucket}/o", "--bad_rows", f"s3://{bucket}/r"
    )
    assert completed.returncode == 2 and "--bad_rows applies only with --max_bad_rows" in error_line(completed)


def test_table_copy_with_max_bad_rows_says_how_many_were_left_out(iceberg_sqlite, tmp_path):
    from iceberg_catalogs import read_pyiceberg

    name, catalog = table_name(), catalog_file(tmp_path, iceberg_sqlite)
    source = write_region_jsonl(tmp_path / "rows.jsonl", region_rows(range(50)))
    done = table_cli(
        "--source", source, "--schema", TABLE_SCHEMA, "--table", name, "--catalog", catalog, "--max_bad_rows", "1%"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  bad rows  0 left out" in done.stdout
    assert read_pyiceberg(iceberg_sqlite, name).num_rows == 50


# -- --delta: a Delta Lake table -------------------------------------------------------------------


def delta_summary(out: str) -> dict:
    """The Delta summary's rows: name -> value."""
    table = out[out.index("Copy finished:") :]
    return dict(re.findall(r"^  (table|version|rows|files|bytes|bad rows|replaced|time|log)\s+(.+)$", table, re.M))


def delta_version(uri: str, s3_config) -> int:
    from deltalake import DeltaTable

    from beam_s3_sink.delta_commit import storage_options

    return DeltaTable(uri, storage_options=storage_options(s3_config)).version()


def test_delta_append_rerun_overwrite_partitions_overwrite_read_back_exactly(s3_endpoint, s3_config, bucket, tmp_path):
    """Each state of the table is exactly the rows copied, as delta-rs, DuckDB's delta_scan and
    Polars read it; the summary names the table and the version that holds them."""
    from delta_readers import assert_tables_read

    uri = f"s3://{bucket}/lake/orders"
    dest = ["--schema", TABLE_SCHEMA, "--delta", uri]
    first = region_rows(range(300))
    source = write_region_jsonl(tmp_path / "first.jsonl", first)
    done = cli(s3_endpoint, "--source", source, *dest, "--partition_by", "region", "--sink_id", "a")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = delta_summary(done.stdout)
    assert shown["table"] == f"{uri} (Delta Lake)" and shown["version"] == "0 (append, created the table)", shown
    assert shown["rows"] == "300" and shown["files"] == "3" and "replaced" not in shown
    assert shown["log"] == f"{uri}/_delta_log/00000000000000000000.json"
    assert f"to Delta table {uri}, mode append, as parquet, sink id a" in done.stdout
    assert_tables_read(uri, s3_config, first)

    again = cli(s3_endpoint, "--source", source, *dest, "--partition_by", "region", "--sink_id", "a")
    assert again.returncode == 0, again.stderr
    assert delta_summary(again.stdout)["version"] == "0 (committed by an earlier run of sink id a: nothing new)"
    assert delta_version(uri, s3_config) == 0

    eu = [dict(r, region="eu") for r in region_rows(range(1000, 1020))]
    source = write_region_jsonl(tmp_path / "eu.jsonl", eu)
    # no --partition_by: a copy into an existing table takes its partition columns
    done = cli(s3_endpoint, "--source", source, *dest, "--mode", "overwrite_partitions", "--sink_id", "b")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = delta_summary(done.stdout)
    assert shown["version"] == "1 (overwrite_partitions)" and shown["replaced"] == "100 rows in 1 file(s)", shown
    expected = [r for r in first if r["region"] != "eu"] + eu

    last = region_rows(range(2000, 2005))
    source = write_region_jsonl(tmp_path / "last.jsonl", last)
    done = cli(s3_endpoint, "--source", source, *dest, "--mode", "overwrite", "--sink_id", "c")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = delta_summary(done.stdout)
    assert shown["version"] == "2 (overwrite)" and shown["rows"] == "5", shown
    assert shown["replaced"] == f"{len(expected)} rows in 3 file(s)", shown
    assert_tables_read(uri, s3_config, last)
    assert pending_uploads(s3_config.make_client(), bucket) == []


def test_delta_refusals_name_the_flag_and_a_failed_copy_leaves_the_version(s3_endpoint, s3_config, bucket, tmp_path):
    """A copy that does not fit the table or names other partition columns is refused before
    anything is written (exit 2, one line naming the flag); a copy that fails while it runs
    exits 1 and leaves the table's version, and nothing pending."""
    from beam_s3_sink.cli import UsageError, plan_copy

    uri = f"s3://{bucket}/lake/refusals"
    source = write_region_jsonl(tmp_path / "in.jsonl", region_rows(range(50)))
    dest = ["--delta", uri, "--s3_endpoint_url", s3_endpoint]
    first = ["--source", source, "--schema", TABLE_SCHEMA, "--delta", uri, "--sink_id", "old"]
    done = cli(s3_endpoint, *first, "--partition_by", "region")
    assert done.returncode == 0, done.stdout + done.stderr
    cases = {
        "a column the table lacks": (
            ["--schema", TABLE_SCHEMA + ",extra:int32"],
            f"--delta {uri}: the copy does not fit the table: column 'extra' (int32) of the copy is not in the table",
        ),
        "a mistyped column": (
            ["--schema", "id:int64!,name:string,amount:float64,at:timestamp[us,UTC],region:string"],
            "column 'amount' is decimal(12,2) in the table, double (Arrow double) in the copy",
        ),
        "other partitions": (
            ["--schema", TABLE_SCHEMA, "--partition_by", "name"],
            f"--partition_by name: Delta table {uri} is partitioned by region; give --partition_by region",
        ),
    }
    for case, (flags, says) in cases.items():  # in this process: the plan is the whole of a refusal
        with pytest.raises(UsageError) as refused:
            plan_copy(["--source", source, *dest, *flags])
        assert says in str(refused.value), (case, str(refused.value))
    refused = cli(s3_endpoint, "--source", source, "--schema", TABLE_SCHEMA + ",extra:int32", "--delta", uri)
    assert refused.returncode == 2 and "column 'extra' (int32)" in error_line(refused)

    bad = tmp_path / "bad"
    bad.mkdir()
    write_region_jsonl(bad / "a.jsonl", region_rows(range(50)))
    (bad / "b.jsonl").write_text('{"id": 99, "surprise": true}\n')
    done = cli(
        s3_endpoint, "--source", str(bad / "*.jsonl"), "--schema", TABLE_SCHEMA, "--delta", uri, "--sink_id", "f"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    line = error_line(done)
    assert line.startswith("beam-s3-copy: the copy failed: ") and line.endswith('{"id": 99, "surprise": true}'), line
    assert "field(s) ['surprise'] that are not in the schema" in line, line
    assert delta_version(uri, s3_config) == 0
    assert pending_uploads(s3_config.make_client(), bucket) == []

    # Delta removes a commit past its log retention once a checkpoint holds it: the rerun of its
    # sink id is refused in the plan (it would fail in the copy), naming --sink_id.
    from deltalake import DeltaTable

    from beam_s3_sink.delta_commit import storage_options

    table = DeltaTable(uri, storage_options=storage_options(s3_config))
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})  # version 1
    table.create_checkpoint()
    table.cleanup_metadata()
    with pytest.raises(UsageError, match=r"^--sink_id old: copy 'old' committed into this table \(its application"):
        plan_copy([*first, "--s3_endpoint_url", s3_endpoint])


def test_abort_of_a_delta_copy_a_dry_run_and_bad_rows(s3_endpoint, s3_config, s3_client, bucket, tmp_path):
    """--dry-run creates no table; --max_bad_rows and --bad_rows reach CopyToDelta; --abort SINK_ID
    --delta removes a crashed copy's pending upload and uncommitted file, and refuses a committed copy."""
    from delta_readers import read_deltalake

    uri = f"s3://{bucket}/lake/abort"
    rows = region_rows(range(20))
    source = write_region_jsonl(tmp_path / "in.jsonl", rows)
    dest = ["--schema", TABLE_SCHEMA, "--delta", uri]
    dry = cli(s3_endpoint, "--source", source, *dest, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"Dry run (nothing written to Delta table {uri}): 20 rows checked, 0 would fail" in dry.stdout
    assert list_objects(s3_client, bucket, "lake/") == {}, "a dry run creates no table"

    base = [*dest, "--sink_id", "base", "--max_bad_rows", "1%", "--bad_rows", f"s3://{bucket}/rejects"]
    done = cli(s3_endpoint, "--source", source, *base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  bad rows  0 left out (written to s3://{bucket}/rejects)" in done.stdout
    orphan = "lake/abort/crashed-0123456789abcdef-0001.parquet"
    s3_client.put_object(Bucket=bucket, Key=orphan, Body=b"completed, never committed")
    s3_client.create_multipart_upload(Bucket=bucket, Key="lake/abort/crashed-0123456789abcdef-0002.parquet")
    done = cli(s3_endpoint, "--abort", "crashed", "--delta", uri)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deleted 1 object(s), aborted 1 pending upload(s)" in done.stdout
    assert f"  deleted s3://{bucket}/{orphan}" in done.stdout
    assert pending_uploads(s3_client, bucket) == []
    refused = cli(s3_endpoint, "--abort", "base", "--delta", uri)
    assert refused.returncode == 2
    assert f"copy 'base' into {uri} committed version 0: its files are the table's" in error_line(refused)
    assert read_deltalake(uri, s3_config).num_rows == 20
