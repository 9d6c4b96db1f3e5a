"""cli/__init__ and cli/__main__: ``python -m beam_s3_sink.cli`` is the command."""

from __future__ import annotations

import subprocess
import sys

import beam_s3_sink.cli


def test_the_package_names_the_entry_points():
    assert set(beam_s3_sink.cli.__all__) == {"main", "build_parser", "plan_copy", "CopyPlan", "UsageError"}


def test_python_dash_m_runs_the_command():
    bad = subprocess.run(
        [sys.executable, "-m", "beam_s3_sink.cli", "--source", "generate:1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--output" in bad.stderr
