"""The HTTP layer: keep-alive, the request log, the control host and the command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import requests

from simweb import SimWeb
from tests.simweb.conftest import ROOT, Client, logged


def test_keep_alive_and_log_fields(web: SimWeb, client: Client) -> None:
    web.clear_log()
    c = client.conn()
    for path in ("/robots.txt", "/", "/p/1.html", "/nope"):
        c.request("GET", path, headers={"Host": "site1.sim.test:1234", "User-Agent": "ua/1"})
        r = c.getresponse()
        r.read()
        assert r.getheader("Connection") != "close" and r.getheader("Date")
    c.close()
    logged(web, lambda log: any(e["path"] == "/nope" for e in log))  # once its response is out
    log = web.request_log()
    assert [e["path"] for e in log] == ["/robots.txt", "/", "/p/1.html", "/nope"]
    assert [e["status"] for e in log] == [200, 200, 200, 404]
    assert len({e["conn"] for e in log}) == 1  # one TCP connection reused
    for entry in log:
        assert entry["host"] == "site1.sim.test" and entry["ua"] == "ua/1"
        assert entry["method"] == "GET" and entry["start"] <= entry["end"]
    assert all(a["end"] <= b["start"] for a, b in zip(log, log[1:], strict=False))


def test_head_query_and_requests_session(web: SimWeb, client: Client) -> None:
    status, headers, body = client.get("site0.sim.test", "/p/1.html", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 1000
    web.clear_log()
    with requests.Session() as s:
        s.trust_env = False
        r = s.get(
            f"http://127.0.0.1:{web.port}/p/2.html?utm_source=x#frag",
            headers={"Host": "site0.sim.test"},
            timeout=5,
        )
        assert r.status_code == 200 and "charset=utf-8" in r.headers["Content-Type"]
        assert r.headers["Server"] == "simweb/1.0"
    # The server logs an exchange once its response is written, so the client can see the
    # response first (and the HEAD above can even be logged after clear_log): wait for the entry.
    want = "/p/2.html?utm_source=x"
    paths = [e["path"] for e in logged(web, lambda log: any(e["path"] == want for e in log))]
    assert want in paths and not any("#" in p for p in paths)


def test_control_endpoint_from_another_client(web: SimWeb) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=5) as s:
        s.sendall(
            b"GET /__sim/day?set=7 HTTP/1.1\r\nHost: control.sim.test\r\nConnection: close\r\n\r\n"
        )
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    try:
        assert reply.startswith(b"HTTP/1.1 200") and json.loads(reply.split(b"\r\n\r\n")[1]) == {
            "day": 7
        }
        assert web.day == 7
        status, _, body = Client(web.port).get("control.sim.test", "/__sim/day")
        assert status == 200 and json.loads(body) == {"day": 7}
        assert Client(web.port).get("control.sim.test", "/__sim/day?set=x")[0] == 400
    finally:
        web.set_day(0)
    assert any(e["host"] == "control.sim.test" for e in web.request_log())


def test_true_change_rates_for_another_process(web: SimWeb) -> None:
    """`/__sim/rates`: every normal site's page with its true rate, as the truth gives it (the
    Airflow demo writes them as the crawl home's reference rates)."""
    status, _, body = Client(web.port).get("control.sim.test", "/__sim/rates")
    rates = json.loads(body)
    pages = [u for site in web.world.sites for u in web.truth.pages(site.name)]
    assert status == 200 and sorted(rates) == sorted(pages) and len(pages) > 10
    assert all(rates[u] == web.truth.change_rate(u) for u in pages)
    assert any(r > 0 for r in rates.values())
    assert not any("robots" in u or "redirects" in u for u in rates)  # hostile hosts: no truth


def test_seed_urls_and_hosts(web: SimWeb) -> None:
    hosts = web.hosts()
    assert hosts[:6] == [f"site{i}.sim.test" for i in range(6)]
    for name in (
        "robots404",
        "robots500",
        "robotsdelay",
        "robotsslowdelay",
        "robotsredirect",
        "robotsrules",
        "redirects",
        "errors",
        "throttle",
        "slow",
        "bomb",
        "charset",
        "malformed",
        "trap",
        "dup",
        "changing",
    ):
        assert f"{name}.sim.test" in hosts
    assert "control.sim.test" not in hosts
    assert web.seed_urls() == [f"http://{h}:{web.port}/" for h in hosts]


def test_log_file_mirrors_memory(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with SimWeb(seed=3, n_sites=2, pages_per_site=5, log_path=str(path)) as web:
        client = Client(web.port)
        for p in ("/robots.txt", "/", "/p/1.html"):
            client.get("site1.sim.test", p)
        memory = web.request_log()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == memory and len(lines) == 3


def test_keep_alive_serves_many_requests_on_one_unstalled_connection(
    web: SimWeb, client: Client
) -> None:
    """What keeps a keep-alive client fast, checked as such (the rate itself is for
    benchmarks/fetch_throughput.py): one connection serves every request, and the server's
    side of it has Nagle's algorithm off, so a response written in more than one piece is not
    held back until the client's delayed ACK (~40 ms a request)."""
    c = client.conn()
    n, ports = 600, set()
    for _ in range(n):
        c.request("GET", "/robots.txt", headers={"Host": "site0.sim.test"})
        r = c.getresponse()
        assert r.status == 200 and r.read() and not r.will_close
        ports.add(c.sock.getsockname()[1])
    assert len(ports) == 1
    port = ports.pop()
    log = logged(web, lambda log: sum(e["conn"] == port for e in log) >= n)
    assert sum(e["conn"] == port for e in log) == n

    def peer(s: socket.socket) -> int | None:
        try:
            return s.getpeername()[1]
        except OSError:  # another test's connection, closing
            return None

    with web._server._lock:  # the server's side of our connection, still open
        served = [s for s in web._server._conns if peer(s) == port]
    assert len(served) == 1
    assert served[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    c.close()


def _cli(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, "-m", "simweb", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env=env,
        cwd=ROOT,
    ).stdout


def test_cli_serve_seeds_day_and_audit(tmp_path: Path) -> None:
    log = tmp_path / "serve.jsonl"
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simweb",
            "serve",
            "--port",
            "0",
            "--sites",
            "3",
            "--pages",
            "5",
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        port = int(line.split("127.0.0.1:")[1].split()[0])
        seeds = _cli("seeds", "--port", str(port)).split()
        assert seeds[:3] == [f"http://site{i}.sim.test:{port}/" for i in range(3)]
        assert _cli("day", "--port", str(port), "4").strip() == "4"
        assert _cli("day", "--port", str(port)).strip() == "4"
        client = Client(port)
        client.get("site2.sim.test", "/robots.txt")
        client.get("site2.sim.test", "/")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    assert "no violations" in _cli(
        "audit", str(log), "--sites", "3", "--pages", "5", "--min-delay", "0"
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "simweb",
            "audit",
            str(log),
            "--sites",
            "3",
            "--pages",
            "5",
            "--min-delay",
            "5",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
    )
    assert bad.returncode == 1 and "delay is 5s" in bad.stdout


def test_warm_renders_every_page_once_and_serves_the_same_bytes() -> None:
    """`warm` fills each normal site's body cache: what the server then sends is what a cold
    server renders, and nothing is rendered again for a request (nor logged by the warming)."""
    with SimWeb(seed=3, n_sites=3, pages_per_site=6) as cold, SimWeb(seed=3, n_sites=3,
                                                                       pages_per_site=6) as warm:
        sites = [h for h in warm.hosts() if h.startswith("site")]
        expected = sum(len(warm.world.host(h).pages()) for h in sites)
        assert warm.warm() == expected > 0
        assert warm.request_log() == []
        renders = []
        for h in sites:
            host = warm.world.host(h)
            original = host._render
            host._render = lambda *a, _o=original, **k: renders.append(a) or _o(*a, **k)
        for h in sites:
            for path in warm.world.host(h).pages():
                bodies = []
                for web in (cold, warm):
                    c = Client(web.port)
                    bodies.append(c.get(h, path)[2].replace(str(web.port).encode(), b"PORT"))
                assert bodies[0] == bodies[1], (h, path)
        assert renders == []
