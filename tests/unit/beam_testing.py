"""The pipeline of a unit test: Beam's ``TestPipeline`` on the in-process FnApiRunner.

(Beam 2.77's DirectRunner first tries to start Prism, a download that fails here; the
FnApiRunner is what it falls back to.) Kept out of the test modules so that pytest does not
try to collect the ``TestPipeline`` class as a test class.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

__all__ = ["pipeline"]


def pipeline() -> TestPipeline:
    """A ``TestPipeline`` to use in a ``with`` block, with ``assert_that`` on its outputs."""
    return TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
