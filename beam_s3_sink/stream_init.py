"""A stream's initialization, run by the steps that need it, so that Flink can checkpoint them.

A bounded copy's ``Write`` and completion read initialization's one :class:`~.messages.InitOutcome`
as a side input. Beam 2.62's portable Flink runner fails every checkpoint of a stage that reads a
side input (``ClassCastException`` in the snapshot of the side input's state), so a stream's
steps read none (``tests/experiment_flink_checkpoints.py`` measured which shapes checkpoint:
``GroupByKey``, a ``Flatten`` + ``GroupByKey`` join, keyed state and ``CombineGlobally`` do; any
side input does not). Instead each ``Write`` and completion DoFn instance runs the stream's
initialization itself, once, before its first use (:class:`InitializedInStep`): the same
``_InitializeFn`` (or a table's ``_TableInitFn``) the ``Initialize`` step runs at the start.

That is safe because a stream's initialization is idempotent and writes nothing a running
stream needs removed: it checks the path (objects of another sink id refused), takes the claim
(its own claim is taken over), writes the sentinel only when it is missing (a re-written one
would look newer to the sentinel re-list of :mod:`.claim`), and for a table loads (or creates)
it and derives the write settings (data path, field ids, partition spec) from the catalog, the
same on every worker while the table's schema and spec stay as they are. It aborts no upload and
deletes no file: other workers of the stream are writing. What dead attempts uploaded is aborted
when its unit commits (:func:`~.stream.abort_dead_uploads`, an on-time pane's) or at the end of
the stream (:class:`~.stream._FinishStream`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable, Optional

import apache_beam as beam

from .messages import InitOutcome

__all__ = ["InitializedInStep", "outcome_of"]

_log = logging.getLogger(__name__)


class InitializedInStep:
    """The outcome of ``init_fn`` (an initialization DoFn whose ``process(None, ())`` yields one
    :class:`InitOutcome`), run in the step that holds this, once per DoFn instance.

    An outcome without an error is kept for the instance's life. An error is tried again, after
    ``RETRY_DELAYS``, then returned but not kept, so that the next unit tries again: the steps of
    a stream start together and race (pyiceberg's SQL catalog creates its own tables when first
    loaded: ``table iceberg_tables already exists`` from the one that lost, measured on Flink).
    """

    RETRY_DELAYS = (0.2, 0.5, 1.0)  # seconds before each try after the first

    def __init__(self, init_fn: Any) -> None:
        self._init_fn = init_fn
        self._outcome: Optional[InitOutcome] = None

    def setup(self) -> None:
        """Make the initialization's client (call from the holding DoFn's ``setup()``)."""
        self._init_fn.setup()

    def outcome(self) -> InitOutcome:
        """This stream's initialization outcome, run now if this instance has none yet."""
        if self._outcome is not None:
            return self._outcome
        outcome = self._run()
        for delay in self.RETRY_DELAYS:
            if outcome.error is None:
                break
            _log.info("a stream's initialization failed, trying again in %s s: %s", delay, outcome.error)
            time.sleep(delay)
            outcome = self._run()
        if outcome.error is None:
            self._outcome = outcome
        return outcome

    def _run(self) -> InitOutcome:
        outcome: InitOutcome = next(iter(self._init_fn.process(None, ())))
        return outcome


def outcome_of(given: Optional[InitOutcome], in_step: Optional[InitializedInStep]) -> InitOutcome:
    """The initialization a step works with: ``given`` (its side input) or, in a stream, its own.

    >>> outcome_of(InitOutcome(guard="conditional"), None).guard
    'conditional'
    """
    if given is not None:
        return given
    if in_step is None:
        raise ValueError("a step without its initialization side input needs a stream's InitializedInStep")
    return in_step.outcome()


class _InitializeStreamFn(beam.DoFn):
    """A stream's ``Initialize`` step: its initialization at the start (tried again as in the
    steps), whose one outcome only the end of the stream reads."""

    def __init__(self, init_fn: Any) -> None:
        self._in_step = InitializedInStep(init_fn)

    def setup(self) -> None:
        self._in_step.setup()

    def process(self, _unused: Any) -> Iterable[InitOutcome]:
        yield self._in_step.outcome()
