"""Every hostile behaviour is reachable over a real socket and looks as documented."""

from __future__ import annotations

import http.client
import queue
import socket
import struct
import time
import zlib

import brotli
import pytest

from simweb import SimWeb
from simweb.bombs import BOMB_SIZE, HUGE_SIZE
from simweb.response import parse_http_date
from tests.simweb.conftest import Client, logged

MIB = 1 << 20


def test_robots_hosts(client: Client) -> None:
    assert client.get("robots404.sim.test", "/robots.txt")[0] == 404
    assert client.get("robots500.sim.test", "/robots.txt")[0] == 500
    assert client.get("robots500.sim.test", "/page/1.html")[0] == 200  # exists, must not fetch
    assert b"Crawl-delay: 2" in client.get("robotsdelay.sim.test", "/robots.txt")[2]
    assert b"Crawl-delay: 120" in client.get("robotsslowdelay.sim.test", "/robots.txt")[2]
    status, headers, _ = client.get("robotsredirect.sim.test", "/robots.txt")
    assert status == 301 and headers["location"] == "/real-robots.txt"
    assert b"Disallow: /secret/" in client.get("robotsredirect.sim.test", "/real-robots.txt")[2]
    body = client.get("robotsrules.sim.test", "/robots.txt")[2].decode()
    assert "User-agent: recrawlbot" in body and "Disallow: /star*/end" in body
    assert client.get("robotsrules.sim.test", "/./a/../a/x")[0] == 200
    for host in ("redirects.sim.test", "bomb.sim.test", "trap.sim.test", "site0.sim.test"):
        status, headers, body = client.get(host, "/robots.txt")
        assert status == 200 and headers["content-type"].startswith("text/plain")


def follow(client: Client, host: str, path: str, cap: int = 20) -> list[tuple[int, str]]:
    """Follow redirects by hand; [(status, location)] until a non-redirect."""
    hops: list[tuple[int, str]] = []
    while len(hops) < cap:
        status, headers, _ = client.get(host, path)
        if status not in (301, 302, 303, 307, 308):
            return [*hops, (status, path)]
        hops.append((status, headers["location"]))
        path = headers["location"]
    return hops


@pytest.mark.parametrize("code", [301, 302, 307, 308])
@pytest.mark.parametrize("n", [1, 4])
def test_redirect_chains(web: SimWeb, client: Client, code: int, n: int) -> None:
    hops = follow(client, "redirects.sim.test", f"/chain/{code}/{n}")
    assert [s for s, _ in hops] == [code] * n + [200]
    assert len(web.truth.redirect_chain(web.base("redirects.sim.test") + f"/chain/{code}/{n}")) == n


def test_long_chain_loop_and_bait(web: SimWeb, client: Client) -> None:
    assert len(follow(client, "redirects.sim.test", "/chain/302/7")) == 8
    assert [s for s, _ in follow(client, "redirects.sim.test", "/mixed/4")] == [
        301,
        308,
        307,
        302,
        200,
    ]
    loop = follow(client, "redirects.sim.test", "/loop/a", cap=6)
    assert [p for _, p in loop] == ["/loop/b", "/loop/a"] * 3
    chain = web.truth.redirect_chain(web.base("redirects.sim.test") + "/loop/a")
    assert [u.rsplit("/", 1)[1] for _, u in chain] == ["b", "a"]
    locations = {
        p: client.get("redirects.sim.test", p)[1]["location"]
        for p in ("/cross", "/relative", "/to-localhost", "/to-private", "/to-metadata")
    }
    assert locations["/cross"] == f"http://site0.sim.test:{web.port}/"
    assert locations["/relative"] == "chain/301/0"
    assert locations["/to-localhost"] == f"http://127.0.0.1:{web.port}/"
    assert locations["/to-private"] == "http://10.0.0.1/"
    assert locations["/to-metadata"] == "http://169.254.169.254/latest/meta-data/"


def test_errors_and_content_types(client: Client) -> None:
    for code in (404, 410, 500, 403):
        assert client.get("errors.sim.test", f"/{code}")[0] == code
    status, headers, body = client.get("errors.sim.test", "/wrongtype.html")
    assert status == 200 and headers["content-type"] == "application/pdf"
    assert body.startswith(b"%PDF")
    status, headers, body = client.get("errors.sim.test", "/image.png")
    assert headers["content-type"] == "image/png" and body.startswith(b"\x89PNG")
    assert client.get("errors.sim.test", "/plain.txt")[1]["content-type"].startswith("text/plain")
    assert client.get("nowhere.example", "/")[0] == 404


def test_throttle_429_then_200_and_503_date(web: SimWeb, client: Client) -> None:
    web.reset_state()
    status, headers, _ = client.get("throttle.sim.test", "/p/1.html")
    assert status == 429 and headers["retry-after"] == "2"
    assert client.get("throttle.sim.test", "/p/1.html")[0] == 200
    status, headers, _ = client.get("throttle.sim.test", "/busy")
    when = parse_http_date(headers["retry-after"])
    assert status == 503 and when is not None
    assert client.get("throttle.sim.test", "/busy")[0] == 200
    web.set_day(1)  # a new simulated day throttles again
    try:
        assert client.get("throttle.sim.test", "/p/1.html")[0] == 429
    finally:
        web.set_day(0)
    # The log is in completion order: a loaded server thread may append a record after the
    # client's next request completed, so order by arrival.
    log = sorted(
        (e for e in web.request_log() if e["host"] == "throttle.sim.test"), key=lambda e: e["start"]
    )
    assert log[0]["status"] == 429 and log[0]["retry_after"] == "2"
    # the date is 2 s (rounded up to the whole second) after the server answered, on its clock
    busy = next(e for e in log if e["path"] == "/busy" and e["status"] == 503)
    assert busy["retry_after"] == headers["retry-after"]
    assert busy["start"] + 2 < when.timestamp() <= busy["end"] + 3


def test_slow_page_times_out_an_impatient_client(client: Client) -> None:
    with pytest.raises(TimeoutError):
        client.get("slow.sim.test", "/slow", timeout=0.5)


def test_slow_page_answers_a_patient_client(client: Client) -> None:
    t0 = time.monotonic()  # before the request: the server's 3 s wait lies within
    status, _, body = client.get("slow.sim.test", "/slow", timeout=30)
    assert status == 200 and b"</html>" in body and time.monotonic() - t0 > 2.9


def test_trickle_sends_headers_then_dribbles(client: Client) -> None:
    c = client.conn(timeout=30)
    t0 = time.monotonic()  # before the request: the first byte cannot come sooner
    c.request("GET", "/trickle", headers={"Host": "slow.sim.test"})
    r = c.getresponse()  # the head comes at once, with the length of the whole body
    assert r.status == 200 and r.getheader("Content-Length") == "120"
    got = r.read(3)
    assert got == b"xxx" and time.monotonic() - t0 >= 1.0  # 0.5 s between the bytes
    c.close()


def test_hang_and_dead(web: SimWeb, client: Client) -> None:
    with pytest.raises(TimeoutError):
        client.get("slow.sim.test", "/hang", timeout=0.3)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        client.get("slow.sim.test", "/dead")

    def both(log: list[dict]) -> list[dict]:
        return [e for e in log if e["path"] in ("/hang", "/dead")]

    # the hang ends (and is logged) once the server sees that the client left
    entries = both(logged(web, lambda log: len(both(log)) == 2))
    assert sorted((e["path"], e["status"]) for e in entries) == [("/dead", 0), ("/hang", 0)]


def test_gzip_bomb_small_on_wire_big_inflated(client: Client) -> None:
    status, headers, body = client.get("bomb.sim.test", "/gzipbomb", timeout=30)
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert len(body) < 2 * MIB and int(headers["content-length"]) == len(body)
    assert struct.unpack("<I", body[-4:])[0] == BOMB_SIZE % 2**32
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(body[: 64 * 1024], 8 * MIB)
    assert len(out) == 8 * MIB and out.count(0) == len(out)


def test_brotli_bomb(client: Client) -> None:
    status, headers, body = client.get("bomb.sim.test", "/brbomb", timeout=30)
    assert status == 200 and headers["content-encoding"] == "br" and len(body) < MIB
    d, inflated, i = brotli.Decompressor(), 0, 0
    while inflated < 8 * MIB:
        inflated += len(d.process(body[i : i + 256]))
        i += 256
    assert i < len(body) // 4


@pytest.mark.slow
def test_gzip_bomb_inflates_to_a_gibibyte(client: Client) -> None:
    body = client.get("bomb.sim.test", "/gzipbomb", timeout=30)[2]
    d, total, data = zlib.decompressobj(16 + zlib.MAX_WBITS), 0, body
    while data:
        total += len(d.decompress(data, 64 * MIB))
        data = d.unconsumed_tail
    assert total == BOMB_SIZE and d.eof


def test_huge_and_nolength(web: SimWeb, client: Client) -> None:
    c = client.conn(timeout=5)
    c.request("GET", "/huge", headers={"Host": "bomb.sim.test"})
    r = c.getresponse()
    assert r.status == 200 and int(r.getheader("Content-Length")) == HUGE_SIZE
    assert r.read(MIB).startswith(b"<!DOCTYPE html>")
    c.close()
    status, headers, body = client.get("bomb.sim.test", "/nolength")
    assert status == 200 and "content-length" not in headers
    assert headers["connection"] == "close" and body.rstrip().endswith(b"</html>")


def test_malformed_pages(client: Client) -> None:
    assert client.get("malformed.sim.test", "/empty.html")[2] == b""
    assert len(client.get("malformed.sim.test", "/deep.html")[2]) > 100_000 * 5
    assert b"\x00" in client.get("malformed.sim.test", "/nul.html")[2]
    with pytest.raises(UnicodeDecodeError):
        client.get("malformed.sim.test", "/garbage.html")[2].decode()
    status, headers, body = client.get("malformed.sim.test", "/binary.html")
    assert status == 200 and headers["content-type"] == "text/html" and len(body) == 4096


def test_traps_are_infinite(web: SimWeb, client: Client) -> None:
    body = client.get("trap.sim.test", "/cal/2026/12")[2]
    assert b'href="/cal/2027/1"' in body and b'href="/cal/2026/11"' in body
    a = client.get("trap.sim.test", "/s/page?PHPSESSID=X")[2]
    b = client.get("trap.sim.test", "/s/page?PHPSESSID=X")[2]
    assert a != b and b"PHPSESSID=" in a and b";jsessionid=" in a
    deep = "/a/" * 1 + "a/" * 40
    assert b'href="a/"' in client.get("trap.sim.test", deep)[2]
    links = client.get("trap.sim.test", "/filter?color=red&size=m")[2].count(b"/filter?")
    assert links >= 10
    assert web.truth.trap_kind(web.base("trap.sim.test") + "/cal/1999/1") == "calendar"
    assert web.truth.trap_kind(web.base("trap.sim.test") + "/") is None


def test_stop_is_prompt_with_hung_and_trickling_connections() -> None:
    """stop() cuts hung, trickling, slow and idle connections instead of waiting them out
    (hang: forever, trickle: 60 s, slow: 3 s); judged from what each exchange recorded."""
    web = SimWeb(seed=1, n_sites=1, pages_per_site=3)
    serving: queue.Queue[str] = queue.Queue()
    dispatch = web.dispatch

    def announce(req):  # called as a request is handled, before its response is written
        serving.put(req.path)
        return dispatch(req)

    web.dispatch = announce  # type: ignore[method-assign]  # start() hands it to the server
    web.start()
    client = Client(web.port)
    idle = client.conn()
    idle.request("GET", "/", headers={"Host": "site0.sim.test"})
    idle.getresponse().read()  # a kept-alive idle connection too
    assert serving.get(timeout=30) == "/"
    socks = []
    for path in ("/hang", "/trickle", "/slow"):
        s = socket.create_connection(("127.0.0.1", web.port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: slow.sim.test\r\n\r\n".encode())
        socks.append(s)
    assert {serving.get(timeout=30) for _ in range(3)} == {"/hang", "/trickle", "/slow"}
    trickle, head = socks[1], b""
    trickle.settimeout(30)
    while b"\r\n\r\n" not in head:  # the trickle's head is out: its body is dribbling
        chunk = trickle.recv(4096)
        assert chunk, head
        head += chunk
    web.stop()
    # every exchange ended within stop() (its grace join), cut short: no wait ran its course
    log = {e["path"]: e for e in web.request_log()}
    assert log["/hang"]["status"] == 0 and log["/slow"]["status"] == 0  # nothing sent
    assert log["/trickle"]["status"] == 200 and log["/trickle"]["bytes"] < 120  # cut mid-body
    idle.sock.settimeout(30)
    assert idle.sock.recv(1) == b""  # the idle connection was closed by the server
    for s in socks:
        s.close()
    idle.close()
