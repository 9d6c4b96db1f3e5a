"""Two copies into one path at once: exactly one commits, the other fails naming it and leaves
nothing; on moto and on SeaweedFS (real servers), with the race window held open.

Each round, two processes (``tests/copy_worker.py``, started together) copy into the same
path with different sink ids. A proxy (``tests/faultproxy.py``) holds each copy's first guard
write (the claim ``P/_CLAIM``, or the sentinel) until the other copy's has arrived too, so
both are certainly past their listing of the path when they write: the window the guard must
close. The rounds run one after the other in each process, so that the two processes meet at
the proxy once per round.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from typing import Dict, List, Optional

import pytest

from beam_s3_sink import S3Config
from beam_s3_sink.keys import CopyKeys, S3Location
from conftest import ACCESS_KEY, REGION, SECRET_KEY, SERVERS, start_server
from copy_worker import row
from faultproxy import FaultProxy
from helpers import get_bytes, list_objects

ROUNDS = 20
ROWS = 30
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", params=SERVERS)
def server(request, s3_servers) -> str:
    """The S3 endpoint of each server the guard must hold on (the session's servers)."""
    if request.param not in s3_servers:
        s3_servers[request.param] = start_server(request.param)
    return s3_servers[request.param].endpoint


def client_for(endpoint: str):
    return S3Config(
        endpoint_url=endpoint,
        region_name=REGION,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        path_style=True,
    ).make_client()


def guard_puts(operation: str, path: str) -> Optional[str]:
    """The barrier group of a copy's guard write: its path (claim and sentinel PUTs)."""
    name = path.rsplit("/", 1)[-1]
    if operation == "PutObject" and (name == "_CLAIM" or name.endswith("-INCOMPLETE")):
        return path.rsplit("/", 1)[0]
    return None


def sentinel_puts(operation: str, path: str) -> Optional[str]:
    name = path.rsplit("/", 1)[-1]
    return path.rsplit("/", 1)[0] if operation == "PutObject" and name.endswith("-INCOMPLETE") else None


def run_workers(tmp_path, endpoint: str, bucket: str, sides: Dict[str, List[list]], **job) -> Dict[str, list]:
    """Start one worker process per side at once; return each side's results, in order."""
    processes = {}
    for side, copies in sides.items():
        path = tmp_path / f"job-{side}.json"
        path.write_text(json.dumps({"endpoint": endpoint, "bucket": bucket, "rows": ROWS, "copies": copies, **job}))
        processes[side] = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "copy_worker.py"), str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    results: Dict[str, list] = {}
    for side, process in processes.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"worker {side} failed: {err[-3000:]}"
        results.setdefault(side[0], []).extend(json.loads(line) for line in out.splitlines() if line.startswith("{"))
    return results


def sides(prefixes: List[str], lanes: int = 2) -> Dict[str, List[list]]:
    """Copies a (sink ids a-...) and b (b-...) of each path, in ``lanes`` pairs of processes
    that run their rounds at the same time (a round's two copies are in the same lane)."""
    return {
        f"{side}{lane}": [[p, f"{side}-{p}"] for p in prefixes[lane::lanes]] for side in "ab" for lane in range(lanes)
    }


def check_rounds(
    client, endpoint: str, bucket: str, results: Dict[str, list], rounds: int, old_keys: Optional[Dict[str, str]] = None
) -> Dict[str, int]:
    """Each round: one commit, one clean failure naming the winner, nothing of the loser left."""
    old_keys = old_keys or {}
    figures = {"commits": 0, "failures": 0, "loser_objects": 0, "pending_uploads": 0}
    a = sorted(results["a"], key=lambda r: r["prefix"])
    b = sorted(results["b"], key=lambda r: r["prefix"])
    assert len(a) == len(b) == rounds
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", ())
    figures["pending_uploads"] = len(uploads)
    for first, second in zip(a, b):
        assert first["prefix"] == second["prefix"]
        prefix = first["prefix"]
        winners = [r for r in (first, second) if r["ok"]]
        losers = [r for r in (first, second) if not r["ok"]]
        figures["commits"] += len(winners)
        figures["failures"] += len(losers)
        assert len(winners) == 1 and len(losers) == 1, f"{prefix}: {first} / {second}"
        winner, loser = winners[0]["sink_id"], losers[0]
        assert winners[0]["rows"] == ROWS
        assert repr(winner) in loser["error"], loser["error"]
        keys = CopyKeys(S3Location(bucket, prefix), winner)
        objects = list_objects(client, bucket, prefix + "/")
        lost = CopyKeys(S3Location(bucket, prefix), loser["sink_id"])
        figures["loser_objects"] += sum(1 for k in objects if lost.is_owned(k))
        assert sorted(objects) == sorted([keys.manifest] + [k for k in objects if keys.is_data_file(k)]), (
            f"{prefix}: only the winner's files and manifest: {sorted(objects)}"
        )
        assert prefix + "/_CLAIM" not in objects and old_keys.get(prefix) not in objects
        manifest = json.loads(get_bytes(client, bucket, keys.manifest))
        rows = []
        for entry in manifest["entries"]:
            key = entry["url"].split("/", 3)[3]
            rows += [
                {"id": int(i), "name": n, "amount": float(x)}
                for i, n, x in csv.reader(io.StringIO(get_bytes(client, bucket, key).decode(), newline=""))
            ]
        assert sorted(rows, key=lambda r: r["id"]) == [row(i) for i in range(ROWS)]
    assert figures["pending_uploads"] == 0 and figures["loser_objects"] == 0
    return figures


@pytest.mark.parametrize("if_exists,rounds", [("error", ROUNDS), ("replace", 6)])
def test_exactly_one_of_two_concurrent_copies_commits(server, tmp_path, if_exists, rounds):
    client = client_for(server)
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    run = uuid.uuid4().hex[:6]
    prefixes = [f"{if_exists}-{run}-{r:02d}" for r in range(rounds)]
    old = {}
    if if_exists == "replace":  # an earlier export in each path, that the winner replaces
        for prefix in prefixes:
            old[prefix] = f"{prefix}/old-export.csv"
            client.put_object(Bucket=bucket, Key=old[prefix], Body=b"1,old,0\n")
    with FaultProxy(server, rate=0, hold=guard_puts, hold_parties=2, hold_timeout=20) as proxy:
        results = run_workers(tmp_path, proxy.url, bucket, sides(prefixes), if_exists=if_exists)
        held_together = sum(1 for count in proxy.held.values() if count == 2)
    assert held_together == rounds, "each round's two guard writes were held until both arrived"
    figures = check_rounds(client, server, bucket, results, rounds, old)
    print(f"\n{if_exists} x{rounds} on {server}: {figures}")
    assert figures["commits"] == rounds and figures["failures"] == rounds


def test_store_that_ignores_if_none_match_falls_back_to_the_sentinel_relist(s3_endpoint, tmp_path):
    """A store that ignores If-None-Match (here: the proxy drops the header, on moto): the
    probe notices, and the sentinel re-list decides; the window between listing and sentinel
    held open as before."""
    client = client_for(s3_endpoint)
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    rounds = 6
    prefixes = [f"relist-{r:02d}" for r in range(rounds)]
    with FaultProxy(
        s3_endpoint, rate=0, hold=sentinel_puts, hold_parties=2, hold_timeout=20, drop_headers=["if-none-match"]
    ) as proxy:
        results = run_workers(
            tmp_path, proxy.url, bucket, {side: [[p, f"{side}-{p}"] for p in prefixes] for side in "ab"}
        )
        held_together = sum(1 for count in proxy.held.values() if count == 2)
    assert held_together == rounds
    figures = check_rounds(client, s3_endpoint, bucket, results, rounds)
    print(f"\nfallback x{rounds}: {figures}")


def test_appending_copies_share_a_path(s3_endpoint, tmp_path):
    """if_exists='append' takes no claim: two appending copies at once both commit."""
    client = client_for(s3_endpoint)
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    with FaultProxy(s3_endpoint, rate=0, hold=guard_puts, hold_parties=2) as proxy:
        results = run_workers(
            tmp_path, proxy.url, bucket, {side: [["shared", f"{side}-app"]] for side in "ab"}, if_exists="append"
        )
    assert [r["ok"] for side in "ab" for r in results[side]] == [True, True]
    objects = list_objects(client, bucket, "shared/")
    assert sorted(k for k in objects if "manifest" in k) == [
        "shared/_a-app-manifest.json",
        "shared/_b-app-manifest.json",
    ]
    assert not [k for k in objects if k.endswith(("INCOMPLETE", "_CLAIM"))]
