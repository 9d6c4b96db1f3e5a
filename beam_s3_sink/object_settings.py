"""Per-object request settings (:class:`ObjectSettings`): encryption, storage class, content
type, part checksums and the expected bucket owner, and the one place each becomes request
parameters. Storage class and content type apply to data files only (the sentinel and the
manifest stay readable at once); the expected bucket owner is added to every request of a
client by a botocore ``before-parameter-build.s3`` handler, so that no call can miss it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Optional

__all__ = ["ObjectSettings", "SSE_MODES", "CHECKSUM_ALGORITHMS"]

SSE_MODES = ("AES256", "aws:kms", "aws:kms:dsse")
"""S3 server-side encryption modes (``x-amz-server-side-encryption``)."""

CHECKSUM_ALGORITHMS = ("CRC32C", "SHA256", "CRC32", "SHA1")
"""Part checksums S3 computes and verifies; completion passes each part's back."""

_ACCOUNT_ID = re.compile(r"\d{12}")


@dataclass(frozen=True)
class ObjectSettings:
    """How the objects of a copy are written; set as ``S3Config(objects=...)``.

    >>> settings = ObjectSettings(server_side_encryption="aws:kms", kms_key_id="alias/exports",
    ...                           expected_bucket_owner="111122223333", checksum_algorithm="CRC32C")
    >>> settings.data_file_args("application/vnd.apache.parquet")["ContentType"]
    'application/vnd.apache.parquet'

    Attributes:
      server_side_encryption: ``"AES256"`` (SSE-S3), ``"aws:kms"`` (SSE-KMS) or
        ``"aws:kms:dsse"``; None leaves it to the bucket's default encryption.
      kms_key_id: the KMS key (id, ARN or alias) for ``aws:kms``; None: the AWS managed key.
      bucket_key_enabled: use an S3 Bucket Key with SSE-KMS (fewer KMS calls); None: the
        bucket's setting.
      expected_bucket_owner: the 12-digit account id that must own the bucket; S3 refuses
        every request (``403 AccessDenied``) to a bucket of another account.
      storage_class: of the data files, e.g. ``"STANDARD_IA"``; None: ``STANDARD``.
      content_type: of the data files; None: the format's (``Format.content_type``:
        ``application/vnd.apache.parquet``, ``text/csv``, ...).
      checksum_algorithm: ``"CRC32C"`` or ``"SHA256"`` (or ``"CRC32"``, ``"SHA1"``): every part
        and every object carries that checksum, computed by botocore and verified by S3.
    """

    server_side_encryption: Optional[str] = None
    kms_key_id: Optional[str] = None
    bucket_key_enabled: Optional[bool] = None
    expected_bucket_owner: Optional[str] = None
    storage_class: Optional[str] = None
    content_type: Optional[str] = None
    checksum_algorithm: Optional[str] = None

    def __post_init__(self) -> None:
        if self.server_side_encryption is not None and self.server_side_encryption not in SSE_MODES:
            raise ValueError(
                f"ObjectSettings: server_side_encryption must be one of {', '.join(SSE_MODES)}, "
                f"got {self.server_side_encryption!r}"
            )
        if self.kms_key_id is not None and not str(self.server_side_encryption or "").startswith("aws:kms"):
            raise ValueError("ObjectSettings: kms_key_id needs server_side_encryption='aws:kms'")
        if self.expected_bucket_owner is not None and not _ACCOUNT_ID.fullmatch(str(self.expected_bucket_owner)):
            raise ValueError(
                "ObjectSettings: expected_bucket_owner must be a 12-digit AWS account id, "
                f"got {self.expected_bucket_owner!r}"
            )
        if self.checksum_algorithm is not None and self.checksum_algorithm not in CHECKSUM_ALGORITHMS:
            raise ValueError(
                f"ObjectSettings: checksum_algorithm must be one of {', '.join(CHECKSUM_ALGORITHMS)}, "
                f"got {self.checksum_algorithm!r}"
            )

    # request parameters ----------------------------------------------------------------
    def _encryption_args(self) -> Dict[str, Any]:
        args: Dict[str, Any] = {}
        if self.server_side_encryption:
            args["ServerSideEncryption"] = self.server_side_encryption
        if self.kms_key_id:
            args["SSEKMSKeyId"] = self.kms_key_id
        if self.bucket_key_enabled is not None:
            args["BucketKeyEnabled"] = self.bucket_key_enabled
        if self.checksum_algorithm:
            args["ChecksumAlgorithm"] = self.checksum_algorithm
        return args

    def data_file_args(self, content_type: Optional[str] = None) -> Dict[str, Any]:
        """Parameters of the ``CreateMultipartUpload`` (or ``PutObject``) of a data file;
        ``content_type`` is the format's, which :attr:`content_type` overrides.

        >>> ObjectSettings(storage_class="STANDARD_IA").data_file_args("text/csv")
        {'StorageClass': 'STANDARD_IA', 'ContentType': 'text/csv'}
        """
        args = self._encryption_args()
        if self.storage_class:
            args["StorageClass"] = self.storage_class
        content_type = self.content_type or content_type
        if content_type:
            args["ContentType"] = content_type
        return args

    def control_args(self) -> Dict[str, Any]:
        """Parameters of the ``PutObject`` of the sentinel and the manifest.

        >>> ObjectSettings(server_side_encryption="AES256", storage_class="GLACIER").control_args()
        {'ServerSideEncryption': 'AES256'}
        """
        return self._encryption_args()

    def part_args(self) -> Dict[str, Any]:
        """Parameters of every ``UploadPart``.

        >>> ObjectSettings(checksum_algorithm="SHA256").part_args()
        {'ChecksumAlgorithm': 'SHA256'}
        """
        return {"ChecksumAlgorithm": self.checksum_algorithm} if self.checksum_algorithm else {}

    @property
    def checksum_field(self) -> Optional[str]:
        """The name of a part's checksum in S3's answers and in ``CompleteMultipartUpload``.

        >>> ObjectSettings(checksum_algorithm="CRC32C").checksum_field
        'ChecksumCRC32C'
        """
        return f"Checksum{self.checksum_algorithm}" if self.checksum_algorithm else None

    # every request -----------------------------------------------------------------------
    def attach(self, client: Any) -> None:
        """Make ``client`` send ``ExpectedBucketOwner`` on every request that takes it.

        >>> ObjectSettings(expected_bucket_owner="111122223333").attach(client)
        """
        if self.expected_bucket_owner is None:
            return
        owner = self.expected_bucket_owner

        def add_owner(params: Dict[str, Any], model: Any, **_: Any) -> None:
            if "ExpectedBucketOwner" in model.input_shape.members:
                params.setdefault("ExpectedBucketOwner", owner)

        client.meta.events.register("before-parameter-build.s3", add_owner)
