"""S3 settings of a copy (:class:`S3Config`), and the one place that turns them into a boto3 client.

Resolved when the pipeline is built, as a whole (not merged field by field): an explicit
``CopyToS3(s3=...)``, else the pipeline's Beam ``S3Options`` (``--s3_endpoint_url``, ...);
credentials neither gives come from boto3's default chain on each worker, optionally through
``role_arn`` (``sts:AssumeRole``, re-assumed by botocore before expiry). The frozen value
travels pickled in the pipeline graph (compressed, not encrypted: prefer roles to static keys
where the graph is visible); its ``repr`` never shows a secret.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Union

from .object_settings import ObjectSettings

__all__ = ["S3Config", "ObjectSettings", "MIN_PART_SIZE", "resolve_config"]

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
      profile_name: a named profile of the shared AWS files (instead of static keys).
      role_arn: a role to assume (``sts:AssumeRole``) with the credentials above, or
        boto3's chain when none are given; botocore re-assumes it before the temporary
        credentials expire, so copies longer than ``role_duration_seconds`` keep going.
      external_id: the external id the role's trust policy asks for.
      role_session_name: names the session in CloudTrail.
      role_duration_seconds: lifetime of the role's credentials, 900 to 43200 s. botocore
        refreshes them 15 minutes before expiry, so keep it well above 900.
      sts_endpoint_url: STS endpoint for ``AssumeRole``; None: AWS's regional STS endpoint.
        Not taken from ``endpoint_url``: an S3 endpoint (a VPC or FIPS endpoint) is not an STS
        endpoint in general; for MinIO, Ceph or moto give the same URL to both.
      path_style: path-style addressing (``http://host/bucket/key``), which most
        S3-compatible servers need; None lets botocore choose.
      verify: TLS verification: True, False, or the path of a CA bundle.
      retry_mode: botocore's retry mode, ``"standard"`` or ``"adaptive"``.
      max_attempts: attempts per request, the first included.
      connect_timeout, read_timeout: seconds.
      part_size: bytes per multipart part (at least 5 MiB).
      max_concurrency: part uploads in flight per worker, and completion threads.
      objects: how objects are written: encryption, expected bucket owner, storage class,
        content type, part checksums (an :class:`ObjectSettings`).
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
    role_arn: Optional[str] = None
    external_id: Optional[str] = None
    role_session_name: str = "beam-s3-sink"
    role_duration_seconds: int = 3600
    sts_endpoint_url: Optional[str] = None
    objects: ObjectSettings = ObjectSettings()

    def __post_init__(self) -> None:
        if self.retry_mode not in ("standard", "adaptive", "legacy"):
            raise ValueError(f"S3Config: retry_mode must be 'standard' or 'adaptive', got {self.retry_mode!r}")
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= 50:
            raise ValueError(f"S3Config: max_attempts must be an int from 1 to 50, got {self.max_attempts!r}")
        if not isinstance(self.part_size, int) or not MIN_PART_SIZE <= self.part_size <= 5 * 2**30:
            raise ValueError(f"S3Config: part_size must be from 5 MiB to 5 GiB (S3's limits), got {self.part_size!r}")
        if not isinstance(self.max_concurrency, int) or not 1 <= self.max_concurrency <= 64:
            raise ValueError(f"S3Config: max_concurrency must be an int from 1 to 64, got {self.max_concurrency!r}")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("S3Config: give access_key_id and secret_access_key together, or neither")
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("S3Config: session_token needs access_key_id and secret_access_key")
        if self.profile_name is not None and self.access_key_id is not None:
            raise ValueError("S3Config: give static keys or profile_name, not both")
        if self.role_arn is None and self.external_id is not None:
            raise ValueError("S3Config: external_id needs role_arn")
        if not isinstance(self.role_duration_seconds, int) or not 900 <= self.role_duration_seconds <= 43200:
            raise ValueError(
                "S3Config: role_duration_seconds must be an int from 900 to 43200 (STS's limits), "
                f"got {self.role_duration_seconds!r}"
            )
        if not isinstance(self.objects, ObjectSettings):
            raise TypeError(f"S3Config: objects must be an ObjectSettings, got {type(self.objects).__name__}")

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
            endpoint = "http://" + endpoint[len("https://") :]
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
        return kwargs

    def make_session(self) -> Any:
        """A boto3 session holding these credentials (assuming ``role_arn`` if set).

        >>> creds = S3Config(access_key_id="AKIA...", secret_access_key="s3cr3t",
        ...                  role_arn="arn:aws:iam::111122223333:role/export",
        ...                  external_id="x").make_session().get_credentials()
        >>> creds.method  # assumed on first use, and again before they expire
        'assume-role'
        """
        import boto3

        session = boto3.session.Session(
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            aws_session_token=self.session_token,
            profile_name=self.profile_name,
            region_name=self.region_name,
        )
        if self.role_arn is None:
            return session
        return boto3.session.Session(botocore_session=self._assume_role_session(session), region_name=self.region_name)

    def _assume_role_session(self, source: Any) -> Any:
        """A botocore session whose credentials are botocore's own refreshable assume-role
        credentials: each refresh calls ``AssumeRole`` with ``source``'s credentials."""
        import botocore.session
        from botocore.config import Config
        from botocore.credentials import (
            AssumeRoleCredentialFetcher,
            CredentialProvider,
            CredentialResolver,
            DeferredRefreshableCredentials,
        )

        source_credentials = source.get_credentials()
        if source_credentials is None:
            raise ValueError(
                f"S3Config: no credentials to assume {self.role_arn} with: give access keys or a "
                "profile, or set up boto3's default chain on the workers"
            )
        sts_kwargs: Dict[str, Any] = {
            "verify": self.verify,
            "config": Config(
                retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
            ),
        }
        if self.region_name:
            sts_kwargs["region_name"] = self.region_name
        if self.sts_endpoint_url:
            sts_kwargs["endpoint_url"] = self.sts_endpoint_url
        extra_args: Dict[str, Any] = {
            "RoleSessionName": self.role_session_name,
            "DurationSeconds": self.role_duration_seconds,
        }
        if self.external_id is not None:
            extra_args["ExternalId"] = self.external_id
        fetcher = AssumeRoleCredentialFetcher(
            client_creator=functools.partial(_create_client, source, sts_kwargs),
            source_credentials=source_credentials,
            role_arn=self.role_arn,
            extra_args=extra_args,
        )
        credentials = DeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials, method="assume-role")

        class _AssumedRole(CredentialProvider):
            METHOD = "assume-role"

            def load(self) -> Any:
                return credentials

        session = botocore.session.Session()
        session.register_component("credential_provider", CredentialResolver([_AssumedRole()]))
        return session

    def make_client(self) -> Any:
        """A new boto3 S3 client with these settings; call it on the worker, in ``setup()``.

        Every request it makes carries the ``objects.expected_bucket_owner``, if set; the
        credentials botocore would log at DEBUG are masked (:mod:`beam_s3_sink.redact`).
        """
        from .redact import install

        install()  # botocore's DEBUG logs would show temporary credentials
        client = self.make_session().client("s3", **self.client_kwargs())
        self.objects.attach(client)
        return client


def _create_client(session: Any, defaults: Dict[str, Any], service: str, **kwargs: Any) -> Any:
    """``session.client(service, ...)`` with ``defaults``: the STS client an assume-role
    fetcher makes each time it refreshes."""
    return session.client(service, **{**defaults, **kwargs})


def resolve_config(explicit: Optional[S3Config], options: Any) -> S3Config:
    """The settings a copy uses: ``explicit`` if given, else the pipeline's ``S3Options``.

    Whatever credentials neither holds come from boto3's default chain, on the workers.

    >>> from apache_beam.options.pipeline_options import PipelineOptions
    >>> opts = PipelineOptions(["--s3_endpoint_url=http://options:9000"])
    >>> resolve_config(S3Config(endpoint_url="http://explicit:9000"), opts).endpoint_url
    'http://explicit:9000'
    >>> resolve_config(None, opts).endpoint_url
    'http://options:9000'
    """
    if explicit is not None:
        return explicit
    return S3Config.from_pipeline_options(options)


def _parse_verify(value: Any) -> Union[bool, str]:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in ("false", "0", "no", "off"):
        return False
    if text.lower() in ("true", "1", "yes", "on", ""):
        return True
    return text
