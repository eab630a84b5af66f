"""The small request/response model shared by the world, the hostile hosts and the server.

Hosts are pure-ish functions ``Request -> Response``; only the server touches sockets. Timing
behaviours (slow, trickle, hang, dead) are described declaratively on the Response so that the
server can make every wait abortable and stop promptly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

#: Simulated day 0. Last-Modified of generated content is EPOCH + (simulated time in days).
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

HTML = "text/html; charset=utf-8"

PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000b4944415478da636000020000050001e9fadcd80000000049454e44ae426082"
)
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"


@dataclass
class Request:
    """What a host sees of one HTTP request."""

    method: str
    host: str  # lower-case, port stripped
    target: str  # raw request target, query included
    path: str  # target without the query
    query: str
    headers: Mapping[str, str]
    port: int  # the server's port, for absolute URLs in bodies
    day: int
    stop: threading.Event

    def base(self, host: str | None = None) -> str:
        """``http://host:port`` for a sim host (default: this request's host)."""
        return f"http://{host or self.host}:{self.port}"


@dataclass
class Response:
    """A response, possibly streamed or deliberately misbehaving.

    ``stream`` items are bytes to send or floats meaning "pause this many seconds".
    ``length`` is the Content-Length of a stream; None means close-delimited (no length header).
    ``action`` is "send", "hang" (hold the connection, never answer) or "dead" (close at once).
    """

    status: int = 200
    body: bytes = b""
    content_type: str | None = HTML
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterable[bytes | float] | None = None
    length: int | None = None
    delay: float = 0.0
    action: str = "send"


def http_date(dt: datetime) -> str:
    """RFC 9110 IMF-fixdate."""
    return format_datetime(dt.astimezone(UTC).replace(microsecond=0), usegmt=True)


def sim_datetime(days: float) -> datetime:
    """Simulated time ``days`` after EPOCH, truncated to whole seconds (HTTP-date resolution)."""
    return (EPOCH + timedelta(days=days)).replace(microsecond=0)


def parse_http_date(value: str) -> datetime | None:
    """Parse an HTTP-date; None when malformed (RFC 9110 says ignore such a header)."""
    try:
        dt = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def not_modified(req: Request, etag: str, last_modified: datetime) -> bool:
    """RFC 9110 13.2.2: If-None-Match decides when present, else If-Modified-Since."""
    inm = req.headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or etag in tags
    ims = req.headers.get("If-Modified-Since")
    if ims is not None:
        when = parse_http_date(ims)
        return when is not None and last_modified <= when
    return False


def cached(req: Request, body: bytes, etag: str, last_modified: datetime, ctype: str = HTML):
    """A 200 with validators, or a 304 when the client's validators match."""
    headers = {"ETag": etag, "Last-Modified": http_date(last_modified)}
    if not_modified(req, etag, last_modified):
        return Response(304, content_type=None, headers=headers)
    return Response(200, body, ctype, headers)


def html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A UTF-8 HTML response."""
    return Response(status, body.encode(), HTML, headers or {})


def text(body: str, status: int = 200, ctype: str = "text/plain; charset=utf-8") -> Response:
    """A plain-text response."""
    return Response(status, body.encode(), ctype)


def redirect(location: str, status: int = 301) -> Response:
    """A redirect with a tiny HTML body, as real servers send."""
    body = f'<html><body>Moved to <a href="{location}">{location}</a></body></html>'
    return Response(status, body.encode(), HTML, {"Location": location})


def not_found(req: Request) -> Response:
    """The default 404 page."""
    return html(f"<html><body><h1>404 Not Found</h1><p>{req.path}</p></body></html>", 404)


def now_plus(seconds: float) -> str:
    """An HTTP-date ``seconds`` from now (rounded up), for Retry-After as a date."""
    return http_date(datetime.fromtimestamp(time.time() + seconds + 1, UTC))
