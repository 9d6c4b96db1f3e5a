"""cli/progress: rows read, counted on the workers and shown while the copy runs."""

from __future__ import annotations

import io
import pickle

from beam_s3_sink.cli.progress import ProgressLine, RowCounter, format_progress, rows_in


def test_counters_report_through_the_directory(tmp_path):
    a, b = RowCounter(str(tmp_path)), pickle.loads(pickle.dumps(RowCounter(str(tmp_path))))
    for counter, rows in ((a, 5), (b, 7)):
        counter.setup()
        counter.add(rows, 100)
        counter.flush()
    assert rows_in(str(tmp_path)) == (12, 200)
    assert rows_in(str(tmp_path / "gone")) == (0, 0)


def test_a_counter_without_a_directory_only_counts_metrics():
    counter = RowCounter()
    counter.setup()
    counter.add(3)
    counter.flush()


def test_format_progress():
    assert format_progress(50, 100, 5.0, "rows", False, 50) == (
        "progress: 50% (50 of 100 rows), 10 rows/s, 5 s elapsed, about 5 s left"
    )
    assert format_progress(3, None, 0.0, "rows", False, 3) == "rows read: 3 (0 rows/s, 0 s)"
    assert format_progress(100, 100, 1.0, "rows", True, 100).startswith("100%|██████████|")


def test_the_line_shows_the_final_count(tmp_path):
    counter = RowCounter(str(tmp_path))
    counter.setup()
    counter.add(4)
    counter.flush()
    out = io.StringIO()
    with ProgressLine(str(tmp_path), out=out, total_rows=8, log_every=3600):
        pass
    assert out.getvalue().startswith("progress: 50% (4 of 8 rows)")
