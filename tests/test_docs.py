"""The code and the commands in README.md and docs/ run as they are written, against moto.

::

    README.md   "A minimal pipeline" block ─▶ a script, bucket renamed ─▶ python (AWS_ENDPOINT_URL_S3)
    docs/cli.md  <!-- cli-help --> block   ─▶ == COLUMNS=100 beam-s3-copy --help
                 its "examples:"           ─▶ each run (inputs like the page's session), but the
                                              Flink one (tests/test_runners.py runs it on every runner)
    docs/s3.md   the IAM policy            ─▶ == the one tests/test_s3_config.py enforces
                 the S3Config example      ─▶ builds a copy in a pipeline
    docs/layout.md the lifecycle rule      ─▶ PutBucketLifecycleConfiguration, read back
    docs/formats.md the Arrow input example ─▶ runs on the FnApiRunner

Names the pages use for buckets (``my-bucket``, ``raw``, ``scratch``) become paths in
the test's fresh bucket; nothing else in the text is changed.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq

from helpers import data_keys, read_parquet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND = os.path.join(os.path.dirname(sys.executable), "beam-s3-copy")  # the installed console script


def page(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def section(text: str, heading: str) -> str:
    """From the heading line to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{level}}} ", rest, re.M)]
    return text[start : start + len(heading) + 1 + (ends[0] if ends else len(rest))]


def blocks(text: str, language: str) -> List[str]:
    """The fenced code blocks of ``language`` in ``text``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def in_bucket(text: str, bucket: str) -> str:
    """The page's bucket names as paths in the test's bucket."""
    for name in ("my-bucket", "raw", "scratch"):
        text = text.replace(f"s3://{name}/", f"s3://{bucket}/{name}/")
    return text


def test_readme_minimal_pipeline_runs(s3_endpoint, s3_client, bucket, tmp_path):
    [code] = blocks(section(page("README.md"), "## A minimal pipeline"), "python")
    script = tmp_path / "minimal.py"
    script.write_text(in_bucket(code, bucket))
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": s3_endpoint}  # boto3's chain: no change to the code
    done = subprocess.run(
        [sys.executable, str(script)], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 rows in 1 files None" in done.stdout, "what the README says it prints"
    [key] = data_keys(s3_client, bucket, "my-bucket/exports/orders")
    assert read_parquet(s3_client, bucket, key).to_pylist() == [{"id": 1, "customer": "Ana", "amount": 12.5}]


def help_block() -> str:
    text = page("docs/cli.md")
    found = re.search(r"<!-- cli-help -->\n```\n(.*?)```\n<!-- /cli-help -->", text, re.S)
    assert found, "docs/cli.md lacks its <!-- cli-help --> block"
    return found.group(1)


def test_cli_help_in_the_docs_is_what_the_command_prints():
    done = subprocess.run(
        [COMMAND, "--help"], env={**os.environ, "COLUMNS": "100"}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == help_block(), "rerun COLUMNS=100 beam-s3-copy --help into docs/cli.md"


def help_examples() -> List[List[str]]:
    """The commands of the help's "examples:" part, continuation lines joined."""
    text = help_block()
    part = text[text.index("\nexamples:\n") : text.index("\nschema text form:")]
    commands, current = [], ""
    for line in part.splitlines():
        line = line.strip()
        if current or line.startswith("beam-s3-copy "):
            current += " " + line.rstrip("\\")
            if not line.endswith("\\"):
                commands.append(shlex.split(current))
                current = ""
    return commands


def write_session_inputs(tmp_path, s3_client, bucket: str) -> None:
    """The inputs of docs/cli.md's session: two CSV files, and gzipped JSON Lines on S3."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "orders-1.csv").write_text(
        'id,customer,amount,ordered_at\n1,Ana,12.50,2026-01-02 10:00:00\n2,"O\'Brien, Bo",3.25,2026-01-02 11:30:00\n'
    )
    (data / "orders-2.csv").write_text("id,customer,amount,ordered_at\n3,Chen,,2026-01-03 09:15:00\n")
    events = "".join(
        json.dumps(
            {"id": i, "kind": "click" if i % 2 else "view", "amount": i * 1.5, "at": f"2026-01-01T00:00:{i:02d}Z"}
        )
        + "\n"
        for i in range(5)
    )
    s3_client.put_object(Bucket=bucket, Key="raw/events/a.jsonl.gz", Body=gzip.compress(events.encode()))


def test_every_cli_example_of_the_docs_runs(s3_endpoint, s3_client, bucket, tmp_path):
    write_session_inputs(tmp_path, s3_client, bucket)
    examples = help_examples()
    on_runners = [args for args in examples if "--runner" in args]
    assert len(on_runners) == 1 and "--job_endpoint" in on_runners[0], "the Flink example, run by test_runners"
    outputs: Dict[str, str] = {}
    for args in examples:
        if args in on_runners:
            continue
        args = [in_bucket(a, bucket) for a in args]
        if "--s3_endpoint_url" in args:
            args[args.index("--s3_endpoint_url") + 1] = s3_endpoint
        else:
            args += ["--s3_endpoint_url", s3_endpoint]
        done = subprocess.run([COMMAND, *args[1:]], cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{shlex.join(args)}\n{done.stdout}\n{done.stderr[-3000:]}"
        outputs[" ".join(args)] = done.stdout
    assert len(outputs) == 5, list(outputs)
    copies = [out for out in outputs.values() if "Copy finished:" in out]
    assert len(copies) == 3
    rows = sorted(int(re.search(r"^  rows\s+([\d,]+)$", out, re.M).group(1).replace(",", "")) for out in copies)
    assert rows == [3, 5, 100_000], "CSV files, JSON Lines on S3, generate:100000"
    assert any("3 rows checked, 0 would fail" in out for out in outputs.values()), "the dry run"
    assert any("copy 'nightly'" in out and "deleted 0 object(s)" in out for out in outputs.values()), "--abort"
    assert data_keys(s3_client, bucket, "scratch/trial")[0].endswith(".jsonl.gz")


def test_the_iam_policy_in_the_docs_is_the_one_the_tests_enforce():
    from test_s3_config import minimal_policy

    [policy] = blocks(section(page("docs/s3.md"), "## Least privilege: the IAM policy the sink needs"), "json")[:1]
    assert json.loads(policy) == minimal_policy("BUCKET", "PREFIX")


def test_the_s3_config_example_builds_a_copy():
    import apache_beam as beam

    [code] = blocks(section(page("docs/s3.md"), "## Connecting to S3"), "python")
    pipeline = beam.Pipeline()
    namespace = {"rows": pipeline | beam.Create([{"id": 1}]), "schema": pa.schema([("id", pa.int64())])}
    exec(code, namespace)  # builds the transform: every option is checked here; nothing runs
    s3 = namespace["s3"]
    assert s3.role_arn.endswith(":role/exports") and s3.objects.checksum_algorithm == "CRC32C"


def test_the_lifecycle_rule_in_the_docs_is_accepted(s3_client, bucket):
    layout = page("docs/layout.md")
    rule = json.loads(blocks(layout[layout.index("The safety net for uploads nobody aborts") :], "json")[0])
    s3_client.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=rule)
    [got] = s3_client.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got["ID"] == "abort-incomplete-uploads"
    assert got["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}


def test_the_arrow_input_example_runs(s3_endpoint, s3_client, bucket, tmp_path, monkeypatch):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_s3_sink import CopyToS3

    [code] = blocks(section(page("docs/formats.md"), "## Arrow input"), "python")
    (tmp_path / "orders").mkdir()
    table = pa.table({"id": pa.array(range(1000), pa.int64()), "name": [f"n{i}" for i in range(1000)]})
    pq.write_table(table.slice(0, 600), tmp_path / "orders" / "part-0.parquet", row_group_size=100)
    pq.write_table(table.slice(600), tmp_path / "orders" / "part-1.parquet", row_group_size=100)
    monkeypatch.chdir(tmp_path)
    options = PipelineOptions(["--runner=FnApiRunner", f"--s3_endpoint_url={s3_endpoint}"])
    with beam.Pipeline(options=options) as p:
        exec(in_bucket(code, bucket), {"pyarrow": pa, "beam": beam, "CopyToS3": CopyToS3, "p": p})
    keys = data_keys(s3_client, bucket, "my-bucket/orders")
    copied = pa.concat_tables([read_parquet(s3_client, bucket, k) for k in keys]).sort_by("id")
    assert copied.equals(table)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_resolves():
    pages = ["README.md"] + [f"docs/{n}" for n in sorted(os.listdir(os.path.join(ROOT, "docs")))]
    anchors = {
        name: {
            anchor(h) for h in re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", page(name), flags=re.M | re.S), re.M)
        }
        for name in pages
    }
    for name in pages:
        for target in re.findall(r"\]\(([^)#\s]*)(#[^)\s]*)?\)", page(name)):
            path, fragment = target
            if path.startswith(("http://", "https://")):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(name), path)) if path else name
            assert resolved in anchors, f"{name}: link to {path}, which is not a page"
            if fragment:
                assert fragment[1:] in anchors[resolved], f"{name}: no heading {fragment} in {resolved}"


def test_every_file_the_pages_name_exists():
    named = set()
    for name in ["README.md"] + [f"docs/{n}" for n in os.listdir(os.path.join(ROOT, "docs"))]:
        # files (with an extension) and folders (with a trailing slash); not counters such as beam_s3_sink/rows
        named |= set(
            re.findall(r"\b((?:beam_s3_sink|tests|pipelines|scripts|benchmarks)/[\w/.-]*?(?:\.[a-z]+\b|/))", page(name))
        )
    missing = sorted(path for path in named if not os.path.exists(os.path.join(ROOT, path.split("::")[0])))
    assert missing == [], missing


def test_every_test_the_pages_name_exists():
    sources = "".join(page(f"tests/{n}") for n in os.listdir(os.path.join(ROOT, "tests")) if n.endswith(".py"))
    named = set()
    for name in ["README.md"] + [f"docs/{n}" for n in os.listdir(os.path.join(ROOT, "docs"))]:
        named |= set(re.findall(r"\b(test_\w+)\b(?!\.py)", page(name)))
    assert sorted(n for n in named if f"def {n}(" not in sources) == []
