"""One HTTP exchange over a host's single keep-alive connection, captured byte for byte.

What is stored in the WARC is what went over the wire: the request bytes as sent and the
response bytes as received -- status line, headers exactly as the server wrote them, and the
body still transfer-framed (chunked) and content-encoded, as Heritrix and warcio's
``capture_http`` record it. The capture is a tee on the buffered reader ``http.client``
parses from, so it holds exactly the bytes the parser consumed. Reading goes through a
deadline-aware raw socket reader: every ``recv`` waits at most ``min(read_timeout, time left
before the request deadline)``, so neither a server that never answers (read timeout) nor
one that trickles a byte per second, in the headers or the body, can hold a worker past
``request_deadline_s``.

Caps: at most ``max_body`` body bytes (as on the wire) are read and kept -- the capture is then
truncated (``WARC-Truncated: length``); the body is decoded on the side, chunk by chunk, only to
measure it (``fetcher.decoding``), and a body decoding to more than ``max_decoded`` bytes is
abandoned as a bomb. Nothing ever holds an uncapped body in memory.

The connection goes to the IP address the SSRF guard checked, never to a name, with the
original ``Host`` header; for https the host name is the SNI server name and the name the
certificate must match. One connection object per host and at most one exchange on it at a
time (the scheduler's slot) keeps us at one TCP connection per host.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import struct
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime

import certifi
import urllib3.connection
import urllib3.exceptions

from fetcher.decoding import BodyDecoder, DecodeLimitExceeded
from fetcher.dns import SSRFGuard, SSRFRefused

READ_SIZE = 64 * 1024


class DeadlineExceeded(TimeoutError):
    """The request's total deadline passed."""


class _Capture:
    """Bytes of one exchange, and the clock limits that apply to reading them."""

    def __init__(self, deadline: float, clock: Callable[[], float], read_timeout: float):
        self.deadline = deadline
        self.clock = clock
        self.read_timeout = read_timeout
        self.request = bytearray()
        self.response = bytearray()
        self.limit: int | None = None  # most response bytes recorded
        self.seen = 0  # response bytes consumed, recorded or not
        self.httplib_response: http.client.HTTPResponse | None = None

    def record(self, data: bytes | bytearray | memoryview) -> None:
        self.seen += len(data)
        if self.limit is None:
            self.response += data
        elif len(self.response) < self.limit:
            self.response += bytes(data[: self.limit - len(self.response)])


class _DeadlineRaw(io.RawIOBase):
    """Socket reader whose every ``recv`` ends by the read timeout or the deadline."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, capture: _Capture):
        super().__init__()
        self._raw = raw
        self._sock = sock
        self._cap = capture

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        remaining = self._cap.deadline - self._cap.clock()
        if remaining <= 0:
            raise DeadlineExceeded("request deadline exceeded")
        self._sock.settimeout(min(self._cap.read_timeout, remaining))
        try:
            return self._raw.readinto(b)
        except TimeoutError:
            if self._cap.deadline - self._cap.clock() <= 0.01:
                raise DeadlineExceeded("request deadline exceeded") from None
            raise

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _TeeReader(io.BufferedReader):
    """Buffered reader that records every byte handed to the HTTP parser."""

    def __init__(self, raw: io.RawIOBase, capture: _Capture):
        super().__init__(raw, READ_SIZE)
        self._cap = capture

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self._cap.record(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = super().read1(size)
        self._cap.record(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        data = super().readline(size)
        self._cap.record(data)
        return data

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        n = super().readinto(b)
        self._cap.record(memoryview(b)[:n])
        return n

    def readinto1(self, b) -> int:  # type: ignore[no-untyped-def]
        n = super().readinto1(b)
        self._cap.record(memoryview(b)[:n])
        return n


class _CaptureResponse(http.client.HTTPResponse):
    """``http.client`` response reading through the deadline reader and the tee."""

    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None,
                 url: str | None = None, *, capture: _Capture):
        super().__init__(sock, debuglevel, method, url)
        raw = self.fp.detach()  # the SocketIO; detach so dropping the old buffer cannot close it
        self.fp = _TeeReader(_DeadlineRaw(raw, sock, capture), capture)
        capture.httplib_response = self


class _CaptureMixin:
    capture: _Capture | None = None

    def send(self, data) -> None:  # type: ignore[no-untyped-def]
        if self.capture is not None and isinstance(data, bytes | bytearray):
            self.capture.request += data
        super().send(data)  # type: ignore[misc]


class _HTTPConnection(_CaptureMixin, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_CaptureMixin, urllib3.connection.HTTPSConnection):
    pass


class ConnectError(Exception):
    """The TCP (or TLS) connection could not be made."""


@dataclass(eq=False)  # identity equality: one object per live connection
class HostConnection:
    """The single keep-alive connection to one host, made to its checked address."""

    scheme: str
    hostname: str
    port: int
    ip: str
    guard: SSRFGuard
    _: KW_ONLY
    connect_timeout: float
    read_timeout: float
    _conn: _HTTPConnection | _HTTPSConnection | None = field(default=None, init=False, repr=False)

    @property
    def host_header(self) -> str:
        """``Host`` header value: the name, with the port unless it is the scheme's default."""
        default = 443 if self.scheme == "https" else 80
        name = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return name if self.port == default else f"{name}:{self.port}"

    def acquire(self, remaining: float) -> _HTTPConnection | _HTTPSConnection:
        """A connected connection object, reusing the open one if the server kept it.

        Raises:
            SSRFRefused: the address is not permitted (checked on every new connection).
            ConnectError: connecting failed or timed out.
        """
        conn = self._conn
        if conn is not None and (conn.sock is None or not conn.is_connected):
            conn.close()  # closed by the server meanwhile: do not send into a dead socket
            conn = None
        if conn is None:
            self.guard.check(self.ip)
            timeout = max(0.001, min(self.connect_timeout, remaining))
            if self.scheme == "https":
                conn = _HTTPSConnection(
                    self.ip, self.port, timeout=timeout, server_hostname=self.hostname,
                    assert_hostname=self.hostname, cert_reqs="CERT_REQUIRED",
                    ca_certs=certifi.where())
            else:
                conn = _HTTPConnection(self.ip, self.port, timeout=timeout)
            try:
                conn.connect()
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                conn.close()
                raise ConnectError(_short(exc)) from None
            self._conn = conn
        return conn

    def close(self, abort: bool = False) -> None:
        """Drop the connection. ``abort``: reset it (RST, not FIN) so that a server still
        sending the response we gave up on notices at its next write, and its side of the
        exchange ends about when ours did -- politeness is judged from the server's log."""
        if self._conn is None:
            return
        sock = self._conn.sock
        if abort and sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self._conn.close()
        self._conn = None


@dataclass
class Exchange:
    """What one request/response produced; ``status`` is None when no response arrived."""

    url: str
    ip: str
    start: float
    started_at: datetime
    end: float = 0.0
    request: bytes = b""
    status: int | None = None
    reason: str = ""
    headers: http.client.HTTPMessage | None = None
    head: bytes = b""  # status line + header lines + blank line, as received
    body: bytes = b""  # body as received (framed, encoded), at most the cap
    complete: bool = False  # the whole body was read
    truncated: str | None = None  # WARC-Truncated reason: length, time, disconnect, unspecified
    error_kind: str | None = None  # timeout, connect, protocol, too_large
    error: str | None = None
    decoded_bytes: int = 0
    kept: bytes = b""  # first decoded bytes, when asked to keep some
    decode_error: str | None = None

    def header(self, name: str) -> str | None:
        """A response header value (the first, if repeated)."""
        return None if self.headers is None else self.headers.get(name)

    @property
    def duration_ms(self) -> int:
        """Wall time of the exchange, connect included."""
        return int(round((self.end - self.start) * 1000))


def perform(
    conn: HostConnection,
    url: str,
    target: str,
    headers: dict[str, str],
    *,
    clock: Callable[[], float],
    wallclock: Callable[[], float],
    deadline: float,
    max_body: int,
    max_decoded: int,
    keep_decoded: int = 0,
    want_body: Callable[[int, http.client.HTTPMessage], bool] | None = None,
) -> Exchange:
    """GET ``target`` on ``conn`` and capture the exchange; never raises for network trouble.

    Args:
        conn: the host's connection.
        url: the absolute URL (for the record).
        target: request-target sent (path and query, dot segments removed).
        headers: request headers, ``Host`` first.
        clock / wallclock: monotonic and epoch clocks.
        deadline: monotonic time by which the whole exchange must end.
        max_body: most body bytes (as on the wire) to read and keep.
        max_decoded: most bytes the body may decode to before it counts as a bomb.
        keep_decoded: keep this many decoded bytes and stop reading once they are there.
        want_body: called with status and headers; False means do not read the body.
    """
    ex = Exchange(url=url, ip=conn.ip, start=clock(),
                  started_at=datetime.fromtimestamp(wallclock(), UTC))
    cap = _Capture(deadline, clock, conn.read_timeout)
    try:
        _run(conn, ex, cap, target, headers, max_body, max_decoded, keep_decoded, want_body)
    finally:
        ex.end = clock()
        ex.request = bytes(cap.request)
    return ex


def _run(conn: HostConnection, ex: Exchange, cap: _Capture, target: str,
         headers: dict[str, str], max_body: int, max_decoded: int, keep_decoded: int,
         want_body: Callable[[int, http.client.HTTPMessage], bool] | None) -> None:
    try:
        c = conn.acquire(cap.deadline - cap.clock())
    except ConnectError as exc:
        ex.error_kind, ex.error = "connect", f"connect: {exc}"
        return
    except SSRFRefused as exc:
        ex.error_kind, ex.error = "connect", str(exc)
        return
    c.capture = cap
    c.response_class = functools.partial(_CaptureResponse, capture=cap)  # type: ignore[assignment]
    try:
        c.request("GET", target, headers=headers, preload_content=False, decode_content=False)
        # Keep urllib3's wrapper referenced until we are done: collecting it closes the
        # http.client response we read from (it is an io.IOBase).
        wrapper = c.getresponse()
    except (DeadlineExceeded, TimeoutError, urllib3.exceptions.TimeoutError) as exc:
        conn.close(abort=True)
        ex.error_kind = "timeout"
        ex.error = "timeout: " + ("deadline" if isinstance(exc, DeadlineExceeded) else "read")
        return
    except http.client.RemoteDisconnected as exc:
        conn.close()
        ex.error_kind, ex.error = "connect", f"connect: {_short(exc)}"
        return
    except (http.client.HTTPException, ValueError) as exc:
        conn.close()
        ex.error_kind, ex.error = "protocol", f"protocol: {_short(exc)}"
        return
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        conn.close()
        ex.error_kind, ex.error = "connect", f"connect: {_short(exc)}"
        return
    finally:
        c.capture = None
    resp = cap.httplib_response
    assert resp is not None
    ex.status, ex.reason, ex.headers = resp.status, resp.reason, resp.msg
    head_len = len(cap.response)
    ex.head = bytes(cap.response)
    cap.limit = head_len + max_body
    if want_body is not None and not want_body(resp.status, resp.msg):
        conn.close(abort=not resp.isclosed())
        ex.truncated = "unspecified"
        return
    decoder = BodyDecoder(resp.msg.get("Content-Encoding"), max_decoded, keep=keep_decoded)
    try:
        while True:
            if cap.clock() >= cap.deadline:
                raise DeadlineExceeded("request deadline exceeded")
            data = resp.read1(READ_SIZE)
            if not data:
                if resp.length:  # EOF before Content-Length was satisfied
                    ex.truncated, ex.error = "disconnect", "disconnect: body shorter than length"
                else:
                    ex.complete = True
                break
            decoder.feed(data)
            if resp.length == 0 or resp.isclosed():  # Content-Length satisfied
                ex.complete = True
                break
            if cap.seen - head_len >= max_body:
                break
            if keep_decoded and len(decoder.kept) >= keep_decoded:
                break
    except DecodeLimitExceeded as exc:
        ex.error_kind, ex.error, ex.truncated = "too_large", str(exc), "length"
    except (DeadlineExceeded, TimeoutError) as exc:
        ex.error_kind, ex.truncated = "timeout", "time"
        ex.error = "timeout: " + ("deadline" if isinstance(exc, DeadlineExceeded) else "read")
    except (http.client.HTTPException, OSError, ValueError) as exc:
        # IncompleteRead, reset, bad chunk size: keep what arrived, marked as cut short.
        ex.truncated, ex.error = "disconnect", f"disconnect: {_short(exc)}"
    if ex.truncated is None and (not ex.complete or cap.seen - head_len > max_body):
        ex.truncated = "length"
    ex.body = bytes(memoryview(cap.response)[head_len:])
    cap.response = bytearray()  # one copy of the body at a time
    ex.decoded_bytes = decoder.decoded
    ex.kept = bytes(decoder.kept)
    ex.decode_error = decoder.error
    if not ex.complete:
        conn.close(abort=True)  # the rest of the body is still on the wire: reset
    del wrapper


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
