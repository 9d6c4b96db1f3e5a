"""One boto3 client per process per :class:`~beam_s3_sink.config.S3Config`, shared by every step,
and :class:`_S3DoFn`, the base of every ``DoFn`` that talks to S3.

Making a boto3 client parses botocore's service models (about half a second, and several
MiB), and a pipeline's init, upload, spill-writing and finishing ``DoFn`` instances each
called ``setup()`` — on a runner with many bundle processors, many times per worker. Beam's
own S3 filesystem caches its client the same way::

    DoFn.setup() ─▶ shared_client(config) ─▶ cache hit?  ── yes ─▶ (client, retries)
                                                  └─ no ─▶ config.make_client() + RetryCounter ─┘

The cache is a per-process dict, keyed by the frozen (hashable) config, so two copies with
different settings never share a client; it is filled lazily, on the worker, never at import
or pipeline construction. botocore clients are thread-safe, so the DoFn instances of one
process (one per concurrent bundle) and the part-upload pools share one. Each shared client
has exactly one :class:`~beam_s3_sink.s3.RetryCounter`: whichever step drains it reports the
retries, so each retry is counted once.

The four steps that talk to S3 (initialization, the upload variants, the spill writer,
completion) derive from :class:`_S3DoFn`, which holds what they share: the config, the client
made in ``setup()``, the retry counter and the Beam metrics namespace::

    _S3DoFn ─┬─ _InitializeFn                        (initialization.py)
             ├─ _UploadBase ─┬─ _UploadFn ─ _ArrowUploadFn   (upload.py, arrow_upload.py)
             │               ├─ _WriteSpilledFn     (spill.py)
             │               └─ _ShardUploadFn      (sharding.py)
             └─ _CompleteFn                          (completion.py)

Every request they make goes through :func:`beam_s3_sink.s3.call`.
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
