"""errors: every exception the package raises derives from CopyToS3Error."""

from __future__ import annotations

import inspect

import pyarrow as pa
import pytest

import beam_s3_sink
from beam_s3_sink import errors
from beam_s3_sink.schema import rows_to_batch


def test_every_exception_class_derives_from_the_base():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]
    assert {c.__name__ for c in classes} >= {
        "CopyToS3Error",
        "S3RequestError",
        "ReplaceError",
        "CommittedCopyError",
        "RowError",
        "CoercionError",
        "BatchError",
        "EncodeError",
    }
    assert all(issubclass(c, errors.CopyToS3Error) for c in classes)


def test_value_errors_stay_value_errors():
    for cls in (errors.RowError, errors.CoercionError, errors.BatchError, errors.EncodeError):
        assert issubclass(cls, ValueError)
    assert issubclass(errors.ReplaceError, errors.S3RequestError)


def test_no_other_module_defines_an_exception_outside_the_hierarchy():
    import importlib
    import pkgutil

    strays = []
    for info in pkgutil.walk_packages(beam_s3_sink.__path__, "beam_s3_sink."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Exception)
                and cls.__module__ == info.name
                and not issubclass(cls, (errors.CopyToS3Error, ValueError))
            ):
                strays.append(f"{info.name}.{name}")
    assert strays == []


def test_a_user_catches_every_copy_error_with_the_base():
    with pytest.raises(beam_s3_sink.CopyToS3Error):
        rows_to_batch([{"a": "x"}], pa.schema([("a", pa.int8())]))
