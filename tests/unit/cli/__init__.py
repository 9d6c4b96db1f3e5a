"""Unit tests of beam_s3_sink.cli, one module per module."""
