"""``SimWeb``: the one object tests, benchmarks and the demo use.

It owns the world (what exists), the truth (what a perfect crawler would conclude), the request
log (what the crawler actually did) and the server thread. The simulated day is a field here so
that a backfill can move time forward without restarting the server; other processes move it
through the control host.
"""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import parse_qs

from simweb.faults import Fault
from simweb.host import Host
from simweb.response import Request, Response, not_found, text
from simweb.server import RequestLog, SimServer
from simweb.signals import Mix
from simweb.site import NormalSite, World
from simweb.truth import Truth

CONTROL_HOST = "control.sim.test"


def control(port: int, path: str) -> str:
    """GET a control endpoint (/__sim/seeds, /__sim/day...) of a simweb served on
    127.0.0.1:port, from another process; RuntimeError unless it answers 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": CONTROL_HOST})
        resp = conn.getresponse()
        body = resp.read().decode()
        if resp.status != 200:
            raise RuntimeError(f"simweb control {path}: {resp.status} {body.strip()}")
        return body
    finally:
        conn.close()


class SimWeb:
    """A deterministic simulated web on 127.0.0.1, many virtual hosts on one port.

    Args:
        seed: makes every page, link and change time reproducible.
        n_sites: number of normal sites ``site0.sim.test`` ... (at least 1).
        pages_per_site: pages of each normal site, home included.
        log_path: also append each request as a JSON line to this file.
        port: 0 for an ephemeral port.
        rates: change rates of normal pages: "loguniform" (0.005-0.1/day, the default) or
            "web" (the mix measured on the real web, simweb.changes.WEB_RATE_CLASSES).
        signals: how normal sites' sitemaps date their pages (simweb.signals): a preset
            ("accurate", the default; "none", "mixed", "lying", "lag" or any kind name) or
            (kind, share) pairs.
        feeds: share of normal sites that also publish /feed.xml (RSS or Atom).
    """

    def __init__(
        self,
        seed: int = 42,
        n_sites: int = 20,
        pages_per_site: int = 30,
        log_path: str | None = None,
        port: int = 0,
        rates: str = "loguniform",
        signals: Mix = "accurate",
        feeds: float = 0.0,
    ) -> None:
        if n_sites < 1:
            raise ValueError("n_sites must be at least 1")
        self.seed = seed
        self.world = World(seed, n_sites, pages_per_site, rates, signals, feeds)
        self.truth = Truth(self.world, lambda: self.port)
        self._address = ("127.0.0.1", port)  # loopback only, by design
        self._log = RequestLog(log_path)
        self._day = 0
        self._faults: dict[str, Fault] = {}
        self._server: SimServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> int:
        """Start serving in a background thread; returns the port."""
        if self._server is not None:
            return self.port
        self._log.open()
        self._server = SimServer(self._address, self.dispatch, lambda: self._day, self._log)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="simweb", daemon=True
        )
        self._thread.start()
        return self.port

    def warm(self) -> int:
        """Render every normal site's pages for the current day now (a site caches each page's
        body by version): a benchmark that crawls this web twice then gives its first crawl no
        rendering work the second is spared. Only while started (bodies hold the port). Returns
        the number of pages rendered."""
        stop = threading.Event()
        n = 0
        for name, host in self.world.hosts.items():
            if not isinstance(host, NormalSite):
                continue
            for path in host.pages():
                host.respond(Request("GET", name, path, path, "", {}, self.port, self._day, stop))
                n += 1
        return n

    def stop(self) -> None:
        """Stop the server, dropping open (even hung) connections; returns within ~2 s."""
        if self._server is None:
            return
        self._server.stop()
        if self._thread:
            self._thread.join(2)
        self._server = self._thread = None
        self._log.close()

    def __enter__(self) -> SimWeb:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (only while started)."""
        if self._server is None:
            raise RuntimeError("SimWeb is not started")
        return self._server.server_port

    def base(self, host: str) -> str:
        """``http://host:PORT``."""
        return f"http://{host}:{self.port}"

    # -- simulated time and state --------------------------------------------------------
    @property
    def day(self) -> int:
        """The simulated day that content is served for."""
        return self._day

    def set_day(self, d: int) -> None:
        """Move simulated time (changing pages, Last-Modified, throttling state)."""
        self._day = int(d)

    def reset_state(self) -> None:
        """Forget per-request state (which throttled pages were already asked for)."""
        for h in self.world.hosts.values():
            reset = getattr(h, "reset", None)
            if reset:
                reset()

    def set_fault(self, hosts: list[str], fault: Fault) -> None:
        """Make ``hosts`` answer as ``fault`` says (simweb.faults) until clear_faults."""
        for h in hosts:
            if self.world.host(h) is None:
                raise ValueError(f"no such host: {h}")
            self._faults[h] = fault

    def clear_faults(self) -> None:
        """Every host answers normally again (the web is fixed)."""
        self._faults.clear()

    # -- catalogue -----------------------------------------------------------------------
    def hosts(self) -> list[str]:
        """Every crawlable host name (normal sites first); the control host is not included."""
        return list(self.world.hosts)

    def seed_urls(self) -> list[str]:
        """Every host's home page, normal and hostile."""
        return [f"{self.base(h)}/" for h in self.hosts()]

    def request_log(self) -> list[dict]:
        """Every request so far (since the last clear_log)."""
        return self._log.entries()

    def clear_log(self) -> None:
        """Empty the in-memory request log."""
        self._log.clear()

    # -- serving -------------------------------------------------------------------------
    def dispatch(self, req: Request) -> Response:
        """Route a request to its virtual host (or the control endpoint)."""
        if req.host == CONTROL_HOST:
            return self._control(req)
        host: Host | None = self.world.host(req.host)
        if host is None:
            return not_found(req)
        fault = self._faults.get(req.host)
        return fault.respond(host, req) if fault is not None else host.respond(req)

    def _control(self, req: Request) -> Response:
        """``/__sim/day[?set=N]``, ``/__sim/seeds``, ``/__sim/rates`` (JSON: URL -> true change
        rate), ``/__sim/signals`` (JSON: host -> {kind, feed URL or null}), ``/__sim/reset``
        for other processes."""
        if req.path == "/__sim/day":
            values = parse_qs(req.query).get("set")
            if values:
                try:
                    self.set_day(int(values[0]))
                except ValueError:
                    return text("set must be an integer\n", 400)
            return text(json.dumps({"day": self._day}) + "\n", ctype="application/json")
        if req.path == "/__sim/seeds":
            return text("".join(f"{req.base(h)}/\n" for h in self.hosts()))
        if req.path == "/__sim/rates":
            return text(json.dumps(self.truth.change_rates()) + "\n", ctype="application/json")
        if req.path == "/__sim/signals":
            t = self.truth
            out = {h: {"kind": k, "feed": t.feed_url(h)} for h, k in t.signal_kinds().items()}
            return text(json.dumps(out) + "\n", ctype="application/json")
        if req.path == "/__sim/reset":
            self.reset_state()
            return text("ok\n")
        return not_found(req)
