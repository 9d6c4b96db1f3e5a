"""arrow_upload: Beam hands a batched DoFn's pyarrow Tables to the upload step as they are."""

# No "from __future__ import annotations": Beam reads the annotations of Order and MakeOrders.

import typing

import apache_beam as beam
import pyarrow as pa
import pytest

from beam_s3_sink import CopyToS3
from beam_s3_sink.arrow_upload import takes_batches

from .beam_testing import collected, pipeline
from .fakes import serve


class Order(typing.NamedTuple):
    id: int
    name: str


def test_takes_batches_for_schema_types_only():
    assert takes_batches(Order)
    assert not takes_batches(typing.Any)
    assert not takes_batches(dict)


class MakeOrders(beam.DoFn):
    """A batched DoFn: emits pyarrow Tables of Orders."""

    def process_batch(self, batch: pa.Table) -> typing.Iterator[pa.Table]:
        yield pa.table(
            {"id": [i * 10 for i in batch.column("id").to_pylist()], "name": batch.column("name").to_pylist()}
        )

    def infer_output_type(self, input_type):
        return Order


@pytest.mark.parametrize("num_batches", [None, 2])
def test_a_batched_producer_into_a_copy(fake_s3, monkeypatch, num_batches):
    config = serve(fake_s3, monkeypatch)
    with pipeline() as p:
        orders = (
            p
            | beam.Create([Order(i, f"o{i}") for i in range(50)]).with_output_types(Order)
            | beam.ParDo(MakeOrders()).with_output_types(Order)
        )
        results = collected(
            orders | CopyToS3("s3://bucket/o", format="csv", s3=config, sink_id="s1", num_batches=num_batches)
        )
    (result,) = results
    assert result.ok and result.rows == 50
    body = b"".join(fake_s3.body(f.uri[len("s3://bucket/") :]) for f in result.files)
    assert sorted(body.decode().splitlines()) == sorted(f"{i * 10},o{i}" for i in range(50))
