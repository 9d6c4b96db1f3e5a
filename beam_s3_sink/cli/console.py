"""The command's own output: its report on standard output, its error lines on standard error.

A console command's report is its product, not a log record: ``logging`` is configured (and
can be silenced) by whoever hosts the process, while ``beam-s3-copy`` must always show the
schema it copies, the summary table and the one line that says why it failed. So the command
writes through one small object rather than ``print``: the library logs, the console speaks::

    plan / run / abort ─▶ Console.say   ─▶ out (sys.stdout): the schema, the summary, a dry run
                       ─▶ Console.error ─▶ err (sys.stderr): "beam-s3-copy: <what to fix>"

The streams are looked up when :meth:`Console.standard` is called, not at import, so pytest's
``capsys`` and a caller's redirection see what the command wrote.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Console", "PROG"]

PROG = "beam-s3-copy"
"""The command's name, in its help and in front of its error lines; ``python -m beam_s3_sink.cli``
runs the same."""


@dataclass(frozen=True)
class Console:
    """Where the command writes: ``out`` for its report, ``err`` for its error lines.

    >>> import io
    >>> console = Console(out=io.StringIO(), err=io.StringIO())
    >>> console.say("Copy finished:", "  rows      3")
    >>> console.error("error: --output must be an s3:// URI")
    >>> console.out.getvalue()
    'Copy finished:\\n  rows      3\\n'
    >>> console.err.getvalue()
    'beam-s3-copy: error: --output must be an s3:// URI\\n'
    """

    out: TextIO
    err: TextIO

    @classmethod
    def standard(cls, out: "TextIO | None" = None) -> "Console":
        """The process's streams as they are now (``out`` replaces standard output)."""
        return cls(out=sys.stdout if out is None else out, err=sys.stderr)

    def say(self, *lines: str) -> None:
        """Write ``lines`` to ``out``, one per line, and flush (the progress line follows on ``err``)."""
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()

    def error(self, message: str) -> None:
        """Write ``beam-s3-copy: message`` as one line to ``err``."""
        self.err.write(f"{PROG}: {message}\n")
        self.err.flush()
