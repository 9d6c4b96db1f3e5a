"""The unit tier: one test module per package module, no server of any kind.

Every test here is marked ``unit`` (``pytest -m unit``, or ``pytest tests/unit``, or
``make unit``); S3 is the in-memory :class:`~unit.fakes.FakeS3` of ``fakes.py``.
"""

from __future__ import annotations

import pytest

from .fakes import FakeS3


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test of this directory ``unit``."""
    for item in items:
        if "tests/unit/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def fake_s3() -> FakeS3:
    """A fresh in-memory S3 with one bucket, ``bucket``."""
    return FakeS3()
