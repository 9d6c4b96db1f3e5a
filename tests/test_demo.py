"""The demo that `make demo` runs, run as a user runs it: a subprocess with its own S3 server."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_copies_and_reads_back_every_row():
    completed = subprocess.run(
        [sys.executable, "-m", "pipelines.copy_to_s3", "--demo", "--rows", "25000", "--max_file_size", "512KiB"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    out = completed.stdout
    assert "== parquet: 25,000 rows in" in out and "== csv: 25,000 rows in" in out
    assert out.count("-> OK") == 2
    assert "All checks passed" in out
    assert "INCOMPLETE" not in out, "no sentinel may be left after the demo"
