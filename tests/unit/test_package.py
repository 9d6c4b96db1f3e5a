"""beam_s3_sink: the public names, and an import that does no work."""

from __future__ import annotations

import beam_s3_sink


def test_public_names():
    assert set(beam_s3_sink.__all__) >= {
        "CopyToS3",
        "CopyToResult",
        "CopiedFile",
        "CopyToS3Error",
        "S3Config",
        "ObjectSettings",
        "Format",
        "ParquetFormat",
        "CsvFormat",
        "TextFormat",
        "JsonlFormat",
        "abort_copy",
        "AbortReport",
        "CommittedCopyError",
    }
    for name in beam_s3_sink.__all__:
        assert getattr(beam_s3_sink, name).__doc__, name


def test_no_dofn_is_public():
    import importlib
    import pkgutil

    import apache_beam as beam

    public = []
    for info in pkgutil.walk_packages(beam_s3_sink.__path__, "beam_s3_sink."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, beam.DoFn):
                public.append(f"{info.name}.{name}")
    assert public == []


def test_building_a_copy_makes_no_client(monkeypatch):
    """Clients are made on the workers, in DoFn.setup(), never when the pipeline is built."""
    import apache_beam as beam
    import boto3
    import pyarrow as pa

    made = []
    monkeypatch.setattr(boto3.session.Session, "client", lambda *a, **k: made.append(a))
    pipeline = beam.Pipeline()
    _ = (
        pipeline
        | beam.Create([{"a": 1}])
        | beam_s3_sink.CopyToS3(
            "s3://bucket/p", format="csv", schema=pa.schema([("a", pa.int8())]), s3=beam_s3_sink.S3Config()
        )
    )
    assert made == []
