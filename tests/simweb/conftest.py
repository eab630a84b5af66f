"""Shared fixtures: one small simulated web per test module and a raw HTTP helper.

Requests go to 127.0.0.1 with an explicit Host header, exactly as a crawler with a static DNS
override sends them.
"""

from __future__ import annotations

import http.client
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Under a bare `pytest` (not `python -m pytest`) the project root is not on sys.path, and this
# directory's name would make `import simweb` a namespace package; put the root first.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from simweb import SimWeb  # noqa: E402


class Client:
    """Minimal HTTP client for a simweb port; returns (status, headers, body)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def conn(self, timeout: float = 5.0) -> http.client.HTTPConnection:
        """A fresh connection to the server."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def get(
        self,
        host: str,
        path: str,
        headers: dict[str, str] | None = None,
        method: str = "GET",
        timeout: float = 5.0,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on its own connection, body read fully."""
        c = self.conn(timeout)
        try:
            c.request(
                method,
                path,
                headers={"Host": host, "User-Agent": "recrawlbot-test", **(headers or {})},
            )
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def url(self, url: str) -> tuple[int, dict[str, str], bytes]:
        """GET an absolute sim URL."""
        host_port, _, path = url.removeprefix("http://").partition("/")
        return self.get(host_port.split(":")[0], "/" + path)


def logged(web: SimWeb, done: Callable[[list[dict]], bool], timeout: float = 30.0) -> list[dict]:
    """The request log once ``done(entries)`` holds. A record is written when its exchange ends,
    which for a client that gave up (a hang, a dropped connection) is some time after the client
    moved on; ``timeout`` only guards against a hang, the caller asserts on what it gets."""
    deadline = time.monotonic() + timeout
    while True:
        entries = web.request_log()
        if done(entries) or time.monotonic() > deadline:
            return entries
        time.sleep(0.01)


@pytest.fixture(scope="module")
def web() -> Iterator[SimWeb]:
    w = SimWeb(seed=42, n_sites=6, pages_per_site=20)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def client(web: SimWeb) -> Client:
    return Client(web.port)
