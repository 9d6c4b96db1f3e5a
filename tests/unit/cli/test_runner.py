"""cli/runner: the CLI's default runner."""

from __future__ import annotations

from beam_s3_sink.cli.runner import DEFAULT_RUNNER, with_default_runner


def test_adds_the_default_runner_only_when_none_is_named():
    assert with_default_runner([]) == [f"--runner={DEFAULT_RUNNER}"]
    assert with_default_runner(["--runner=FlinkRunner", "--x"]) == ["--runner=FlinkRunner", "--x"]
    assert with_default_runner(["--runner", "SparkRunner"]) == ["--runner", "SparkRunner"]
    assert with_default_runner(["--runner_v2"])[0] == f"--runner={DEFAULT_RUNNER}"
