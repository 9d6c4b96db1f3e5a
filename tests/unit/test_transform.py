"""transform: CopyToS3's checks at construction, and whole copies on the FnApiRunner against the fake.

The steps' clients come from :mod:`beam_s3_sink.clients`' per-process cache; the ``copy``
fixture puts the fake there for the copy's config, so the pipeline's DoFns (which run in this
process on the FnApiRunner) talk to it.
"""

from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pytest

from beam_s3_sink import CopyToS3, CsvFormat, S3Config
from beam_s3_sink.transform import parse_size, upload_graph

from .beam_testing import collected, pipeline
from .fakes import serve

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
ROWS = [{"id": i, "name": f"n{i}"} for i in range(20)]


@pytest.mark.parametrize(
    "size, nbytes",
    [(4096, 4096), ("1MiB", 2**20), ("2 MB", 2 * 10**6), ("1.5kb", 1500), ("256MB", 256 * 10**6), ("3GiB", 3 * 2**30)],
)
def test_parse_size(size, nbytes):
    assert parse_size(size) == nbytes


@pytest.mark.parametrize("size", ["big", "5 parsecs", True, "-1MB"])
def test_parse_size_refuses(size):
    with pytest.raises(ValueError, match="max_file_size"):
        parse_size(size)


@pytest.mark.parametrize(
    "kwargs, error, says",
    [
        (dict(uri="gs://b/p"), ValueError, "not an S3 URI"),
        (dict(format="orc"), ValueError, "unknown format 'orc'"),
        (dict(max_file_size=100), ValueError, "at least 1024 bytes"),
        (dict(sink_id="a b"), ValueError, "sink_id"),
        (dict(s3={"endpoint_url": "x"}), TypeError, "s3 must be an S3Config"),
        (dict(if_exists="overwrite"), ValueError, "if_exists"),
        (dict(num_batches=0), ValueError, "num_batches must be an int from 1 to 10000"),
        (dict(partition_by=("a", "a")), ValueError, "repeats a column"),
        (dict(max_open_files=0), ValueError, "max_open_files must be a positive int"),
        (dict(max_open_files=True), ValueError, "max_open_files must be a positive int"),
        (dict(upload_graph="shuffled"), ValueError, "upload_graph must be one of"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, error, says):
    args = dict(uri="s3://bucket/p", schema=SCHEMA)
    args.update(kwargs)
    with pytest.raises(error, match=says):
        CopyToS3(args.pop("uri"), **args)


def test_upload_graph_per_bundle_in_process_grouped_elsewhere_or_as_asked():
    from apache_beam.runners.portability.portable_runner import PortableRunner

    in_process = beam.Pipeline(runner="FnApiRunner")
    portable = beam.Pipeline(runner=PortableRunner())
    assert upload_graph(in_process) == upload_graph(beam.Pipeline(runner="DirectRunner")) == "per_bundle"
    assert upload_graph(portable) == "grouped"
    assert upload_graph(in_process, "grouped") == "grouped" and upload_graph(portable, "per_bundle") == "per_bundle"
    assert upload_graph(in_process, num_batches=2) == upload_graph(portable, "per_bundle", 2) == "grouped"


def _labels(p):
    labels = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node):
            labels.append(node.full_label)

        def visit_transform(self, node):
            labels.append(node.full_label)

    p.visit(Visitor())
    return labels


@pytest.mark.parametrize(
    "kwargs, group",
    [(dict(), False), (dict(upload_graph="grouped"), True), (dict(num_batches=2), True)],
)
def test_the_graph_has_a_group_by_key_only_when_grouped(kwargs, group):
    p = beam.Pipeline(runner="FnApiRunner")
    _ = p | beam.Create(ROWS) | CopyToS3("s3://bucket/p", schema=SCHEMA, s3=S3Config(), **kwargs)
    head = "CopyToS3(s3://bucket/p)/"
    labels = [label[len(head) :] for label in _labels(p) if label.startswith(head)]
    assert {"Upload", "Upload/Batch", "Upload/Write", "Initialize", "Complete"} <= set(labels)
    assert ("Upload/Group" in labels) == group


def test_sink_id_is_made_once_when_built():
    copy = CopyToS3("s3://bucket/p", schema=SCHEMA)
    assert copy.sink_id.startswith("copy-") and copy.sink_id == copy.sink_id
    assert CopyToS3("s3://bucket/p", schema=SCHEMA, sink_id="mine").sink_id == "mine"


def test_schema_problems_fail_when_the_pipeline_is_built():
    with pytest.raises(ValueError, match="has no schema"):
        with pipeline() as p:
            _ = p | beam.Create([{"id": 1}]) | CopyToS3("s3://bucket/p", s3=S3Config())
    with pytest.raises(ValueError, match="type struct"):
        with pipeline() as p:
            _ = (
                p
                | beam.Create([{"s": {"a": 1}}])
                | CopyToS3(
                    "s3://bucket/p",
                    format="csv",
                    s3=S3Config(),
                    schema=pa.schema([("s", pa.struct([("a", pa.int8())]))]),
                )
            )


def test_max_file_size_needs_few_enough_parts():
    with pytest.raises(ValueError, match="needs more than 10000 parts"):
        with pipeline() as p:
            _ = p | beam.Create(ROWS) | CopyToS3("s3://bucket/p", schema=SCHEMA, s3=S3Config(), max_file_size="100GiB")


@pytest.fixture
def copy(fake_s3, monkeypatch):
    """Run ``rows | CopyToS3(...)`` on the FnApiRunner against the fake; return its results."""
    config = serve(fake_s3, monkeypatch)

    def run(rows, **kwargs):
        with pipeline() as p:
            results = collected(p | beam.Create(rows) | CopyToS3("s3://bucket/exports", s3=config, **kwargs))
        return results

    return run


@pytest.mark.parametrize("graph", ["auto", "per_bundle", "grouped"])
def test_a_csv_copy_end_to_end(fake_s3, copy, graph):
    (result,) = copy(ROWS, format=CsvFormat(header=True), schema=SCHEMA, sink_id="s1", upload_graph=graph)
    assert result.ok and result.rows == 20 and len(result.files) == 1
    key = result.files[0].uri[len("s3://bucket/") :]
    assert fake_s3.keys() == sorted([key, "exports/_s1-manifest.json"])  # no sentinel, no claim
    lines = fake_s3.body(key).decode().splitlines()
    assert lines[0] == "id,name" and sorted(lines[1:]) == sorted(f"{r['id']},{r['name']}" for r in ROWS)
    assert json.loads(fake_s3.body("exports/_s1-manifest.json"))["rows"] == 20
    assert fake_s3.uploads == {}


def test_num_batches_writes_the_same_keys_each_run(fake_s3, copy):
    (first,) = copy(ROWS, format="csv", schema=SCHEMA, sink_id="s1", num_batches=3)
    assert first.ok and first.rows == 20 and all("-batch-" in f.uri for f in first.files)
    files = {f.uri: fake_s3.body(f.uri[len("s3://bucket/") :]) for f in first.files}
    fake_s3.objects.clear()
    (again,) = copy(ROWS, format="csv", schema=SCHEMA, sink_id="s1", num_batches=3)
    assert {f.uri: fake_s3.body(f.uri[len("s3://bucket/") :]) for f in again.files} == files


@pytest.mark.parametrize("graph", [dict(upload_graph="per_bundle"), dict(upload_graph="grouped"), dict(num_batches=3)])
def test_a_bad_row_fails_the_copy_and_leaves_no_data(fake_s3, copy, graph):
    rows = ROWS + [{"id": "x", "name": "bad"}]
    (result,) = copy(rows, format="csv", schema=SCHEMA, sink_id="s1", fail_on_error=False, **graph)
    assert not result.ok and "column 'id' expects int64, but a row holds 'x'" in result.error
    assert fake_s3.keys() == ["exports/_s1-INCOMPLETE"] and fake_s3.uploads == {}


def test_a_foreign_object_stops_the_copy_before_any_upload(fake_s3, copy):
    fake_s3.put_object(Bucket="bucket", Key="exports/theirs.csv", Body=b"")
    (result,) = copy(ROWS, format="csv", schema=SCHEMA, fail_on_error=False)
    assert "is not empty" in result.error
    assert "CreateMultipartUpload" not in fake_s3.operations()


def test_a_dry_run_makes_no_request(fake_s3, copy):
    (result,) = copy(ROWS + [{"id": 1, "name": "nul\x00"}], format="csv", schema=SCHEMA, validate_only=True)
    assert result.dry_run and result.rows == 21 and result.invalid_rows == 1
    assert "NUL" in result.invalid[0] and fake_s3.calls == []


def test_large_arrow_input_makes_one_file_per_writer_by_default(fake_s3, copy):
    """Arrow tables go to the writer as they are; in process (per bundle) one writer makes one
    file of them, holding every row once (what the encode lanes' test checked of the default)."""
    import io

    import pyarrow.parquet as pq

    tables = [
        pa.table({"id": range(i, i + 5000), "name": [f"n{j}" for j in range(i, i + 5000)]})
        for i in range(0, 60_000, 5000)
    ]
    (result,) = copy(tables, schema=SCHEMA, sink_id="s1")
    assert result.ok and result.rows == 60_000 and len(result.files) == 1, result
    body = fake_s3.body(result.files[0].uri[len("s3://bucket/") :])
    assert sorted(pq.read_table(io.BytesIO(body))["id"].to_pylist()) == list(range(60_000))
