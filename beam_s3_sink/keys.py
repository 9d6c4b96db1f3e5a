"""Object keys of a copy: where each object lives and which objects a copy owns.

A copy to ``s3://bucket/P`` with sink id ``ID`` writes only these keys::

    P/ID-<token>-<nnnn>.<ext>       data files (token: 16 hex digits, one per file writer)
    P/ID-batch-<bbbb>-<nnnn>.<ext>  data files of batch bbbb (num_batches: same keys every run)
    P/col=v/.../ID-...              the same, in Hive-style partition directories (partition_by)
    P/_ID-INCOMPLETE                sentinel: a copy of ID is in progress or failed (a stream: runs)
    P/_ID-manifest.json             manifest: the copy of ID finished
    P/_ID-<unit>.manifest.json      a stream's unit committed (unit: StreamUnit.id)
    P/_ID-<unit>.commit.json        a stream's unit being committed: the files it completes
    P/_CLAIM                        claim: the one copy writing to P now (see .claim); not owned by ID

Ownership is decided by matching the whole key, never by a bare prefix test, so that the
copy ``orders`` never claims the files of the copy ``orders-2026``.
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlparse

__all__ = [
    "S3Location",
    "parse_s3_uri",
    "validate_sink_id",
    "new_sink_id",
    "new_token",
    "CopyKeys",
]

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_SINK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
TOKEN_HEX_DIGITS = 16
CLAIM_NAME = "_CLAIM"
_SENTINEL_RE = re.compile(r"^_([A-Za-z0-9][A-Za-z0-9_.\-]{0,99})-INCOMPLETE$")
_MANIFEST_RE = re.compile(r"^_([A-Za-z0-9][A-Za-z0-9_.\-]{0,99})-manifest\.json$")
_UNIT_RE = r"(?:global|\d{8}T\d{6}(?:\.\d{6})?Z-\d{8}T\d{6}(?:\.\d{6})?Z)-p\d+"
MAX_BATCHES = 10_000  # num_batches: batch numbers are 4 digits, so that no token can read as one


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix without a trailing slash (``""`` for the bucket's root).

    >>> parse_s3_uri("s3://bucket/exports/orders/")
    S3Location(bucket='bucket', prefix='exports/orders')
    """

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        """The canonical ``s3://bucket/prefix`` form."""
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, name: str) -> str:
        """The key of ``name`` directly under the prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name

    def object_uri(self, key: str) -> str:
        """The ``s3://`` URI of one object of this bucket."""
        return f"s3://{self.bucket}/{key}"

    @property
    def list_prefix(self) -> str:
        """The prefix to list: everything under ``P/``."""
        return f"{self.prefix}/" if self.prefix else ""


def parse_s3_uri(uri: str) -> S3Location:
    """Parse ``s3://bucket[/path]``; raise ``ValueError`` saying what is wrong otherwise.

    >>> parse_s3_uri("s3://my-bucket").prefix
    ''
    """
    if not isinstance(uri, str):
        raise ValueError(f"CopyToS3: the destination must be a string 's3://bucket/path', got {type(uri).__name__}")
    parsed = urlparse(uri)
    if parsed.scheme != "s3":
        raise ValueError(f"CopyToS3: the destination {uri!r} is not an S3 URI; write it as 's3://bucket/path'")
    bucket = parsed.netloc
    if not _BUCKET_RE.match(bucket) or ".." in bucket:
        raise ValueError(
            f"CopyToS3: {bucket!r} in {uri!r} is not a valid bucket name "
            "(3-63 characters: lower-case letters, digits, '.' and '-')"
        )
    if parsed.query or parsed.fragment or parsed.params:
        raise ValueError(f"CopyToS3: the destination {uri!r} must not carry '?', ';' or '#' parts")
    prefix = parsed.path.strip("/")
    if "//" in prefix:
        raise ValueError(f"CopyToS3: the path of {uri!r} has an empty segment ('//')")
    return S3Location(bucket, prefix)


def validate_sink_id(sink_id: str) -> str:
    """Return ``sink_id`` if it is a usable sink id, else raise ``ValueError``."""
    if not isinstance(sink_id, str) or not _SINK_ID_RE.match(sink_id):
        raise ValueError(
            f"CopyToS3: sink_id {sink_id!r} is not valid: use 1-100 letters, digits, '_', '.' "
            "or '-', starting with a letter or digit"
        )
    return sink_id


def new_sink_id() -> str:
    """A fresh sink id, such as ``copy-4f1c2a9be07d``: made once when the pipeline is built."""
    return "copy-" + uuid.uuid4().hex[:12]


def new_token() -> str:
    """A fresh file-writer token (16 hex digits): one per data file, per attempt."""
    return secrets.token_hex(TOKEN_HEX_DIGITS // 2)


@dataclass(frozen=True)
class CopyKeys:
    """The keys that one copy (a location and a sink id) writes and owns.

    >>> keys = CopyKeys(S3Location("b", "exports"), "nightly")
    >>> keys.sentinel
    'exports/_nightly-INCOMPLETE'
    >>> keys.data_file("0123456789abcdef", 1, "csv")
    'exports/nightly-0123456789abcdef-0001.csv'
    >>> keys.batch_file(3, 1, "csv", "day=2024-01-01")
    'exports/day=2024-01-01/nightly-batch-0003-0001.csv'
    """

    location: S3Location
    sink_id: str

    @property
    def sentinel(self) -> str:
        return self.location.key(f"_{self.sink_id}-INCOMPLETE")

    @property
    def manifest(self) -> str:
        return self.location.key(f"_{self.sink_id}-manifest.json")

    def unit_manifest(self, unit: str) -> str:
        """The manifest of a stream's unit ``unit`` (``StreamUnit.id``).

        >>> CopyKeys(S3Location("b", "p"), "a").unit_manifest("global-p0")
        'p/_a-global-p0.manifest.json'
        """
        return self.location.key(f"_{self.sink_id}-{unit}.manifest.json")

    def unit_commit(self, unit: str) -> str:
        """The record of a unit's commit in progress: the files it completes (:mod:`.stream`)."""
        return self.location.key(f"_{self.sink_id}-{unit}.commit.json")

    def is_unit_object(self, key: str) -> bool:
        """Whether ``key`` is a unit manifest or a unit's commit record of this copy."""
        pattern = r"_" + re.escape(self.sink_id) + "-" + _UNIT_RE + r"\.(?:manifest|commit)\.json"
        return re.fullmatch(pattern, self._relative(key) or "") is not None

    @property
    def claim(self) -> str:
        """The path's claim object, which every copy into ``P`` contends for (:mod:`.claim`)."""
        return self.location.key(CLAIM_NAME)

    def sentinel_owner(self, key: str) -> Optional[str]:
        """The sink id whose sentinel ``key`` is (directly under ``P/``), else None.

        >>> CopyKeys(S3Location("b", "p"), "a").sentinel_owner("p/_other-INCOMPLETE")
        'other'
        """
        return self._owner(key, _SENTINEL_RE)

    def manifest_owner(self, key: str) -> Optional[str]:
        """The sink id whose manifest ``key`` is (directly under ``P/``), else None.

        >>> CopyKeys(S3Location("b", "p"), "a").manifest_owner("p/_other-manifest.json")
        'other'
        """
        return self._owner(key, _MANIFEST_RE)

    def _owner(self, key: str, pattern: "re.Pattern[str]") -> Optional[str]:
        """The sink id that ``pattern`` finds in ``key``'s name directly under ``P/``, else None."""
        rest = self._relative(key)
        match = pattern.match(rest) if rest is not None else None
        return match.group(1) if match else None

    @property
    def data_prefix(self) -> str:
        """The prefix to list for data files and uploads of this copy: all of ``P/``, since
        partitioned files live in subdirectories; filter what is listed with :meth:`is_data_file`."""
        return self.location.list_prefix

    def data_file(self, token: str, number: int, extension: str, directory: str = "") -> str:
        """The key of a data file; ``directory``: a partition's ``col=value/...`` path, or ``""``."""
        return self._in(directory, f"{self.sink_id}-{token}-{number:04d}.{extension}")

    def batch_file(self, batch: int, number: int, extension: str, directory: str = "") -> str:
        """The key of data file ``number`` of batch ``batch`` (``num_batches``)."""
        return self._in(directory, f"{self.sink_id}-batch-{batch:04d}-{number:04d}.{extension}")

    def _in(self, directory: str, name: str) -> str:
        return self.location.key(f"{directory}/{name}" if directory else name)

    def _relative(self, key: str) -> Optional[str]:
        head = self.location.list_prefix
        return key[len(head) :] if key.startswith(head) else None

    def is_data_file(self, key: str) -> bool:
        """Whether ``key`` is a data file of this copy."""
        rest = self._relative(key)
        return rest is not None and bool(self._data_re().match(rest))

    def is_owned(self, key: str) -> bool:
        """Whether ``key`` is an object this copy writes (data file, sentinel, manifest, or a
        stream's unit objects)."""
        return key in (self.sentinel, self.manifest) or self.is_data_file(key) or self.is_unit_object(key)

    def _data_re(self) -> "re.Pattern[str]":
        return re.compile(
            r"(?:[^/=]+=[^/]+/)*"
            + re.escape(self.sink_id)
            + r"-(?:[0-9a-f]{%d}|batch-\d{4})-\d{4,}\.[a-z0-9.]+$" % TOKEN_HEX_DIGITS
        )
