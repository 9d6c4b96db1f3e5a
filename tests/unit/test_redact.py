"""redact: credentials never reach the logs, even at botocore's DEBUG level."""

from __future__ import annotations

import logging

import pytest

from beam_s3_sink.redact import MASK, CredentialRedactor, install, redact


@pytest.mark.parametrize(
    "text, secret",
    [
        ("<SecretAccessKey>wJalrXUt</SecretAccessKey>", "wJalrXUt"),
        ("<SessionToken>FwoGZX+/=</SessionToken>", "FwoGZX+/="),
        ("{'X-Amz-Security-Token': b'FwoGZX'}", "FwoGZX"),
        ('{"SessionToken": "tok123"}', "tok123"),
        ("https://h/k?X-Amz-Security-Token=abc%2F&X-Amz-Date=1", "abc%2F"),
        ("aws_secret_access_key=s3cr3t,", "s3cr3t"),
    ],
)
def test_secrets_are_masked(text, secret):
    cleaned = redact(text)
    assert secret not in cleaned and MASK in cleaned


def test_everything_else_is_kept():
    text = "<AccessKeyId>AKIAEXAMPLE</AccessKeyId> X-Amz-Date=20260101 'Content-Length': '12'"
    assert redact(text) == text


def test_the_filter_rewrites_the_record(caplog):
    logger = logging.getLogger("unit.redact")
    logger.addFilter(CredentialRedactor())
    try:
        with caplog.at_level(logging.DEBUG, logger="unit.redact"):
            logger.debug("Response body: %s", b"<SessionToken>FwoGZX</SessionToken>")
            logger.debug("no secret %d", 1)
    finally:
        logger.filters.clear()
    assert [r.getMessage() for r in caplog.records] == [
        "Response body: b'<SessionToken>***</SessionToken>'",
        "no secret 1",
    ]


def test_install_is_idempotent():
    install()
    install()
    for name in ("botocore.endpoint", "botocore.parsers", "urllib3.connectionpool"):
        assert sum(isinstance(f, CredentialRedactor) for f in logging.getLogger(name).filters) == 1
