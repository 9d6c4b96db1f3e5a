"""The doctests' namespace (a pytest plugin, `-p tests.doctest_namespace` in pytest.ini; not a root
conftest.py, which would shadow tests/conftest.py for SDK workers that import `conftest`): what
the package's docstring examples use without making it.

``client`` is an in-memory S3 client (``tests/unit/fakes.py``) with one bucket, ``bucket``,
standing for the boto3 S3 client that the examples talk to; ``pool`` is a thread pool for
part uploads. Each doctest gets fresh ones.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator

import pytest


@pytest.fixture(autouse=True)
def _doctest_names(request: Any) -> Iterator[None]:
    if not isinstance(request.node, pytest.DoctestItem):
        yield
        return
    from tests.unit.fakes import FakeS3

    namespace: Dict[str, Any] = request.getfixturevalue("doctest_namespace")
    with ThreadPoolExecutor(2) as pool:
        namespace.update(client=FakeS3(), pool=pool)
        yield
