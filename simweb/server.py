"""The HTTP side: a threaded HTTP/1.1 keep-alive server and the request log.

Why hand-written response writing instead of ``send_response``/``wfile``: the head and a small
body go out in one ``sendall`` (with TCP_NODELAY) so keep-alive clients are not stalled by
Nagle + delayed ACK, and every wait (slow, trickle, hang) is on the server's stop event so
``stop()`` is prompt even with hostile connections open. Every request is logged with the times
the audit needs: when its request line arrived and when its last byte left (or it was dropped).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from simweb.response import Request, Response

MAX_REQUEST_BODY = 1 << 20


class RequestLog:
    """Thread-safe in-memory list of request records, mirrored to a JSON-lines file.

    A client that has just read a response may ask for the log before the server thread has
    appended that request's record (the record's end time is taken after the last byte is
    written). Handlers therefore announce a record just before that last write
    (:meth:`expect`), and :meth:`entries` waits briefly for announced records.
    """

    def __init__(self, path: str | None = None) -> None:
        self._entries: list[dict] = []
        self._cond = threading.Condition()
        self._pending = 0
        self._path = path
        self._file = None
        self.open()

    def open(self) -> None:
        """(Re)open the file for appending, if there is one."""
        with self._cond:
            if self._path and self._file is None:
                self._file = open(self._path, "a", encoding="utf-8")

    def expect(self) -> None:
        """A record is about to be appended (its response is being finished)."""
        with self._cond:
            self._pending += 1

    def append(self, entry: dict, expected: bool = False) -> None:
        """Record one request (and flush it, so another process can tail the file)."""
        line = json.dumps(entry, ensure_ascii=False) + "\n" if self._file else ""
        with self._cond:
            self._entries.append(entry)
            if self._file:
                self._file.write(line)
                self._file.flush()
            if expected:
                self._pending -= 1
                self._cond.notify_all()

    def entries(self, wait: float = 1.0) -> list[dict]:
        """A copy of every record so far, in completion order (waits up to ``wait`` seconds
        for responses that are being finished)."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending <= 0, timeout=wait)
            return list(self._entries)

    def clear(self) -> None:
        """Forget the in-memory records (the file keeps its history)."""
        with self._cond:
            self._entries.clear()

    def close(self) -> None:
        """Close the file, if any."""
        with self._cond:
            if self._file:
                self._file.close()
                self._file = None


_date_cache: tuple[int, str] = (0, "")


def _date_header() -> str:
    """The Date header value, formatted once per second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


class _Dropped(Exception):
    """The connection went away (client gave up, or the server is stopping)."""


class Handler(BaseHTTPRequestHandler):
    """One connection; serves requests until close, idle timeout or server stop."""

    protocol_version = "HTTP/1.1"
    server_version = "simweb/1.0"
    disable_nagle_algorithm = True
    timeout = 30  # idle keep-alive connections are closed after this many seconds
    server: SimServer

    def log_message(self, format: str, *args: object) -> None:
        """Silence the default stderr access log; the request log is the record."""

    def handle_one_request(self) -> None:
        try:
            self.raw_requestline = self.rfile.readline(65537)
        except OSError:
            self.close_connection = True
            return
        if not self.raw_requestline:
            self.close_connection = True
            return
        start = time.time()
        self._final_write: float | None = None
        self._sent = 0
        self._head_sent = False
        self._expected = False
        self.headers = None  # type: ignore[assignment]
        self.request_version = "HTTP/0.9"
        self.command = self.path = ""
        status = 0
        if len(self.raw_requestline) > 65536:
            self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
            status = 414
        elif not self.parse_request():
            status = 400  # parse_request already answered with an error
        else:
            status = self._serve(start)
            return
        self._log(start, "", status, None)

    def _serve(self, start: float) -> int:
        """Dispatch a parsed request, send the response, log it."""
        host = self.headers.get("Host", "")
        target = self.path
        if target.startswith(("http://", "https://")):  # absolute-form (proxy style)
            parts = urlsplit(target)
            host = parts.netloc
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()
        self._discard_body()
        path, _, query = target.partition("?")
        req = Request(
            self.command,
            host,
            target,
            path,
            query,
            self.headers,
            self.server.server_port,
            self.server.day(),
            self.server.stop_event,
        )
        resp: Response | None = None
        try:
            resp = self.server.dispatch(req)
        except Exception as exc:  # a bug in a host must not kill the connection silently
            resp = Response(500, f"simweb error: {exc!r}".encode(), "text/plain")
        try:
            status = self._send(req, resp)
        except (_Dropped, OSError):
            self.close_connection = True
            status = resp.status if self._head_sent else 0
        except Exception:  # never leave an announced record unwritten
            self.close_connection = True
            status = 0
        self._log(start, host, status, resp)
        return status

    def _discard_body(self) -> None:
        """Read and drop a request body so the next request on the connection parses."""
        length = self.headers.get("Content-Length")
        if length and length.isdigit():
            n = int(length)
            if n > MAX_REQUEST_BODY:
                self.close_connection = True
            else:
                self.rfile.read(n)

    def _send(self, req: Request, resp: Response) -> int:
        """Write ``resp``; returns the status, 0 when no response was sent."""
        stop = self.server.stop_event
        if resp.delay and stop.wait(resp.delay):
            raise _Dropped
        if resp.action == "dead":
            self.close_connection = True
            self._expect()
            self.connection.shutdown(socket.SHUT_RDWR)
            return 0
        if resp.action == "hang":
            self._hang()
            return 0
        no_body = resp.status in (204, 304) or resp.status < 200
        length = None if no_body else (len(resp.body) if resp.stream is None else resp.length)
        try:
            reason = HTTPStatus(resp.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [
            f"HTTP/1.1 {resp.status} {reason}",
            f"Date: {_date_header()}",
            f"Server: {self.server_version}",
        ]
        if resp.content_type and not no_body:
            lines.append(f"Content-Type: {resp.content_type}")
        lines += [f"{k}: {v}" for k, v in resp.headers.items()]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        elif not no_body:
            self.close_connection = True  # close-delimited body
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        send = self.connection.sendall
        if req.method == "HEAD" or no_body:
            self._send_last(head)
        elif resp.stream is None:
            self._send_last(head + resp.body)
            self._sent = len(resp.body)
        else:
            send(head)
            self._head_sent = True
            items = iter(resp.stream)
            nxt = next(items, None)
            while nxt is not None:
                item, nxt = nxt, next(items, None)
                if isinstance(item, float):
                    if stop.wait(item):
                        raise _Dropped
                    continue
                if nxt is None:
                    self._send_last(item)
                else:
                    send(item)
                self._sent += len(item)
        return resp.status

    def _send_last(self, data: bytes) -> None:
        """Write a response's last piece; its end time is taken just before the final byte, once
        everything else is in the socket (so neither before a long write nor after a wake-up)."""
        send = self.connection.sendall
        if len(data) > 1:
            send(data[:-1])
        self._expect()
        send(data[-1:])

    def _expect(self) -> None:
        """Announce this request's log record: its last byte is about to be written.

        Also the response's end time for the politeness audit: the client cannot have the whole
        response before this final write. A clock read after the write measured when this
        thread got the GIL back instead, which on a loaded machine was 60+ ms later and made a
        polite crawler look early after small (304) responses.
        """
        self._final_write = time.time()
        if not self._expected:
            self._expected = True
            self.server.log.expect()

    def _hang(self) -> None:
        """Hold the connection without answering until the client leaves or the server stops."""
        self.close_connection = True
        conn, stop = self.connection, self.server.stop_event
        while not stop.is_set():
            readable, _, _ = select.select([conn], [], [], 0.25)
            if readable and not conn.recv(4096):
                return  # client closed its side

    def _log(self, start: float, host: str, status: int, resp: Response | None) -> None:
        entry = {
            "host": host,
            "path": self.path,
            "method": self.command,
            "start": start,
            "end": self._final_write if self._final_write is not None else time.time(),
            "status": status,
            "ua": self.headers.get("User-Agent", "") if self.headers else "",
            "conn": self.client_address[1],
            "bytes": self._sent,
        }
        if resp is not None and "Retry-After" in resp.headers:
            entry["retry_after"] = resp.headers["Retry-After"]
        self.server.log.append(entry, expected=self._expected)


class SimServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks its connections so it can cut them all on stop."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        dispatch: Callable[[Request], Response],
        day: Callable[[], int],
        log: RequestLog,
    ) -> None:
        self.dispatch = dispatch
        self.day = day
        self.log = log
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        super().__init__(address, Handler)

    def process_request(self, request, client_address) -> None:  # type: ignore[override]
        t = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._lock:
            self._conns[request] = t
        t.start()

    def process_request_thread(self, request, client_address) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._conns.pop(request, None)

    def stop(self, grace: float = 2.0) -> None:
        """Stop accepting, abort every wait, cut every connection, join handlers briefly."""
        self.shutdown()
        self.stop_event.set()
        with self._lock:
            conns = dict(self._conns)
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.server_close()
        deadline = time.monotonic() + grace
        for t in conns.values():
            t.join(max(0.0, deadline - time.monotonic()))
