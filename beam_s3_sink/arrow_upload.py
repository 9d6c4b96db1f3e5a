"""The upload DoFns as consumers of a batched ``DoFn``: Beam hands them ``pyarrow.Table`` batches.

A PCollection made by a batched ``DoFn`` (one with ``process_batch`` and Beam's pyarrow batch
converters, see ``apache_beam.typehints.arrow_type_compatibility``) has a schema'd element
type (a ``NamedTuple`` or ``beam.Row`` type) and, inside a fused stage, travels as
``pyarrow.Table`` batches. A consumer that defines only ``process`` makes Beam explode every
batch into Python rows; these subclasses also define ``process_batch``, so Beam passes the
tables on as they are, and elements (from an unbatched producer, or after a fusion break)
still go to ``process``::

    batched DoFn ─pa.Table─▶ _ArrowUploadFn.process_batch ─▶ FileWriter.add_arrow ─▶ encoder
    other producer ─row──▶ _ArrowUploadFn.process ─▶ FileWriter.add ─▶ row buffer

``CopyToS3`` picks them when Beam has a pyarrow batch converter for the input's element type
(:func:`takes_batches`); for any other element type the plain DoFns are used.
"""

from __future__ import annotations

from typing import Any, Iterable

import apache_beam as beam
import pyarrow as pa

from .messages import InitOutcome
from .sharding import _AssignShardFn
from .upload import _UploadFn

__all__ = ["takes_batches"]


def takes_batches(element_type: Any) -> bool:
    """True when Beam can hand ``element_type``'s elements over as ``pyarrow.Table`` batches."""
    from apache_beam.typehints.batch import BatchConverter
    from apache_beam.typehints.native_type_compatibility import convert_to_beam_type

    try:
        BatchConverter.from_typehints(element_type=convert_to_beam_type(element_type), batch_type=pa.Table)
    except (TypeError, ValueError, NotImplementedError, KeyError):  # no converter for this type: rows only
        return False
    return True


class _ArrowUploadFn(_UploadFn):
    """:class:`~beam_s3_sink.upload._UploadFn` that also takes Beam's ``pa.Table`` batches."""

    def get_input_batch_type(self, input_element_type: Any) -> Any:
        return pa.Table

    @beam.DoFn.yields_elements
    def process_batch(self, batch: pa.Table, state: InitOutcome) -> Iterable[Any]:
        return self.process(batch, state)


class _ArrowAssignShardFn(_AssignShardFn):
    """:class:`~beam_s3_sink.sharding._AssignShardFn` that also takes Beam's ``pa.Table`` batches."""

    def get_input_batch_type(self, input_element_type: Any) -> Any:
        return pa.Table

    @beam.DoFn.yields_elements
    def process_batch(self, batch: pa.Table) -> Iterable[Any]:
        return self.process(batch)
