"""Hosts that misbehave at the protocol level: robots edge cases, redirects, errors,
throttling, slowness and oversized or bombed bodies.

Each host is small and self-describing: its home page links every behaviour it offers, so a
crawl seeded with the home pages reaches all of them, and tests can request paths directly.
"""

from __future__ import annotations

import threading

from simweb import bombs
from simweb.host import Host, Link, SimpleHost
from simweb.response import (
    PDF,
    PNG_1PX,
    Request,
    Response,
    html,
    not_found,
    now_plus,
    redirect,
    text,
)
from simweb.text import simple_page

PAGES = ["/page/1.html", "/page/2.html", "/page/3.html"]


def _pages_graph(extra: list[str] | None = None) -> dict[str, list[str]]:
    """Home linking to a few pages (and ``extra``), each page linking home and onwards."""
    links = PAGES + (extra or [])
    graph = {"/": links}
    for i, p in enumerate(links):
        graph[p] = ["/", links[(i + 1) % len(links)]]
    return graph


class MenuHost(Host):
    """A host whose home page links each of its behaviours (``PATHS``), and nothing else does."""

    PATHS: list[str] = []

    def pages(self) -> list[str]:
        return ["/", *self.PATHS]

    def links(self, path: str) -> list[Link]:
        return [(self.name, p) for p in self.PATHS] if path == "/" else []


# -- robots edge cases ---------------------------------------------------------------------
class Robots500(SimpleHost):
    """robots.txt answers 500: RFC 9309 2.3.1.4 says assume complete disallow."""

    def robots(self, req: Request) -> Response:
        return html("<h1>500 Internal Server Error</h1>", 500)

    def effective_robots(self) -> str | None:
        return "User-agent: *\nDisallow: /\n"


class RobotsRedirect(SimpleHost):
    """robots.txt is a 301 to /real-robots.txt (RFC 9309 says follow at least five hops)."""

    REAL = "User-agent: *\nDisallow: /secret/\n"

    def robots(self, req: Request) -> Response:
        return redirect("/real-robots.txt", 301)

    def handle(self, req: Request) -> Response:
        if req.path == "/real-robots.txt":
            return text(self.REAL)
        return super().handle(req)

    def robots_paths(self) -> set[str]:
        return {"/robots.txt", "/real-robots.txt"}

    def effective_robots(self) -> str | None:
        return self.REAL


ROBOTS_RULES = """\
# Exercises RFC 9309. Our product token is recrawlbot.
User-agent: *
Disallow: /

User-agent: recrawlbot
Disallow: /private/
Allow: /private/ok/
Disallow: /*.php$
Disallow: /page/hidden
Allow: /page/
Disallow: /tie
Allow: /tie
Disallow: /a/x
Disallow: /%7Ejoe/
Disallow: /café/
Disallow: /star*/end

User-agent: recrawlbot-images
Disallow: /page/

User-agent: Googlebot
Disallow: /

# A second group for our token: RFC 9309 says merge it with the first.
User-agent: RECRAWLBOT
Disallow: /merged/
"""

#: robotsrules.sim.test paths and whether recrawlbot may fetch them.
ROBOTS_RULES_CASES = {
    "/": True,
    "/private/1.html": False,
    "/private/ok/1.html": True,
    "/index.php": False,
    "/index.php?x=1": True,
    "/page/1.html": True,
    "/page/hidden.html": False,
    "/tie.html": True,
    "/./a/../a/x": False,
    "/a/x": False,
    "/a/y": True,
    "/%7Ejoe/index.html": False,
    "/caf%C3%A9/menu.html": False,
    "/star/x/end": False,
    "/starry/end": False,
    "/stars.html": True,
    "/merged/1.html": False,
    "/Private/1.html": True,
}


def robots_hosts(seed: object) -> list[Host]:
    """The robots*.sim.test hosts."""
    g = _pages_graph
    rules = {"/": list(ROBOTS_RULES_CASES)} | {p: ["/"] for p in ROBOTS_RULES_CASES if p != "/"}
    return [
        SimpleHost("robots404.sim.test", seed, g(), robots_text=None),
        Robots500("robots500.sim.test", seed, g()),
        SimpleHost("robotsdelay.sim.test", seed, g(), "User-agent: *\nCrawl-delay: 2\n"),
        SimpleHost("robotsslowdelay.sim.test", seed, g(), "User-agent: *\nCrawl-delay: 120\n"),
        RobotsRedirect("robotsredirect.sim.test", seed, g(["/secret/1.html"])),
        SimpleHost("robotsrules.sim.test", seed, rules, ROBOTS_RULES),
    ]


# -- redirects -----------------------------------------------------------------------------
CODES = (301, 302, 307, 308)
SSRF_BAIT = {
    "/to-private": "http://10.0.0.1/",
    "/to-metadata": "http://169.254.169.254/latest/meta-data/",
}


class Redirects(Host):
    """Chains ``/chain/{code}/{n}`` (n hops, then 200), ``/mixed/{n}``, a loop, cross-host,
    relative Location, and SSRF bait that only ever appears in Location headers."""

    def location(self, path: str, port: int) -> tuple[int, str] | None:
        """(status, Location) for a redirecting path, None if it is not one."""
        parts = path.strip("/").split("/")
        try:
            if parts[0] == "chain" and len(parts) == 3 and int(parts[1]) in CODES:
                n = int(parts[2])
                return (int(parts[1]), f"/chain/{parts[1]}/{n - 1}") if 0 < n <= 50 else None
            if parts[0] == "mixed" and len(parts) == 2 and 0 < int(parts[1]) <= 50:
                n = int(parts[1])
                return CODES[n % 4], f"/mixed/{n - 1}"
        except ValueError:
            return None
        fixed = {
            "/loop/a": (302, "/loop/b"),
            "/loop/b": (302, "/loop/a"),
            "/cross": (301, f"http://site0.sim.test:{port}/"),
            "/relative": (302, "chain/301/0"),
            "/to-localhost": (302, f"http://127.0.0.1:{port}/"),
        } | {p: (302, u) for p, u in SSRF_BAIT.items()}
        return fixed.get(path)

    def entry_points(self) -> list[str]:
        """Every redirecting path linked from the home page."""
        chains = [f"/chain/{c}/{n}" for c in CODES for n in range(1, 5)]
        return chains + [
            "/chain/302/7",
            "/mixed/4",
            "/loop/a",
            "/cross",
            "/relative",
            "/to-localhost",
            *SSRF_BAIT,
        ]

    def pages(self) -> list[str]:
        return ["/", *self.entry_points(), *(f"/chain/{c}/0" for c in CODES), "/mixed/0"]

    def links(self, path: str) -> list[Link]:
        return [(self.name, p) for p in self.entry_points()] if path == "/" else []

    def handle(self, req: Request) -> Response:
        if req.path == "/":
            return html(simple_page("Redirects", self.entry_points(), self.seed))
        loc = self.location(req.path, req.port)
        if loc is not None:
            return redirect(loc[1], loc[0])
        if req.path.startswith(("/chain/", "/mixed/")) and req.path.endswith("/0"):
            return html(simple_page(f"End of {req.path}", ["/"], self.seed))
        return not_found(req)


# -- errors and content types --------------------------------------------------------------
ERRORS = {"/404": 404, "/410": 410, "/500": 500, "/403": 403}


class Errors(MenuHost):
    """Error statuses and non-HTML or mislabelled content."""

    PATHS = [*ERRORS, "/wrongtype.html", "/image.png", "/plain.txt", "/notes"]

    def handle(self, req: Request) -> Response:
        p = req.path
        if p == "/":
            return html(simple_page("Errors", self.PATHS, self.seed))
        if p in ERRORS:
            return html(f"<html><body><h1>Error {ERRORS[p]}</h1></body></html>", ERRORS[p])
        if p == "/wrongtype.html":
            return Response(200, PDF, "application/pdf")
        if p == "/image.png":
            return Response(200, PNG_1PX, "image/png")
        if p in ("/plain.txt", "/notes"):
            return text("Plain text, not HTML.\nhttp://site0.sim.test/ is not a link here.\n")
        return not_found(req)


# -- throttling ----------------------------------------------------------------------------
class Throttle(Host):
    """429 with ``Retry-After: 2`` on the first request to each page per simulated day, then
    200; ``/busy`` does the same with 503 and Retry-After as an HTTP-date."""

    PATHS = ["/", "/p/1.html", "/p/2.html", "/p/3.html", "/p/4.html", "/busy"]

    def __init__(self, name: str, seed: object) -> None:
        super().__init__(name, seed)
        self._seen: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget which pages were already requested."""
        with self._lock:
            self._seen.clear()

    def pages(self) -> list[str]:
        return list(self.PATHS)

    def links(self, path: str) -> list[Link]:
        return [(self.name, p) for p in self.PATHS if p != path] if path in self.PATHS else []

    def handle(self, req: Request) -> Response:
        if req.path not in self.PATHS:
            return not_found(req)
        with self._lock:
            first = (req.path, req.day) not in self._seen
            self._seen.add((req.path, req.day))
        if first and req.path == "/busy":
            return html("<h1>503 Service Unavailable</h1>", 503, {"Retry-After": now_plus(2)})
        if first:
            return html("<h1>429 Too Many Requests</h1>", 429, {"Retry-After": "2"})
        links = [p for p in self.PATHS if p != req.path]
        return html(simple_page(f"Throttled {req.path}", links, self.seed))


# -- slowness ------------------------------------------------------------------------------
class Slow(MenuHost):
    """``/slow`` after 3 s, ``/trickle`` 1 byte per 0.5 s for 60 s, ``/hang`` never answers,
    ``/dead`` closes without a response."""

    PATHS = ["/slow", "/trickle", "/hang", "/dead"]

    def handle(self, req: Request) -> Response:
        p = req.path
        if p == "/":
            return html(simple_page("Slow", self.PATHS, self.seed))
        if p == "/slow":
            r = html(simple_page("Slow page", ["/"], self.seed))
            r.delay = 3.0
            return r
        if p == "/trickle":
            n = 120

            def drip():
                for i in range(n):
                    yield b"x"
                    if i < n - 1:
                        yield 0.5

            return Response(200, content_type="text/html; charset=utf-8", stream=drip(), length=n)
        if p == "/hang":
            return Response(action="hang")
        if p == "/dead":
            return Response(action="dead")
        return not_found(req)


# -- bombs ---------------------------------------------------------------------------------
class Bomb(MenuHost):
    """Decompression bombs, a 50 MiB body and a close-delimited body."""

    PATHS = ["/gzipbomb", "/brbomb", "/huge", "/nolength"]

    def __init__(self, name: str, seed: object) -> None:
        super().__init__(name, seed)
        # Build the bombs now (once per process), not on their first request: that took 2-3 s
        # of CPU on a loaded machine, so the client's read timeout fired before the first byte
        # and the fetch recorded "timeout" instead of meeting the bomb.
        bombs.gzip_bomb()
        bombs.brotli_bomb()

    def handle(self, req: Request) -> Response:
        p = req.path
        if p == "/":
            return html(simple_page("Bombs", self.PATHS, self.seed))
        if p == "/gzipbomb":
            return Response(200, bombs.gzip_bomb(), headers={"Content-Encoding": "gzip"})
        if p == "/brbomb":
            return Response(200, bombs.brotli_bomb(), headers={"Content-Encoding": "br"})
        if p == "/huge":
            return Response(200, stream=bombs.huge_html(), length=bombs.HUGE_SIZE)
        if p == "/nolength":
            body = simple_page("No length", ["/"], self.seed).encode()
            return Response(200, stream=[body], length=None)
        return not_found(req)


def hosts(seed: object) -> list[Host]:
    """All protocol-level hostile hosts."""
    return [
        *robots_hosts(seed),
        Redirects("redirects.sim.test", seed),
        Errors("errors.sim.test", seed),
        Throttle("throttle.sim.test", seed),
        Slow("slow.sim.test", seed),
        Bomb("bomb.sim.test", seed),
    ]
