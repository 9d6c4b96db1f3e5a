"""Experiment (run by hand, not part of the suite): which graph shapes Beam 2.62's portable
Flink runner checkpoints. Each case is a 12 s PeriodicImpulse stream in FixedWindows(3) with
checkpointing every second; it passes when the job ends DONE without a restart and Flink's log
says at least one checkpoint completed.

    pytest -q -s tests/experiment_flink_checkpoints.py
"""

from __future__ import annotations

import os

import apache_beam as beam
import pytest
from apache_beam.pvalue import AsSingleton
from apache_beam.transforms import trigger, userstate, window

from test_streaming_runners import Impulse, ToRow, flink_streaming, run_stream

SOURCE_S = 12


class Keyed(beam.DoFn):
    """A keyed stateful DoFn: counts per key."""

    COUNT = userstate.CombiningValueStateSpec("count", sum)

    def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008
        count.add(1)
        yield element


def side_input(rows, p):
    one = p | "One" >> beam.Create([1])
    return rows | "Read" >> beam.Map(lambda r, s: r, AsSingleton(one))


def flatten_join(rows, p):
    """The init element joined with the data's end by Flatten + GroupByKey in the global window."""
    init = p | "Init" >> beam.Create(["init"])
    ends = [
        pc
        | f"{n}AtEnd"
        >> beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.AfterWatermark(),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        for n, pc in (("Rows", rows | "Tag" >> beam.Map(lambda r: "row")), ("Init", init))
    ]
    return (
        ends
        | beam.Flatten()
        | "Key" >> beam.Map(lambda v: (None, v))
        | beam.GroupByKey()
        | "Len" >> beam.Map(lambda kv: len(kv[1]))
    )


def grouped(rows, p):
    """What a copy's upload step is without its side input: keyed rows, GroupByKey per window, ParDo."""
    return (
        rows
        | "Key" >> beam.Map(lambda r: (r["id"] % 2, r))
        | beam.GroupByKey()
        | "Len" >> beam.Map(lambda kv: len(kv[1]))
    )


def stateful(rows, p):
    return rows | "Key" >> beam.Map(lambda r: (r["id"] % 2, r)) | beam.ParDo(Keyed())


def combine_globally(rows, p):
    return rows | "One" >> beam.Map(lambda r: 1) | beam.CombineGlobally(sum).without_defaults()


CASES = {
    "side-input": side_input,
    "flatten-join": flatten_join,
    "grouped": grouped,
    "stateful": stateful,
    "combine-globally": combine_globally,
}


@pytest.mark.parametrize("case", list(CASES))
def test_checkpoints(case, request):
    from conftest import runner_args

    server = request.getfixturevalue("flink_job_server")
    args = runner_args("flink", request) + flink_streaming(SOURCE_S, checkpointing=True)
    args = [a if not a.startswith("--checkpointing_interval") else "--checkpointing_interval=1000" for a in args]
    impulse = Impulse.from_now(SOURCE_S)

    def build(p):
        rows = p | impulse.source() | beam.ParDo(ToRow(impulse)) | beam.WindowInto(window.FixedWindows(3))
        CASES[case](rows, p)

    log_from = os.path.getsize(server.log_path)
    run_stream(args, build, 120, server, restarts_fail=True)
    with open(server.log_path, errors="replace") as f:
        f.seek(log_from)
        log = f.read()
    completed = log.count("Completed checkpoint")
    print(f"\n{case}: {completed} checkpoints completed, {log.count('Failed to trigger checkpoint')} failed to trigger")
    assert completed > 0
