"""One captured exchange against tiny local servers: raw capture, caps, deadlines, reuse."""

from __future__ import annotations

import gzip
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


def test_server_closing_idle_connection_is_noticed_before_sending(raw_server):
    def once(path, h):
        return response(body=b"ok", headers={"Connection": "close"})

    srv = raw_server(once)
    c = conn_to(srv.port)
    assert get(c).complete
    time.sleep(0.05)
    ex = get(c)
    assert ex.complete and ex.error is None


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
    srv = raw_server(lambda path, h: time.sleep(5) or None)
    t = time.monotonic()
    ex = get(conn_to(srv.port, read_timeout=0.5), deadline_s=10)
    assert ex.error_kind == "timeout" and ex.status is None
    assert time.monotonic() - t < 1.5


def _trickle_server(head: bytes, body_chunks: int, interval: float):
    """A server that sends ``head`` byte by byte (if it trickles) then a slow body."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)

    def serve():
        conn, _ = sock.accept()
        conn.recv(65536)
        try:
            for b in head:
                conn.sendall(bytes([b]))
                time.sleep(interval)
            for _ in range(body_chunks):
                conn.sendall(b"z")
                time.sleep(interval)
        except OSError:
            pass
        finally:
            conn.close()
            sock.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


def test_trickling_headers_cannot_outlast_the_deadline():
    port = _trickle_server(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n" * 10, 0, 0.05)
    t = time.monotonic()
    ex = get(conn_to(port), deadline_s=1.0)
    assert ex.error_kind == "timeout" and "deadline" in ex.error
    assert time.monotonic() - t < 1.4


def test_trickling_body_cannot_outlast_the_deadline():
    port = _trickle_server(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 1000, 0.02)
    t = time.monotonic()
    ex = get(conn_to(port), deadline_s=1.5)
    assert ex.error_kind == "timeout" and ex.truncated == "time" and ex.status == 200
    assert 0 < len(ex.body) < 1000
    assert time.monotonic() - t < 1.9


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
    ctx.sni_callback = lambda sslobj, name, c: seen.append(name)
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
    deadline = time.monotonic() + 2
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["tls.local.test"]
