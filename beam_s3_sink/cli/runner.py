"""The runner our own tools (the CLI, the demo, the benchmarks) use when given no ``--runner``.

Beam 2.77's ``DirectRunner`` first tries Prism, downloading its binary from a GitHub release
page on each pipeline until one is cached, and falls back to the ``FnApiRunner`` when that
fails: on a machine without that access every pipeline pays for the failed try (about 0.5 s
here when the name lookup fails at once; up to a connection timeout where it hangs). Our tools
name the runner instead: the ``FnApiRunner`` (what the ``DirectRunner`` falls back to, in this
process; ``--direct_running_mode``/``--direct_num_workers`` still apply), unless the user
passes ``--runner`` (``PrismRunner --prism_location ...``, ``PortableRunner``, ``DirectRunner``).
"""

from __future__ import annotations

from typing import List, Sequence

__all__ = ["DEFAULT_RUNNER", "with_default_runner"]

DEFAULT_RUNNER = "FnApiRunner"


def with_default_runner(args: Sequence[str]) -> List[str]:
    """``args`` with ``--runner=FnApiRunner`` in front when they name no runner.

    >>> with_default_runner(["--s3_region_name=eu-west-1"])
    ['--runner=FnApiRunner', '--s3_region_name=eu-west-1']
    >>> with_default_runner(["--runner", "PrismRunner"])
    ['--runner', 'PrismRunner']
    """
    if any(arg == "--runner" or arg.startswith("--runner=") for arg in args):
        return list(args)
    return [f"--runner={DEFAULT_RUNNER}", *args]
