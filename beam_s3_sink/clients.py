"""One boto3 client per process per :class:`~beam_s3_sink.config.S3Config`, and :class:`_S3DoFn`,
the base of every ``DoFn`` that talks to S3 (initialization, ``Write``, completion).

A client is made lazily on the worker, in ``DoFn.setup()`` (making one parses botocore's
models: about half a second), and shared by the DoFn instances and part-upload pools of one
process, keyed by the frozen config, as Beam's own S3 filesystem does. Each shared client has
one :class:`~beam_s3_sink.s3.RetryCounter`, so each retry is counted once.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from .config import S3Config
from .s3 import RetryCounter

__all__ = ["NAMESPACE", "shared_client", "clear_clients"]

NAMESPACE = "beam_s3_sink"
"""The Beam metrics namespace of every counter of the package (rows, bytes, files, parts, retries)."""

_lock = threading.Lock()
_clients: Dict[S3Config, Tuple[Any, RetryCounter]] = {}


def shared_client(config: S3Config) -> Tuple[Any, RetryCounter]:
    """This process's client for ``config`` and its retry counter (made on first use).

    >>> client, retries = shared_client(S3Config(endpoint_url="http://127.0.0.1:9"))
    >>> shared_client(S3Config(endpoint_url="http://127.0.0.1:9"))[0] is client
    True
    """
    with _lock:
        entry = _clients.get(config)
        if entry is None:
            client = config.make_client()
            entry = _clients[config] = (client, RetryCounter.attach(client))
        return entry


def clear_clients() -> None:
    """Forget the cached clients (for tests that change credentials under one config)."""
    with _lock:
        _clients.clear()


class _S3DoFn(beam.DoFn):
    """The base of the DoFns that talk to S3: ``self._client`` (this process's shared client for
    ``config``, made in ``setup()``, never when the pipeline is built) and the ``retries``
    counter, which :meth:`_count_retries` fills from the client's :class:`RetryCounter`."""

    def __init__(self, config: S3Config) -> None:
        self._config = config
        self._client: Any = None
        self._retries: Optional[RetryCounter] = None
        self._retries_counter = self._counter("retries")

    @staticmethod
    def _counter(name: str) -> Any:
        """A Beam counter of the package's namespace."""
        return Metrics.counter(NAMESPACE, name)

    def setup(self) -> None:
        self._client, self._retries = shared_client(self._config)

    def _count_retries(self) -> None:
        """Move the retries botocore made since the last call into the Beam counter (on the
        bundle's thread, where Beam's metrics context lives)."""
        if self._retries is not None:
            self._retries_counter.inc(self._retries.drain())
