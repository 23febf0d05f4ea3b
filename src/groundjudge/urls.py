"""URLs as they may be written down: without the credentials some endpoints carry in them.

A judge base URL can hold a secret: ``http://user:pass@host/v1``, or a key in its query
(``?api-key=...``, ``?key=...``, any token). The client uses the URL as given; everything
written (report.json, the batch state, logs, error messages) gets :func:`redact_url`'s form.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

__all__ = ["REDACTED", "is_redacted", "redact_url"]

REDACTED = "***"


def redact_url(url: str) -> str:
    """``url`` with its user info, every query value and any fragment replaced by ``***``;
    scheme, host, port, path and the query's parameter names stay, so the endpoint is still
    recognisable. A URL that cannot be parsed is replaced whole.

    >>> redact_url("https://kim:s3cret@judge.example/v1?api-version=2024&api-key=abc")
    'https://***@judge.example/v1?api-version=***&api-key=***'
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        return f"(a URL that could not be read: {REDACTED})"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    fragment = REDACTED if parts.fragment else ""
    return urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, fragment))


def _redact_pair(pair: str) -> str:
    name, sep, _ = pair.partition("=")
    return f"{name}={REDACTED}" if sep else (REDACTED if name else "")


def is_redacted(url: str) -> bool:
    """Whether ``url`` lost something to :func:`redact_url` (it carried user info, a query or a
    fragment): a stored form then cannot be used to reach the endpoint."""
    return redact_url(url) != url
