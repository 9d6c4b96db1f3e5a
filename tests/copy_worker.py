"""A copy pipeline in a process of its own, for the tests of concurrent and crashed copies.

``python tests/copy_worker.py JOB.json`` runs, one after the other, the copies the job lists
(each a small DirectRunner pipeline, in this process) and prints one JSON line per copy::

    {"prefix": ..., "sink_id": ..., "ok": true, "rows": 30, "error": null}

The job: ``{"endpoint", "bucket", "if_exists", "rows", "copies": [[prefix, sink_id], ...],
"format": "csv", "slow": 0}``; ``slow`` > 0 makes a generated data set that takes that many
seconds per 1000 rows to produce, so that a test can kill the process while parts upload.
"""

from __future__ import annotations

import json
import sys
import time

import helpers
from beam_s3_sink import S3Config
from conftest import ACCESS_KEY, REGION, SECRET_KEY


def row(i: int) -> dict:
    """Row ``i`` of every test copy: the same rows in every run."""
    return {"id": i, "name": f'name-{i}, "{i % 7}"', "amount": i * 0.5}


def slow_row(i: int, pause: float) -> dict:
    if i % 1000 == 0:
        time.sleep(pause)
    return {"id": i, "name": f"{i:08d}" + "x" * 200, "amount": i * 0.5}


def main(path: str) -> None:
    import pyarrow as pa

    with open(path) as f:
        job = json.load(f)
    config = S3Config(
        endpoint_url=job["endpoint"],
        region_name=REGION,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        path_style=True,
        max_attempts=3,
    )
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
    for prefix, sink_id in job["copies"]:
        kwargs = dict(
            uri=f"s3://{job['bucket']}/{prefix}",
            format=job.get("format", "csv"),
            schema=schema,
            sink_id=sink_id,
            s3=config,
            if_exists=job.get("if_exists", "error"),
            fail_on_error=False,
            max_file_size=job.get("max_file_size", 256 * 2**20),
        )
        pause = job.get("slow", 0)
        if pause:

            def make(i, pause=pause):
                return slow_row(i, pause)

            result = helpers.run_copy(generate=(make, job["rows"]), **kwargs)
        else:
            result = helpers.run_copy([row(i) for i in range(job["rows"])], **kwargs)
        print(
            json.dumps(
                {"prefix": prefix, "sink_id": sink_id, "ok": result.ok, "rows": result.rows, "error": result.error}
            ),
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1])
