"""One captured exchange against tiny local servers: raw capture, caps, deadlines, reuse."""

from __future__ import annotations

import gzip
import select
import socket
import threading
import time

import pytest

from fetcher.dns import SSRFGuard
from fetcher.http import HostConnection, perform
from tests.fetcher.conftest import response

GUARD = SSRFGuard.from_cidrs(["127.0.0.1/32"])


def conn_to(port: int, **kw) -> HostConnection:
    args = {"connect_timeout": 1.0, "read_timeout": 1.0}
    args.update(kw)
    return HostConnection("http", "a.local.test", port, "127.0.0.1", GUARD, **args)


def get(conn: HostConnection, path: str = "/", deadline_s: float = 3.0, **kw):
    args = {"max_body": 10_000, "max_decoded": 100_000}
    args.update(kw)
    headers = {"Host": conn.host_header, "User-Agent": "recrawlbot-test"}
    return perform(conn, f"http://a.local.test{path}", path, headers, clock=time.monotonic,
                   wallclock=time.time, deadline=time.monotonic() + deadline_s, **args)


def test_raw_capture_keeps_chunk_framing_and_header_bytes(raw_server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Odd:   spaced \r\n" \
           b"Transfer-Encoding: chunked\r\n\r\n"
    body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
    srv = raw_server(lambda path, h: head + body)
    ex = get(conn_to(srv.port))
    assert ex.status == 200 and ex.complete and ex.truncated is None
    assert ex.head == head and ex.body == body
    # The request is recorded as sent, including what http.client added on its own.
    assert ex.request.startswith(b"GET / HTTP/1.1\r\n")
    assert f"Host: a.local.test:{srv.port}\r\n".encode() in ex.request
    assert ex.decoded_bytes == len(b"hello world")


def test_keep_alive_reuses_one_connection(raw_server):
    srv = raw_server(lambda path, h: response(body=b"ok"))
    c = conn_to(srv.port)
    ports = set()
    for _ in range(3):
        ex = get(c)
        assert ex.complete and ex.body == b"ok"
        ports.add(c._conn.sock.getsockname()[1])
    assert len(ports) == 1


def test_connection_close_header_drops_the_connection(raw_server):
    srv = raw_server(lambda path, h: response(body=b"ok", headers={"Connection": "close"}))
    c = conn_to(srv.port)
    assert get(c).complete
    ex = get(c)
    assert ex.complete and ex.error is None
    assert [p for p, *_ in srv.log] == ["/", "/"]


def test_server_closing_idle_connection_is_noticed_before_sending():
    srv = _ClosingServer()
    c = conn_to(srv.port)
    assert get(c).complete and c._conn.sock is not None  # kept alive, as far as we know
    assert srv.closed.acquire(timeout=30)  # the server closed it after its response
    # once its FIN is here, the idle socket reads as closed; no timing assumed
    assert select.select([c._conn.sock], [], [], 30)[0]
    ex = get(c)
    assert ex.complete and ex.error is None and ex.body == b"ok"
    assert srv.requests == 2 and len(set(srv.peers)) == 2  # the second on a new connection
    srv.sock.close()


class _ClosingServer:
    """Answers one keep-alive request per connection (no ``Connection: close``), then closes
    the connection, as a server does with idle keep-alive connections; ``closed`` is released
    once per closed connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Semaphore(0)
        self.requests = 0
        self.peers: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        break
                    head += data
                if head:
                    self.requests += 1
                    self.peers.append(peer[1])
                    conn.sendall(response(body=b"ok"))
            self.closed.release()


def test_body_cap_truncates_and_marks(raw_server):
    srv = raw_server(lambda path, h: response(body=b"x" * 500_000))
    c = conn_to(srv.port)
    ex = get(c, max_body=10_000)
    assert ex.truncated == "length" and len(ex.body) == 10_000 and not ex.complete
    assert c._conn is None  # the rest is still on the wire: the connection was dropped


def test_exactly_the_cap_is_not_truncated(raw_server):
    srv = raw_server(lambda path, h: response(body=b"y" * 10_000))
    ex = get(conn_to(srv.port), max_body=10_000)
    assert ex.complete and ex.truncated is None and len(ex.body) == 10_000


def test_gzip_bomb_is_stopped_by_the_decoded_cap(raw_server):
    bomb = gzip.compress(bytes(20 << 20))
    srv = raw_server(lambda path, h: response(body=bomb, headers={"Content-Encoding": "gzip"}))
    ex = get(conn_to(srv.port), max_body=10 << 20, max_decoded=1 << 20)
    assert ex.error_kind == "too_large" and ex.decoded_bytes <= (1 << 20) + (128 << 10)


def test_never_answering_server_is_cut_by_the_read_timeout(raw_server):
    answer = threading.Event()  # the server answers nothing until the test is done
    srv = raw_server(lambda path, h: answer.wait(30) and None)
    try:
        ex = get(conn_to(srv.port, read_timeout=0.5), deadline_s=10)
    finally:
        answer.set()
    # given up while the server still held the request, by the read timeout (not the deadline)
    assert ex.error_kind == "timeout" and ex.error == "timeout: read" and ex.status is None
    assert ex.end - ex.start >= 0.5  # after waiting the read timeout out


class _Trickler:
    """A server that sends ``head`` then ``body_chunks`` bytes one at a time, ``interval``
    apart, and records whether the client closed the connection before it was done."""

    def __init__(self, head: bytes, body_chunks: int, interval: float) -> None:
        self.data = head + b"z" * body_chunks
        self.interval = interval
        self.sent = 0
        self.done = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def cut(self) -> bool:
        """The client left while bytes were still to come."""
        return self.done.is_set() and self.sent < len(self.data)

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.recv(65536)
        try:
            for b in self.data:
                conn.sendall(bytes([b]))
                self.sent += 1
                time.sleep(self.interval)  # the trickle itself, not a wait for the client
        except OSError:
            pass  # the client reset the connection
        finally:
            conn.close()
            self.sock.close()
            self.done.set()


def test_trickling_headers_cannot_outlast_the_deadline():
    # 19 s of headers, each byte far within the read timeout: only the deadline can end it
    srv = _Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n" * 10, 0, 0.05)
    ex = get(conn_to(srv.port, read_timeout=5.0), deadline_s=1.0)
    assert ex.error_kind == "timeout" and ex.error == "timeout: deadline" and ex.status is None
    assert srv.done.wait(30) and srv.cut  # the server was still trickling when we left


def test_trickling_body_cannot_outlast_the_deadline():
    # 20 s of body after the head, each byte far within the read timeout
    srv = _Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 1000, 0.02)
    ex = get(conn_to(srv.port, read_timeout=5.0), deadline_s=1.5)
    assert ex.error_kind == "timeout" and ex.error == "timeout: deadline"
    assert ex.truncated == "time" and ex.status == 200
    assert 0 < len(ex.body) < 1000
    assert srv.done.wait(30) and srv.cut


def test_short_body_then_close_is_a_disconnect_truncation():
    port = _one_shot(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    ex = get(conn_to(port))
    assert ex.truncated == "disconnect" and ex.body == b"only this"


def _one_shot(data: bytes) -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def serve():
        conn, _ = sock.accept()
        conn.recv(65536)
        conn.sendall(data)
        conn.close()
        sock.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


@pytest.mark.parametrize("data,kind", [
    (b"garbage\r\n\r\n", "protocol"),
    (b"", "connect"),  # closed without a response
])
def test_protocol_errors(data, kind):
    ex = get(conn_to(_one_shot(data)))
    assert ex.status is None and ex.error_kind == kind


def test_connect_refused_is_a_connect_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    ex = get(conn_to(port))
    assert ex.error_kind == "connect"


def test_unwanted_body_is_not_read(raw_server):
    srv = raw_server(lambda p, h: response(body=b"%PDF" * 10_000, content_type="application/pdf"))
    ex = get(conn_to(srv.port), want_body=lambda status, msg: False)
    assert ex.status == 200 and ex.body == b"" and ex.truncated == "unspecified"


def test_https_connects_to_the_checked_ip_with_sni_and_verifies_the_name(tmp_path):
    """We connect to 127.0.0.1 but present the host name as SNI and check the certificate
    against it; a self-signed certificate is therefore refused (connect error)."""
    import shutil
    import ssl
    import subprocess

    if not shutil.which("openssl"):
        pytest.skip("openssl not available")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                    "/CN=tls.local.test", "-addext", "subjectAltName=DNS:tls.local.test",
                    "-keyout", str(key), "-out", str(cert), "-days", "1"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    seen: list[str | None] = []
    greeted = threading.Event()

    def sni(sslobj, name, c):
        seen.append(name)
        greeted.set()

    ctx.sni_callback = sni
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def serve():
        conn, _ = sock.accept()
        try:
            ctx.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            pass
        finally:
            sock.close()

    threading.Thread(target=serve, daemon=True).start()
    c = HostConnection("https", "tls.local.test", sock.getsockname()[1], "127.0.0.1", GUARD,
                       connect_timeout=2.0, read_timeout=2.0)
    assert c.host_header == f"tls.local.test:{sock.getsockname()[1]}"
    ex = get(c)
    assert ex.error_kind == "connect" and "CERTIFICATE_VERIFY_FAILED" in ex.error
    assert greeted.wait(30) and seen == ["tls.local.test"]
