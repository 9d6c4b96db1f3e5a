"""S3 settings of a copy, and the one place that turns them into a boto3 client.

Settings are resolved when the pipeline is built, in this order: an explicit
:class:`S3Config`, else the pipeline's Beam ``S3Options`` (``--s3_endpoint_url``,
``--s3_region_name``, ``--s3_access_key_id``, ...), else boto3's default credential chain
(environment, shared files, instance or task roles), which each worker resolves itself.

The resulting :class:`S3Config` is a frozen, picklable value that travels to the workers
inside the pipeline graph; clients are made from it on the workers, in ``DoFn.setup()``,
never at pipeline construction. Its ``repr`` never shows a secret.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Union

__all__ = ["S3Config", "MIN_PART_SIZE"]

MIN_PART_SIZE = 5 * 2**20
"""S3's smallest allowed multipart part (every part but the last)."""

_SECRET_FIELDS = ("secret_access_key", "session_token")


@dataclass(frozen=True)
class S3Config:
    """Where and how to reach S3.

    >>> cfg = S3Config(endpoint_url="http://127.0.0.1:5000", region_name="us-east-1",
    ...                access_key_id="AKIA...", secret_access_key="s3cr3t")
    >>> "s3cr3t" in repr(cfg)
    False

    Attributes:
      endpoint_url: a custom endpoint (MinIO, moto, Ceph...); None for AWS.
      region_name: the bucket's region.
      access_key_id, secret_access_key, session_token: static credentials; None to use
        boto3's default chain.
      profile_name: a named profile of the shared AWS files.
      path_style: path-style addressing (``http://host/bucket/key``), which most
        S3-compatible servers need; None lets botocore choose.
      verify: TLS verification: True, False, or the path of a CA bundle.
      retry_mode: botocore's retry mode, ``"standard"`` or ``"adaptive"``.
      max_attempts: attempts per request, the first included.
      connect_timeout, read_timeout: seconds.
      part_size: bytes per multipart part (at least 5 MiB).
      max_concurrency: part uploads in flight per worker, and completion threads.
    """

    endpoint_url: Optional[str] = None
    region_name: Optional[str] = None
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = field(default=None, repr=False)
    session_token: Optional[str] = field(default=None, repr=False)
    profile_name: Optional[str] = None
    path_style: Optional[bool] = None
    verify: Union[bool, str] = True
    retry_mode: str = "standard"
    max_attempts: int = 10
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    part_size: int = 8 * 2**20
    max_concurrency: int = 4

    def __post_init__(self) -> None:
        if self.retry_mode not in ("standard", "adaptive", "legacy"):
            raise ValueError(
                f"S3Config: retry_mode must be 'standard' or 'adaptive', got {self.retry_mode!r}")
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= 50:
            raise ValueError(f"S3Config: max_attempts must be an int from 1 to 50, got {self.max_attempts!r}")
        if not isinstance(self.part_size, int) or not MIN_PART_SIZE <= self.part_size <= 5 * 2**30:
            raise ValueError(
                f"S3Config: part_size must be from 5 MiB to 5 GiB (S3's limits), got {self.part_size!r}")
        if not isinstance(self.max_concurrency, int) or not 1 <= self.max_concurrency <= 64:
            raise ValueError(
                f"S3Config: max_concurrency must be an int from 1 to 64, got {self.max_concurrency!r}")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError(
                "S3Config: give access_key_id and secret_access_key together, or neither")

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.name in _SECRET_FIELDS:
                value = "***"
            shown.append(f"{f.name}={value!r}")
        return f"S3Config({', '.join(shown)})"

    __str__ = __repr__

    def replace(self, **changes: Any) -> "S3Config":
        """A copy with some settings changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_pipeline_options(cls, options: Any) -> "S3Config":
        """The settings given by the pipeline's Beam ``S3Options`` flags.

        >>> from apache_beam.options.pipeline_options import PipelineOptions
        >>> S3Config.from_pipeline_options(
        ...     PipelineOptions(["--s3_endpoint_url=http://localhost:9000"])).endpoint_url
        'http://localhost:9000'
        """
        from apache_beam.options.pipeline_options import S3Options

        s3 = options.view_as(S3Options)
        verify: Union[bool, str] = True
        if s3.s3_verify is not None:
            verify = _parse_verify(s3.s3_verify)
        endpoint = s3.s3_endpoint_url
        if endpoint and s3.s3_disable_ssl and endpoint.startswith("https://"):
            endpoint = "http://" + endpoint[len("https://"):]
        return cls(
            endpoint_url=endpoint,
            region_name=s3.s3_region_name,
            access_key_id=s3.s3_access_key_id,
            secret_access_key=s3.s3_secret_access_key,
            session_token=s3.s3_session_token,
            path_style=True if endpoint else None,
            verify=verify,
        )

    def client_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments for ``session.client("s3", ...)`` (holds secrets: never log it)."""
        from botocore.config import Config

        s3_settings: Dict[str, Any] = {}
        if self.path_style is not None:
            s3_settings["addressing_style"] = "path" if self.path_style else "virtual"
        config = Config(
            retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            max_pool_connections=max(10, 2 * self.max_concurrency + 2),
            s3=s3_settings or None,
            # Ask for checksums only where S3 requires them: several S3-compatible
            # servers reject the newer default trailing checksums.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        kwargs: Dict[str, Any] = {"config": config, "verify": self.verify}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        if self.region_name:
            kwargs["region_name"] = self.region_name
        if self.access_key_id:
            kwargs["aws_access_key_id"] = self.access_key_id
            kwargs["aws_secret_access_key"] = self.secret_access_key
            kwargs["aws_session_token"] = self.session_token
        return kwargs

    def make_client(self) -> Any:
        """A new boto3 S3 client with these settings; call it on the worker, in ``setup()``."""
        import boto3

        session = boto3.session.Session(profile_name=self.profile_name)
        return session.client("s3", **self.client_kwargs())


def _parse_verify(value: Any) -> Union[bool, str]:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in ("false", "0", "no", "off"):
        return False
    if text.lower() in ("true", "1", "yes", "on", ""):
        return True
    return text
