"""Step 1, initialization: runs once, on one worker, before any row is uploaded.

It lists ``P/`` and decides: a manifest of ``ID`` and no sentinel means the copy already
finished (report that result again, write nothing); otherwise it takes the path's claim
(:mod:`.claim`, unless ``if_exists="append"``), fails on objects ``ID`` did not write
(``if_exists="error"``, naming them) or records them for completion to delete
(``"replace"``), writes the ``INCOMPLETE`` sentinel, and removes what an earlier failed run
of ``ID`` left (pending uploads, best effort; data files and a stale manifest, which a reader
would see, or the copy fails).

A stream's initialization runs in its ``Initialize`` step and again in each ``Write`` and
completion instance (:mod:`.stream_init`: a stream's steps read no side input), so it is
idempotent and removes nothing: an earlier run's committed units and commit records stay (a
unit's replay finishes its commit), and its pending uploads, which could be a running writer's,
are left to the end of the stream; the sentinel is written only when it is missing.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Iterable, List, Optional

from .claim import CONDITIONAL, RELIST, abort_hint, release_claim, take_claim
from .cleanup import abort_uploads
from .clients import _S3DoFn
from .config import S3Config
from .errors import S3RequestError
from .keys import CopyKeys
from .manifest import result_from_manifest
from .messages import InitOutcome
from .s3 import call, list_keys, read_object

__all__ = ["initialize", "fallback_winner"]

_log = logging.getLogger(__name__)
_SHOWN_FOREIGN_KEYS = 5


class _InitializeFn(_S3DoFn):
    """Validates the destination and writes the sentinel; emits one :class:`InitOutcome`."""

    def __init__(self, keys: CopyKeys, config: S3Config, if_exists: str = "error", stream: bool = False) -> None:
        super().__init__(config)
        self._keys = keys
        self._if_exists = if_exists
        self._stream = stream

    def process(self, _unused: Any, errors: Iterable[Any] = ()) -> Iterable[InitOutcome]:
        for error in errors:
            yield InitOutcome(error=f"the copy was aborted before writing anything, by an upstream error: {error}")
            return
        try:
            init = initialize(
                self._client, self._keys, self._if_exists, self._config.objects.control_args(), self._stream
            )
        except S3RequestError as exc:
            init = InitOutcome(error=str(exc))
        self._count_retries()
        yield init


def initialize(
    client: Any,
    keys: CopyKeys,
    if_exists: str = "error",
    put_args: Optional[Dict[str, Any]] = None,
    stream: bool = False,
) -> InitOutcome:
    """Run initialization against S3 (see the module docstring); return what it found.

    ``put_args`` are extra ``PutObject`` parameters of the sentinel and the claim (encryption,
    checksum: ``ObjectSettings.control_args()``)."""
    put_args = put_args or {}
    location = keys.location
    bucket = location.bucket
    present = {o["Key"] for o in list_keys(client, bucket, location.list_prefix)}
    if not stream and keys.manifest in present and keys.sentinel not in present:
        data = read_object(client, bucket, keys.manifest)
        _log.info("copy %s to %s already finished; reporting its result again", keys.sink_id, location.uri)
        return InitOutcome(done=result_from_manifest(data, location.object_uri(keys.manifest)))

    guard = ""
    if if_exists != "append":
        claim = take_claim(client, keys, put_args)
        if claim.guard is None:
            return InitOutcome(error=_claimed_by_other(keys, claim.holder or "?", claim.started))
        guard = claim.guard
        present = {o["Key"] for o in list_keys(client, bucket, location.list_prefix)}
        if not stream and keys.manifest in present and keys.sentinel not in present:  # finished meanwhile
            _release(client, keys, guard)
            data = read_object(client, bucket, keys.manifest)
            return InitOutcome(done=result_from_manifest(data, location.object_uri(keys.manifest)))

    foreign = sorted(k for k in present if not keys.is_owned(k) and k != keys.claim)
    if foreign and if_exists == "error":
        _release(client, keys, guard)
        return InitOutcome(error=_not_empty(keys, foreign))

    # The sentinel goes first, so that readers see "in progress" while leftovers are removed.
    if not stream or keys.sentinel not in present:  # a stream's is written once (module docstring)
        call(client, "PutObject", bucket, keys.sentinel, Body=b"", **put_args)
    if guard == RELIST:
        winner = fallback_winner(client, keys)
        if winner != keys.sink_id:
            call(client, "DeleteObject", bucket, keys.sentinel)
            return InitOutcome(error=_claimed_by_other(keys, winner, ""))
    if stream:  # removes nothing: other workers of the stream may be writing (module docstring)
        return InitOutcome(guard=guard)
    warnings = abort_uploads(client, keys)[1]
    leftovers = sorted(k for k in present if k != keys.sentinel and keys.is_owned(k))
    for key in leftovers:
        call(client, "DeleteObject", bucket, key)
    if leftovers:
        _log.info("removed %d object(s) left by an earlier failed run of copy %s", len(leftovers), keys.sink_id)
    replaced = tuple(foreign) if if_exists == "replace" else ()
    return InitOutcome(warnings=tuple(warnings), replaced=replaced, guard=guard)


def fallback_winner(client: Any, keys: CopyKeys) -> str:
    """Of the copies whose sentinel is directly under ``P/``, the oldest (``LastModified``, then
    sink id): the one that goes on when the store ignores If-None-Match (see :mod:`.claim`)."""
    contenders = []
    for item in list_keys(client, keys.location.bucket, keys.location.list_prefix):
        owner = keys.sentinel_owner(item["Key"])
        if owner is not None:
            contenders.append((item["LastModified"], owner))
    return min(contenders)[1] if contenders else keys.sink_id


def _release(client: Any, keys: CopyKeys, guard: str) -> None:
    if guard == CONDITIONAL:
        release_claim(client, keys)


def _claimed_by_other(keys: CopyKeys, holder: str, started: str) -> str:
    since = f" since {started}" if started else ""
    return (
        f"another copy, sink_id {holder!r}, is writing to {keys.location.uri} (it holds the path's "
        f"claim{since}); a path takes one copy at a time unless if_exists='append'. Nothing of copy "
        f"{keys.sink_id!r} was written. If copy {holder!r} crashed or was killed, rerun it with "
        f"sink_id {holder!r} to finish it, or remove what it left with: {abort_hint(keys.location.uri, holder)}"
    )


def _not_empty(keys: CopyKeys, foreign: List[str]) -> str:
    location = keys.location
    shown = ", ".join(foreign[:_SHOWN_FOREIGN_KEYS])
    more = f" and {len(foreign) - _SHOWN_FOREIGN_KEYS} more" if len(foreign) > _SHOWN_FOREIGN_KEYS else ""
    text = (
        f"{location.uri} is not empty: {len(foreign)} object(s) that copy {keys.sink_id!r} did not "
        f"write are there ({shown}{more}); copy to an empty path, delete those objects first, "
        "or pass if_exists='append' or 'replace'. Nothing was written."
    )
    incomplete = sorted({o for o in map(keys.sentinel_owner, foreign) if o is not None})
    committed = sorted({o for o in map(keys.manifest_owner, foreign) if o is not None} - set(incomplete))
    for owner in committed[:_SHOWN_FOREIGN_KEYS]:
        text += f" Copy {owner!r} has committed there (its manifest is there)."
    for owner in incomplete[:_SHOWN_FOREIGN_KEYS]:
        text += (
            f" Copy {owner!r} there is incomplete (its sentinel is there): rerun it with the same "
            f"sink_id to finish it, or remove what it left with: {abort_hint(location.uri, owner)}."
        )
    return text
