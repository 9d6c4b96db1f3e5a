"""``python -m beam_s3_sink.cli``: the same as the ``beam-s3-copy`` console script."""

import sys

from beam_s3_sink.cli import main

if __name__ == "__main__":
    sys.exit(main())
