"""Keeps credentials out of botocore's DEBUG logging: :func:`install` adds a
:class:`CredentialRedactor` filter (values of secret fields such as ``X-Amz-Security-Token``
or an ``AssumeRole`` answer's ``<SecretAccessKey>`` become ``***``) to the loggers that emit
them; ``S3Config.make_client`` calls it. Installing it twice adds it once.
"""

from __future__ import annotations

import logging
import re

__all__ = ["CredentialRedactor", "install", "redact"]

MASK = "***"
_FIELDS = (
    r"(?:SecretAccessKey|SessionToken|aws_secret_access_key|aws_session_token|"
    r"X-Amz-Security-Token|x-amz-security-token|secret_key|token)"
)
_PATTERNS = (
    # XML elements: <SecretAccessKey>...</SecretAccessKey>
    (re.compile(r"<(SecretAccessKey|SessionToken)>[^<]*</\1>"), lambda m: f"<{m[1]}>{MASK}</{m[1]}>"),
    # dict/JSON items: 'X-Amz-Security-Token': b'...', "SessionToken": "..."
    (
        re.compile(r"""(['"]%s['"]\s*:\s*b?)(['"])(?:(?!\2).)*\2""" % _FIELDS, re.IGNORECASE),
        lambda m: f"{m[1]}{m[2]}{MASK}{m[2]}",
    ),
    # query strings and key=value: X-Amz-Security-Token=..., aws_secret_access_key=...
    (re.compile(r"(\b%s=)[^&\s,)'\"]+" % _FIELDS, re.IGNORECASE), lambda m: f"{m[1]}{MASK}"),
)
_LOGGERS = (
    "botocore",
    "botocore.endpoint",
    "botocore.parsers",
    "botocore.hooks",
    "botocore.auth",
    "botocore.credentials",
    "botocore.retryhandler",
    "botocore.httpchecksum",
    "urllib3.connectionpool",
)


def redact(text: str) -> str:
    """``text`` with the values of credential fields masked.

    >>> redact("<SessionToken>FwoGZX</SessionToken> 'X-Amz-Security-Token': b'FwoGZX'")
    "<SessionToken>***</SessionToken> 'X-Amz-Security-Token': b'***'"
    """
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class CredentialRedactor(logging.Filter):
    """A logging filter that masks credential values in a record's message.

    >>> logger = logging.getLogger("my.http.client")
    >>> logger.addFilter(CredentialRedactor())
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError):  # msg and args do not match: logging's problem, not ours
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def install() -> None:
    """Add one :class:`CredentialRedactor` to each logger that may log credentials.

    >>> install()
    >>> sum(isinstance(f, CredentialRedactor) for f in logging.getLogger("botocore.parsers").filters)
    1
    """
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, CredentialRedactor) for f in logger.filters):
            logger.addFilter(CredentialRedactor())
