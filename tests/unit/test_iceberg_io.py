"""iceberg_io: PutObjectFileIO stores each s3:// object it writes with one PutObject (never a
multipart upload), stores nothing when the writer raised, and leaves other schemes to pyarrow."""

from __future__ import annotations

import pytest
from pyiceberg.io.pyarrow import PyArrowFile

from beam_s3_sink.errors import S3RequestError
from beam_s3_sink.iceberg_io import PutObjectFileIO

from .fakes import FakeS3, serve

PROPS = {"s3.endpoint": "http://fake.invalid"}  # the S3Config of fakes.FAKE_CONFIG


@pytest.fixture
def file_io(fake_s3: FakeS3, monkeypatch) -> PutObjectFileIO:
    serve(fake_s3, monkeypatch)
    return PutObjectFileIO(PROPS)


def test_an_object_is_one_put_object_at_close(file_io, fake_s3):
    out = file_io.new_output("s3://bucket/t/metadata/snap-1.avro")
    assert not out.exists()
    with out.create() as stream:
        stream.write(b"Obj\x01")
        stream.write(b"rest")
        assert fake_s3.keys() == [], "nothing is stored before close"
    assert fake_s3.body("t/metadata/snap-1.avro") == b"Obj\x01rest" and len(out) == 8
    assert [op for op in fake_s3.operations() if op not in ("HeadObject",)] == ["PutObject"]
    with pytest.raises(FileExistsError):
        out.create()
    with out.create(overwrite=True) as stream:
        stream.write(b"new")
    assert fake_s3.body("t/metadata/snap-1.avro") == b"new"


def test_a_writer_that_raised_stores_nothing(file_io, fake_s3):
    with pytest.raises(RuntimeError):
        with file_io.new_output("s3://bucket/t/metadata/m0.avro").create() as stream:
            stream.write(b"half")
            raise RuntimeError("the manifest writer failed")
    assert fake_s3.keys() == [] and "PutObject" not in fake_s3.operations()


def test_a_refused_put_is_the_packages_error_naming_the_object(file_io, fake_s3):
    fake_s3.refuse("PutObject", "AccessDenied")
    with pytest.raises(S3RequestError, match="S3 refused PutObject on s3://bucket/t/metadata/v2.metadata.json"):
        with file_io.new_output("s3://bucket/t/metadata/v2.metadata.json").create() as stream:
            stream.write(b"{}")
    assert fake_s3.uploads == {}, "no multipart upload, so none pending"


def test_other_schemes_stay_pyarrows(file_io, tmp_path):
    assert isinstance(file_io.new_output(f"file://{tmp_path}/x"), PyArrowFile)
