"""Fixtures for the fetcher tests: settings for 127.0.0.1-only crawling and small servers.

Nothing here ever connects anywhere but 127.0.0.1: sim hosts resolve through ``static_hosts``
and the SSRF guard lets only 127.0.0.1/32 through.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

# Under a bare `pytest` this directory's name would make `import fetcher` a namespace package
# (tests/ is on sys.path); put the project root first, as tests/simweb does.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fetcher import FetchSettings  # noqa: E402

LOCAL = {"*.sim.test": "127.0.0.1", "*.local.test": "127.0.0.1"}


def local_settings(**overrides) -> FetchSettings:
    """Settings that reach the sim hosts on 127.0.0.1 and nothing else, with short timeouts."""
    base = FetchSettings(
        min_delay_s=0.2, static_hosts=dict(LOCAL), allow_private_networks=("127.0.0.1/32",),
        time_budget_s=30.0, connect_timeout_s=2.0, read_timeout_s=2.0, request_deadline_s=4.0,
        threads=8)
    return replace(base, **overrides)


@pytest.fixture()
def clock() -> Callable[[], float]:
    """A monotonic clock to give a Fetcher and its test servers alike (starts near zero)."""
    t0 = time.monotonic()
    return lambda: time.monotonic() - t0


class SimClock:
    """A clock that stands still until told to move (``advance``), for timing without a timer.

    Given to a Fetcher and its test server, the server says how long each response took
    (``advance`` in its handler) and the fetcher's budget and deadlines are counted in those
    simulated seconds, not in how fast the machine happens to be. The fetcher waits for a
    politeness delay on a real timer, re-reading the clock, and this clock does not move on its
    own: use it with ``min_delay_s=0`` and no back-off or Retry-After waits.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


@pytest.fixture()
def settings_factory() -> Callable[..., FetchSettings]:
    return local_settings


@dataclass
class Served:
    """One request as the server saw it, in the server's clock."""

    path: str
    received: float  # its head had been read
    replied: float | None = None  # just before the response was written (None: closed)


class RawServer:
    """A tiny HTTP/1.1 server on 127.0.0.1 whose handler writes raw bytes per request.

    ``handler(path, headers) -> bytes | None`` returns the full response (None: close).
    Every request is logged as (path, headers, received) and in ``served`` with the time its
    response was written, both read from ``clock``. Given the Fetcher's clock, politeness
    bounds hold exactly: the fetcher reads a response's end after the server wrote it, and a
    request arrives after the fetcher started it, so ``next.received >= prev.replied + delay``.
    """

    def __init__(self, handler: Callable[[str, dict[str, str]], bytes | None],
                 clock: Callable[[], float] = time.time) -> None:
        self.handler = handler
        self.clock = clock
        self.log: list[tuple[str, dict[str, str], float]] = []
        self.served: list[Served] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                headers: dict[str, str] = {}
                while True:
                    h = f.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                path = line.split()[1].decode()
                served = Served(path, self.clock())
                self.log.append((path, headers, served.received))
                self.served.append(served)
                out = self.handler(path, headers)
                if out is None:
                    return
                served.replied = self.clock()
                conn.sendall(out)
        except OSError:
            return
        finally:
            f.close()
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


@pytest.fixture()
def raw_server() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def make(handler, clock=time.time):
        s = RawServer(handler, clock)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def response(status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None,
             content_type: str | None = "text/html") -> bytes:
    """Bytes of a Content-Length-framed HTTP/1.1 response."""
    lines = [f"HTTP/1.1 {status} X"]
    if content_type:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
