"""Bad rows (DESIGN.md, "Bad rows"; issue 35): 100,000 rows with 37 bad ones scattered through
them (a list where an int goes, a string where an int goes, a decimal too large for its
column, a missing NOT NULL field, a dict where an int goes, and an Arrow batch with one NULL in
a NOT NULL column). With ``max_bad_rows=50`` exactly the 99,963 good rows land, in Parquet, in
CSV and in an Iceberg table, and the 37 dead letters name each row's column and reason; with
``max_bad_rows=36`` the copy fails and leaves nothing (no data, no pending upload, no dead
letter; into a table: no snapshot, no data file). The whole matrix runs on the in-process
runner, Prism, Flink and Spark (Iceberg's failure on the in-process runner and Prism); one case
on the multi-process and the portable in-process runners.
"""

from __future__ import annotations

import csv
import decimal
import io
import json
import os
import pickle
import uuid
from typing import Any, Dict, List, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink import CopyToIceberg, CopyToS3, CsvFormat
from conftest import runner_args
from helpers import data_keys, get_bytes, list_objects, pending_uploads, read_manifest, read_parquet

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        ("qty", pa.int32()),
        ("price", pa.decimal128(10, 2)),
    ]
)
N, ARROW_START, SHARD = 100_000, 99_000, 3_000
BAD_EVERY, BAD_FIRST = 2_700, 1_234
BAD_IDS = [BAD_FIRST + BAD_EVERY * k for k in range(36)]  # 36 bad rows among the dicts
ARROW_BAD = 99_500  # and one NULL name in the Arrow batch of ids 99,000..99,999
KINDS = ("qty", "qty", "price", "name", "qty")  # the column each kind of bad row names


def good_row(i: int) -> Dict[str, Any]:
    return {"id": i, "name": f"n{i}", "qty": i % 1000, "price": decimal.Decimal(i % 10_000).scaleb(-2)}


def bad_row(i: int) -> Dict[str, Any]:
    row = good_row(i)
    kind = BAD_IDS.index(i) % 5
    if kind == 0:
        row["qty"] = [1, 2]  # a wrong type
    elif kind == 1:
        row["qty"] = "abc"  # a string where an int goes
    elif kind == 2:
        row["price"] = decimal.Decimal("123456789012.34")  # too large for decimal(10, 2)
    elif kind == 3:
        del row["name"]  # a missing NOT NULL field
    else:
        row["qty"] = {"a": 1}  # a wrong type
    return row


BAD = set(BAD_IDS)


def elements(start: int) -> List[Any]:
    """The elements of one shard: rows, and for the last shard one Arrow batch."""
    if start >= ARROW_START:
        ids = list(range(ARROW_START, N))
        return [
            pa.record_batch(
                {
                    "id": pa.array(ids, pa.int64()),
                    "name": pa.array([None if i == ARROW_BAD else f"n{i}" for i in ids], pa.string()),
                    "qty": pa.array([i % 1000 for i in ids], pa.int32()),
                    "price": pa.array([decimal.Decimal(i % 10_000).scaleb(-2) for i in ids], pa.decimal128(10, 2)),
                }
            )
        ]
    return [bad_row(i) if i in BAD else good_row(i) for i in range(start, min(start + SHARD, ARROW_START))]


def expected_dead_letters() -> List[Tuple[int, str]]:
    return sorted([(i, KINDS[BAD_IDS.index(i) % 5]) for i in BAD_IDS] + [(ARROW_BAD, "name")])


GOOD_IDS = [i for i in range(N) if i not in BAD and i != ARROW_BAD]


def keep(element: Any, folder: str) -> None:
    with open(os.path.join(folder, uuid.uuid4().hex + ".pickle"), "wb") as f:
        pickle.dump(element, f)


def load(folder: str) -> List[Any]:
    out = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out.append(pickle.load(f))
    return out


def run(args: List[str], copy: Any, tmp_path) -> Tuple[Any, List[Any]]:
    """The copy's one result and its dead letters."""
    results, letters = tmp_path / "results", tmp_path / "letters"
    results.mkdir()
    letters.mkdir()
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        rows = (
            p
            | "Shards" >> beam.Create(list(range(0, N, SHARD)))
            | "Reshuffle" >> beam.Reshuffle()
            | "Elements" >> beam.FlatMap(elements)
        )
        outputs = rows | copy.with_bad_rows()
        _ = outputs.results | "KeepResult" >> beam.Map(keep, str(results))
        _ = outputs.bad_rows | "KeepLetter" >> beam.Map(keep, str(letters))
    (result,) = load(str(results))
    return result, load(str(letters))


def check_dead_letters(letters: List[Any], sink_id: str) -> None:
    got = sorted((json.loads(b.element)["id"], b.column) for b in letters)
    assert got == expected_dead_letters()
    for letter in letters:
        assert letter.sink_id == sink_id and letter.unit is None
        assert repr(letter.column) in letter.reason or letter.column in letter.reason, letter
    (arrow,) = [b for b in letters if json.loads(b.element)["id"] == ARROW_BAD]
    assert json.loads(arrow.element) == {"id": ARROW_BAD, "name": None, "qty": 500, "price": "95.00"}
    assert "NOT NULL" in arrow.reason


def check_table_untouched(result: Any, letters: List[Any], catalog: Any, table: str, client) -> None:
    """A table copy over its limit: it fails naming the limit, and leaves nothing: no snapshot,
    no data file, no pending upload, no dead letter."""
    from iceberg_catalogs import load as load_catalog

    assert not result.ok and "max_bad_rows=36" in result.error, result
    assert letters == []
    loaded = load_catalog(catalog).load_table(table)
    assert loaded.current_snapshot() is None
    bucket, _, prefix = loaded.location().removeprefix("s3://").partition("/")
    assert [k for k in list_objects(client, bucket, prefix + "/data/")] == []
    assert [k for k in pending_uploads(client, bucket) if k.startswith(prefix + "/")] == []


def copied_ids(client, bucket: str, prefix: str, fmt: str) -> List[int]:
    ids: List[int] = []
    for key in data_keys(client, bucket, prefix + "/"):
        if fmt == "parquet":
            ids += read_parquet(client, bucket, key).column("id").to_pylist()
        else:
            ids += [int(row[0]) for row in csv.reader(io.StringIO(get_bytes(client, bucket, key).decode()))]
    return sorted(ids)


VARIANTS = ("parquet", "csv", "iceberg", "limit-36", "iceberg-limit-36")
CASES = [
    pytest.param(r, v, id=f"{r}-{v}")
    for r in ("direct", "prism", "flink", "spark")
    for v in VARIANTS
    if r in ("direct", "prism") or v != "iceberg-limit-36"  # Iceberg's failure: a cheap runner each
] + [pytest.param(r, v, id=f"{r}-{v}") for r, v in [("multiprocess", "csv"), ("portable", "limit-36")]]


@pytest.mark.parametrize("runner_name, variant", CASES)
def test_bad_rows_are_left_out_up_to_the_limit(
    runner_name, variant, request, s3_config, s3_client, bucket, tmp_path, iceberg_sqlite
):
    args = runner_args(runner_name, request)
    sink_id = f"bad-{variant}"
    if variant.startswith("iceberg"):
        catalog = dict(iceberg_sqlite.props, name=iceberg_sqlite.name)
        table = f"badrows.t{bucket.replace('-', '_')}"
        limit = 36 if variant.endswith("limit-36") else 50
        copy = CopyToIceberg(
            table, catalog=catalog, schema=SCHEMA, sink_id=sink_id, max_bad_rows=limit, fail_on_error=False
        )
        result, letters = run(args, copy, tmp_path)
        if limit == 36:
            check_table_untouched(result, letters, iceberg_sqlite, table, s3_client)
            return
        assert result.ok and (result.rows, result.bad_rows) == (len(GOOD_IDS), 37), result
        from iceberg_catalogs import read_pyiceberg

        assert sorted(read_pyiceberg(iceberg_sqlite, table).column("id").to_pylist()) == GOOD_IDS
        from iceberg_catalogs import load as load_catalog

        summary = load_catalog(iceberg_sqlite).load_table(table).current_snapshot().summary
        assert summary["beam-s3-sink.bad-rows"] == "37"
        check_dead_letters(letters, sink_id)
        return
    fmt = "csv" if variant == "csv" else "parquet"
    limit = 36 if variant == "limit-36" else 50
    copy = CopyToS3(
        f"s3://{bucket}/out",
        format=CsvFormat() if fmt == "csv" else "parquet",
        schema=SCHEMA,
        s3=s3_config,
        sink_id=sink_id,
        max_bad_rows=limit,
        fail_on_error=False,
    )
    result, letters = run(args, copy, tmp_path)
    if limit == 36:
        assert not result.ok and "max_bad_rows=36" in result.error, result
        assert letters == [] and pending_uploads(s3_client, bucket) == []
        assert list(list_objects(s3_client, bucket, "out/")) == [f"out/_{sink_id}-INCOMPLETE"]
        return
    assert result.ok and (result.rows, result.bad_rows) == (len(GOOD_IDS), 37), result
    assert copied_ids(s3_client, bucket, "out", fmt) == GOOD_IDS  # each good row once
    manifest = read_manifest(s3_client, bucket, f"out/_{sink_id}-manifest.json")
    assert (manifest["rows"], manifest["bad_rows"]) == (len(GOOD_IDS), 37)
    assert pending_uploads(s3_client, bucket) == []
    check_dead_letters(letters, sink_id)
