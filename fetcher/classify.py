"""Pure decisions about one response: fetch_status, Retry-After, content type, digests."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from fetcher import models as m

REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class Verdict:
    """What a response means for the URL and for the host."""

    fetch_status: str
    error: str | None = None
    host_failure: bool = False  # counts towards exponential back-off
    retry_after: bool = False  # 429/503: honour Retry-After for the whole host


def classify(status: int | None, error_kind: str | None, error: str | None) -> Verdict:
    """fetch_status for a response ``status`` (None: no response) and a transport error kind.

    404/410 are ``gone``; 429/503 ``retry_later`` (the host pauses); other 4xx/5xx
    ``http_error``, where 5xx also count as host failures (as do timeouts and connect errors:
    Nutch's and Heritrix's back-off triggers).
    """
    if error_kind == "timeout":
        return Verdict(m.TIMEOUT, error, host_failure=True)
    if status is None:
        if error_kind == "protocol":
            return Verdict(m.HTTP_ERROR, error, host_failure=True)
        return Verdict(m.CONNECT_ERROR, error, host_failure=True)
    if error_kind == "too_large":
        return Verdict(m.TOO_LARGE, error)
    if status == 304:
        return Verdict(m.NOT_MODIFIED)
    if status in (404, 410):
        return Verdict(m.GONE)
    if status in (429, 503):
        return Verdict(m.RETRY_LATER, f"http {status}", retry_after=True)
    if 200 <= status < 300:
        return Verdict(m.FETCHED)
    if status in REDIRECT_CODES:
        return Verdict(m.REDIRECT)
    return Verdict(m.HTTP_ERROR, f"http {status}", host_failure=status >= 500)


def retry_after_seconds(value: str | None, now_epoch: float, cap: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date, RFC 9110
    section 10.2.3), capped at ``cap``; None if absent or unparseable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), cap)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return min(max(0.0, when.timestamp() - now_epoch), cap)


def media_type(content_type: str | None) -> str | None:
    """``"text/HTML; charset=x"`` -> ``"text/html"``."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def type_allowed(content_type: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether a 2xx body of this type is kept. A missing type is kept (the parser sniffs)."""
    mt = media_type(content_type)
    return mt is None or mt in allowed


def sha1_digest(data: bytes) -> str:
    """``sha1:BASE32`` as in ``WARC-Payload-Digest``."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")
