"""Pipelines built on beam_s3_sink: ``python -m pipelines.copy_to_s3``."""
