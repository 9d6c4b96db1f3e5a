"""The path's claim: of two or more copies started into one path at once, exactly one goes on.

Every copy with ``if_exists="error"`` or ``"replace"`` writes ``P/_CLAIM`` (JSON naming its
holder) with a conditional ``PutObject`` (``If-None-Match: *``); a copy that finds another's
claim fails, naming it and the clean-up command, having written nothing, and a rerun of the
holder takes its own claim over. Completion releases it before deleting the sentinel.

A store that ignores the header is detected right after the claim is written (a second
conditional PUT of the key must get 412); the copy then guards with the **sentinel
re-list** (``RELIST``): it writes its sentinel, lists ``P/`` again, and the oldest sentinel
(``LastModified``, then the smaller sink id) wins, checked again before the manifest.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Optional

from .errors import S3RequestError
from .keys import CopyKeys
from .s3 import call, read_object

__all__ = [
    "ClaimOutcome",
    "take_claim",
    "put_if_absent",
    "read_claim_holder",
    "release_claim",
    "abort_hint",
    "CONDITIONAL",
    "RELIST",
]

_log = logging.getLogger(__name__)
CONDITIONAL = "conditional"
"""The store enforced If-None-Match: the claim decides."""
RELIST = "relist"
"""The store ignored If-None-Match: the sentinel re-list decides (see the module docstring)."""
_CONFLICT_RETRIES = 8


@dataclass(frozen=True)
class ClaimOutcome:
    """What :func:`take_claim` found: the ``guard`` when this copy may go on, else ``holder``."""

    guard: Optional[str] = None  # CONDITIONAL or RELIST; None when another copy holds it
    holder: Optional[str] = None  # the sink id holding the claim, when not this copy
    started: str = ""  # when the holder claimed the path (its claim's body)


def abort_hint(uri: str, sink_id: str) -> str:
    """The clean-up command for copy ``sink_id`` into ``uri``, as a person types it."""
    return f"beam-s3-copy --abort {sink_id} --output {uri}"


def put_if_absent(client: Any, bucket: str, key: str, body: bytes, put_args: Dict[str, Any]) -> Optional[str]:
    """PutObject with If-None-Match: *; None when written, else S3's error code."""
    try:
        call(client, "PutObject", bucket, key, Body=body, IfNoneMatch="*", ContentType="application/json", **put_args)
        return None
    except S3RequestError as exc:
        if exc.code == "PreconditionFailed" or exc.status == 412:
            return "PreconditionFailed"
        if exc.code == "ConditionalRequestConflict" or exc.status == 409:
            return "ConditionalRequestConflict"
        if exc.code == "NotImplemented" or exc.status == 501:
            return "NotImplemented"
        raise


def read_claim_holder(client: Any, bucket: str, key: str) -> Optional[Dict[str, Any]]:
    """The claim's body (``sink_id``, ``nonce``, ``started``), or None if there is no claim."""
    try:
        data = read_object(client, bucket, key)
    except S3RequestError as exc:
        if exc.code in ("NoSuchKey", "404") or exc.status == 404:
            return None
        raise
    try:
        body = json.loads(data)
        return body if isinstance(body, dict) and isinstance(body.get("sink_id"), str) else {"sink_id": "?"}
    except ValueError:
        return {"sink_id": "?"}


def take_claim(client: Any, keys: CopyKeys, put_args: Optional[Dict[str, Any]] = None) -> ClaimOutcome:
    """Claim ``P/`` for copy ``keys.sink_id`` (see the module docstring)."""
    put_args = put_args or {}
    bucket, key = keys.location.bucket, keys.claim
    body = json.dumps(
        {
            "sink_id": keys.sink_id,
            "nonce": secrets.token_hex(8),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    ).encode()
    for attempt in range(_CONFLICT_RETRIES):
        answer = put_if_absent(client, bucket, key, body, put_args)
        if answer is None:
            return ClaimOutcome(guard=_probe(client, keys, body, put_args))
        if answer == "NotImplemented":
            _log.warning(
                "s3://%s does not take conditional writes (If-None-Match); copy %s falls back to the sentinel re-list",
                bucket,
                keys.sink_id,
            )
            return ClaimOutcome(guard=RELIST)
        if answer == "ConditionalRequestConflict":  # another conditional write is in flight
            time.sleep(0.05 * (attempt + 1))
            continue
        holder = read_claim_holder(client, bucket, key)
        if holder is None:  # released between our PUT and our GET: try again
            continue
        if holder["sink_id"] == keys.sink_id:
            _log.info(
                "copy %s takes over its own claim on %s (an earlier run, or a retried request)",
                keys.sink_id,
                keys.location.uri,
            )
            return ClaimOutcome(guard=CONDITIONAL)
        return ClaimOutcome(holder=holder["sink_id"], started=str(holder.get("started", "")))
    raise S3RequestError(
        f"could not claim {keys.location.object_uri(key)}: the claim kept changing ({_CONFLICT_RETRIES} attempts)"
    )


def _probe(client: Any, keys: CopyKeys, body: bytes, put_args: Dict[str, Any]) -> str:
    """Whether the store enforced the condition: a second conditional PUT must get 412."""
    bucket, key = keys.location.bucket, keys.claim
    answer = put_if_absent(client, bucket, key, body, put_args)
    if answer in ("PreconditionFailed", "ConditionalRequestConflict"):
        return CONDITIONAL
    _log.warning(
        "s3://%s ignores If-None-Match (a second conditional PUT of %s succeeded); copy %s "
        "falls back to the sentinel re-list",
        bucket,
        key,
        keys.sink_id,
    )
    try:
        call(client, "DeleteObject", bucket, key)
    except S3RequestError as exc:
        _log.warning("could not delete %s: %s", key, exc)
    return RELIST


def release_claim(client: Any, keys: CopyKeys) -> None:
    """Delete the claim this copy holds (init took it: no other copy can have written it since,
    so it is deleted without reading it). Raises S3RequestError."""
    call(client, "DeleteObject", keys.location.bucket, keys.claim)
