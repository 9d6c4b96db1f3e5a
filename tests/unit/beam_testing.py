"""The pipeline of a unit test: Beam's ``TestPipeline`` on the in-process FnApiRunner.

(Beam 2.77's DirectRunner first tries to start Prism, a download that fails here; the
FnApiRunner is what it falls back to.) Kept out of the test modules so that pytest does not
try to collect the ``TestPipeline`` class as a test class.

:func:`collected` hands a test the elements of a PCollection after the run: the FnApiRunner
pickles every function, so a list captured in a closure would be a copy; this module's dict
is not (the runner runs the bundles in this process).
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, List

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

__all__ = ["pipeline", "collected"]

_COLLECTED: Dict[str, List[Any]] = {}


def pipeline() -> TestPipeline:
    """A ``TestPipeline`` to use in a ``with`` block, with ``assert_that`` on its outputs."""
    return TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"]))


def collected(pcoll: beam.PCollection) -> List[Any]:
    """A list that holds ``pcoll``'s elements once the pipeline has run."""
    token = uuid.uuid4().hex
    out = _COLLECTED[token] = []
    _ = pcoll | f"Collect{token[:8]}" >> beam.Map(_keep, token)
    return out


def _keep(element: Any, token: str) -> None:
    _COLLECTED[token].append(element)
