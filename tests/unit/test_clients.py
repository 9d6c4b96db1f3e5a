"""clients: one client and one retry counter per process per S3Config."""

from __future__ import annotations

import pytest

from beam_s3_sink import clients
from beam_s3_sink.config import S3Config
from beam_s3_sink.s3 import RetryCounter

from .fakes import FakeS3


@pytest.fixture
def made(monkeypatch):
    """Count the clients made; each is a FakeS3."""
    out = []

    def make_client(self):
        out.append(FakeS3())
        return out[-1]

    monkeypatch.setattr(S3Config, "make_client", make_client)
    clients.clear_clients()
    yield out
    clients.clear_clients()


def test_one_client_per_config(made):
    a, retries = clients.shared_client(S3Config(endpoint_url="http://a:1"))
    assert isinstance(retries, RetryCounter)
    assert clients.shared_client(S3Config(endpoint_url="http://a:1")) == (a, retries)  # an equal config
    b, _ = clients.shared_client(S3Config(endpoint_url="http://b:1"))
    assert b is not a and len(made) == 2


def test_one_retry_counter_per_client(made):
    client, _ = clients.shared_client(S3Config())
    clients.shared_client(S3Config())
    assert len(client.meta.events.handlers) == 1


def test_clear_clients(made):
    first, _ = clients.shared_client(S3Config())
    clients.clear_clients()
    assert clients.shared_client(S3Config())[0] is not first
