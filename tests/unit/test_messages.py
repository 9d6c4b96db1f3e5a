"""messages: the values that flow between the steps are frozen, picklable and merge predictably
(with completion.MergeReports)."""

from __future__ import annotations

import pickle

import pytest

from beam_s3_sink.completion import MergeReports
from beam_s3_sink.messages import InitOutcome, PendingFile, UploadReport
from beam_s3_sink.results import CopyToResult

FILE = PendingFile("p/k", "upload-1", ((1, '"etag"'),), 2, 10, ("sum",))


def test_values_are_frozen_and_picklable():
    for value in (
        FILE,
        UploadReport(files=(FILE,), rows=2, bytes=10),
        InitOutcome(done=CopyToResult("s3://b/p", "s1"), warnings=("w",), replaced=("p/old",), guard="relist"),
    ):
        assert pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(AttributeError):
        FILE.rows = 3  # type: ignore[misc]


def merge(*reports):
    combine = MergeReports()
    accumulator = combine.create_accumulator()
    for report in reports:
        accumulator = combine.add_input(accumulator, report)
    return combine.extract_output(accumulator)


def test_merge_adds_files_and_totals_and_keeps_the_smallest_error():
    a = UploadReport(files=(FILE,), rows=2, bytes=10, error="z")
    b = UploadReport(files=(FILE,), rows=1, bytes=5, error="b")
    merged = merge(a, b)
    assert (len(merged.files), merged.rows, merged.bytes, merged.error) == (2, 3, 15, "b")
    assert merge(b, a).error == "b" and merge(UploadReport(), UploadReport()).error is None
    assert merge() == UploadReport() and isinstance(merged, UploadReport)


def test_init_outcome_defaults_mean_ready():
    outcome = InitOutcome()
    assert (outcome.error, outcome.done, outcome.warnings, outcome.replaced, outcome.guard) == (None, None, (), (), "")
