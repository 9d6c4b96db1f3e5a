"""One boto3 client per process per :class:`~beam_s3_sink.config.S3Config`, shared by every step.

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
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

from .config import S3Config
from .s3 import RetryCounter

__all__ = ["shared_client", "clear_clients"]

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
