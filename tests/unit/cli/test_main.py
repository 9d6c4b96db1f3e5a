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


def test_the_command_runs_without_pandas():
    """Beam imports pandas and pymongo when they are installed, pyarrow pandas on its first table:
    not in the command's own process (a third of Beam's import time)."""
    code = (
        "import sys\n"
        "from beam_s3_sink.cli import main\n"
        "status = main(['--source', 'generate:1'])\n"  # planned up to the missing --output
        "print(status, 'apache_beam' in sys.modules, 'pandas' in sys.modules, 'pymongo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "True", "False", "False"], done.stderr
    assert "bson" not in done.stderr  # Beam's MongoDB I/O's warning, quieted


def test_importing_the_package_imports_no_beam():
    code = "import sys, beam_s3_sink, beam_s3_sink.cli; print(sorted({'apache_beam', 'pyarrow', 'boto3'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr
