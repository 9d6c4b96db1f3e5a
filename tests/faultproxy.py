"""A fault-injecting HTTP proxy for tests: sits on loopback between a client and an S3 server.

::

    boto3 ──HTTP──▶ FaultProxy (127.0.0.1:port) ──HTTP──▶ moto server
                     │ per request, decided by a seeded random.Random, in arrival order:
                     ├─ forward it and relay the answer                      (most requests)
                     ├─ answer 503 SlowDown / 500 InternalError, S3's XML    (≈ rate / 3 each)
                     ├─ reset the connection before forwarding               (≈ rate / 6)
                     ├─ forward it, then reset instead of answering          (≈ rate / 6)
                     ├─ refuse one operation for good (``refuse=``), e.g. 501 NotImplemented
                     └─ forward it, then answer 200 without a field S3 promises (``hollow=``)

For races, ``hold`` holds requests open until their partners arrive (a barrier per group,
released when ``hold_parties`` requests of the group are in, or after ``hold_timeout``), so that
two copies are certain to be inside the same window at once; ``drop_headers`` removes request
headers before forwarding, as a store that ignores them would (e.g. ``if-none-match``).

It injects at most ``max_faults`` faults and shuts itself down after ``lifetime`` seconds, so a
failing test never leaves it running. Use it as a context manager::

    with FaultProxy(upstream, seed=7) as proxy:
        config = s3_config.replace(endpoint_url=proxy.url)

The reset after forwarding is the case that tests idempotency: the server did the work (an
upload completed, an object deleted) but the client never heard, and retries it.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import struct
import threading
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, Iterable, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

__all__ = ["FaultProxy", "s3_operation"]

_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
}
_MESSAGES = {
    "SlowDown": "Please reduce your request rate.",
    "InternalError": "We encountered an internal error. Please try again.",
    "NotImplemented": "A header you provided implies functionality that is not implemented.",
    "AccessDenied": "Access Denied",
}


def s3_operation(method: str, path: str, query: str) -> str:
    """The S3 operation of a path-style request, e.g. ``("POST", "/b/k", "uploadId=1")``."""
    params = parse_qs(query, keep_blank_values=True)
    has_key = len([p for p in path.split("/") if p]) >= 2
    if "uploads" in params:
        return "CreateMultipartUpload" if method == "POST" else "ListMultipartUploads"
    if "uploadId" in params:
        return {
            "POST": "CompleteMultipartUpload",
            "DELETE": "AbortMultipartUpload",
            "PUT": "UploadPart",
            "GET": "ListParts",
        }.get(method, method)
    if not has_key:
        return {
            "GET": "ListObjectsV2",
            "PUT": "CreateBucket",
            "HEAD": "HeadBucket",
            "DELETE": "DeleteBucket",
            "POST": "DeleteObjects",
        }.get(method, method)
    return {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


def error_body(code: str, resource: str) -> bytes:
    """S3's XML error document."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{_MESSAGES.get(code, code)}</Message><Resource>{resource}</Resource>"
        f"<RequestId>{uuid.uuid4().hex[:16].upper()}</RequestId></Error>"
    ).encode()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # a reset is on purpose
        pass


class FaultProxy:
    """A threaded HTTP proxy to ``upstream`` that fails about ``rate`` of the requests::

        with FaultProxy("http://127.0.0.1:5000", seed=1, rate=1 / 8) as proxy:
            client = S3Config(endpoint_url=proxy.url, ...).make_client()

    Args:
      upstream: the server's ``http://host:port``.
      seed: seeds the fault decisions, made in the order requests arrive.
      rate: the share of requests that get a fault.
      max_faults: no more faults than this (then every request is forwarded).
      refuse: operation name -> (HTTP status, S3 error code), answered every time, e.g.
        ``{"AbortMultipartUpload": (501, "NotImplemented")}``; not counted as faults.
      refuse_when: ``(operation, path) -> (HTTP status, S3 error code) or None``, called once
        per request (it may keep state): refuses the requests it answers for, e.g. only the
        PUTs under a table's ``metadata/``; counted in ``refused``, not as faults.
      lifetime: seconds after which the proxy stops by itself.
      keep_answers: keep the body of every answer relayed, in ``answers``.
      hold: ``(operation, path) -> group or None``: requests of a group wait for each other.
      hold_parties, hold_timeout: how many requests release a group, and the longest wait.
      drop_headers: lower-case request header names not forwarded.
      hollow: operation name -> (field, count): the first ``count`` answers of the operation
        (every one, with -1) lose the XML element and the header of that name, e.g.
        ``{"CreateMultipartUpload": ("UploadId", 2)}``; counted in ``hollowed``, not as faults.

    Every request's operation and headers are kept in ``seen``.
    """

    def __init__(
        self,
        upstream: str,
        *,
        seed: int = 0,
        rate: float = 1 / 8,
        max_faults: int = 200,
        refuse: Optional[Dict[str, Tuple[int, str]]] = None,
        refuse_when: Optional[Callable[[str, str], Optional[Tuple[int, str]]]] = None,
        lifetime: float = 600.0,
        keep_answers: bool = False,
        hold: Optional[Callable[[str, str], Optional[str]]] = None,
        hold_parties: int = 2,
        hold_timeout: float = 10.0,
        drop_headers: Iterable[str] = (),
        hollow: Optional[Dict[str, Tuple[str, int]]] = None,
    ) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._random = random.Random(seed)
        self._rate = rate
        self._max_faults = max_faults
        self.refuse = dict(refuse or {})
        self._refuse_when = refuse_when
        self.refused: Counter = Counter()  # operation -> requests refused by refuse_when
        self._lock = threading.Lock()
        self.faults: Counter = Counter()  # (operation, fault) -> count
        self.requests: Counter = Counter()  # operation -> count
        self.seen: list = []  # (operation, {lower-case header: value}), in order
        self._keep_answers = keep_answers
        self.answers: list = []  # bodies relayed, when keep_answers
        self._hold = hold
        self._hold_parties = hold_parties
        self._hold_timeout = hold_timeout
        self._groups: Dict[str, Tuple[list, threading.Event]] = {}
        self.held: Counter = Counter()  # group -> requests that waited together
        self._drop = {h.lower() for h in drop_headers}
        self._hollow = dict(hollow or {})
        self.hollowed: Counter = Counter()  # operation -> answers relayed without their field
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def fault_count(self) -> int:
        return sum(self.faults.values())

    def start(self) -> "FaultProxy":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _wait_for_partners(self, operation: str, path: str) -> None:
        group = self._hold(operation, path) if self._hold is not None else None
        if group is None:
            return
        with self._lock:
            members, event = self._groups.setdefault(group, ([], threading.Event()))
            if event.is_set():
                return
            members.append(path)
            self.held[group] += 1
            if len(members) >= self._hold_parties:
                event.set()
        event.wait(self._hold_timeout)
        event.set()  # a group whose partner never came opens for good after the timeout

    def _refusal(self, operation: str, path: str) -> Optional[Tuple[int, str]]:
        """What ``refuse`` or ``refuse_when`` answers to the request (called once per request)."""
        with self._lock:
            if operation in self.refuse:
                return self.refuse[operation]
            answer = self._refuse_when(operation, path) if self._refuse_when is not None else None
            if answer is not None:
                self.refused[operation] += 1
            return answer

    def _decide(self, operation: str, refused: bool = False) -> Optional[str]:
        with self._lock:
            self.requests[operation] += 1
            if refused or operation in self.refuse:
                return "refuse"
            draw = self._random.random()
            if draw >= self._rate or self.fault_count >= self._max_faults:
                return None
            fault = ("503", "500", "503", "500", "reset", "reset-after")[int(draw / self._rate * 6)]
            self.faults[(operation, fault)] += 1
            return fault

    def _hollow_field(self, operation: str) -> Optional[str]:
        """The field to take out of this answer of ``operation``, if any (see ``hollow``)."""
        field, count = self._hollow.get(operation, (None, 0))
        with self._lock:
            if field is None or (count >= 0 and self.hollowed[operation] >= count):
                return None
            self.hollowed[operation] += 1
        return field

    def _handler_class(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                operation = s3_operation(self.command, split.path, split.query)
                with proxy._lock:
                    proxy.seen.append((operation, {k.lower(): v for k, v in self.headers.items()}))
                proxy._wait_for_partners(operation, split.path)
                refusal = proxy._refusal(operation, split.path)
                fault = proxy._decide(operation, refused=refusal is not None)
                if refusal is not None:
                    return self._error(*refusal, split.path)
                if fault in ("503", "500"):
                    code = "SlowDown" if fault == "503" else "InternalError"
                    return self._error(int(fault), code, split.path)
                if fault == "reset":
                    return self._reset()
                status, headers, data = self._forward(body)
                if proxy._keep_answers:
                    with proxy._lock:
                        proxy.answers.append(data)
                if fault == "reset-after":
                    return self._reset()
                field = proxy._hollow_field(operation) if status == 200 else None
                if field is not None:
                    data = re.sub(rf"<{field}>.*?</{field}>|<{field}/>".encode(), b"", data, flags=re.S)
                    headers = [(n, v) for n, v in headers if n.lower() != field.lower()]
                self.send_response(status)
                length = str(len(data))
                for name, value in headers:
                    if name.lower() == "content-length" and self.command == "HEAD":
                        length = value  # a HEAD answer tells the object's size, with no body
                    elif name.lower() not in _HOP_HEADERS:
                        self.send_header(name, value)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

            def _forward(self, body: bytes):
                connection = http.client.HTTPConnection(*proxy._upstream, timeout=60)
                try:
                    headers = {
                        k: v
                        for k, v in self.headers.items()
                        if k.lower() not in _HOP_HEADERS and k.lower() != "expect" and k.lower() not in proxy._drop
                    }
                    connection.request(self.command, self.path, body=body or None, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                    return response.status, response.getheaders(), data
                finally:
                    connection.close()

            def _error(self, status: int, code: str, resource: str) -> None:
                data = error_body(code, resource)
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _reset(self) -> None:
                # SO_LINGER 0: close() sends RST, which the client sees as a dropped connection.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

        return Handler
