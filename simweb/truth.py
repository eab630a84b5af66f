"""Ground truth about the simulated web, answered from the world model, never from the wire.

Tests and benchmarks compare what the crawler concluded with these answers. URLs are accepted
with any port and returned with the server's current port.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from simweb import robots
from simweb.changes import PoissonPage
from simweb.content import CHARSET_PAGES, Trap
from simweb.feeds import FEED_PATH
from simweb.host import Host
from simweb.hostile import Redirects
from simweb.signals import ACCURATE
from simweb.site import NormalSite, World
from simweb.versions import Changing, Dup

DEFAULT_TOKEN = "recrawlbot"


def split(url: str) -> tuple[str, str]:
    """(host, path-with-query) of a URL; the fragment is dropped."""
    parts = urlsplit(url)
    path = parts.path or "/"
    return (parts.hostname or "").lower(), path + (f"?{parts.query}" if parts.query else "")


class Truth:
    """What is really out there: robots rules, change rates, duplicates, charsets, links."""

    def __init__(self, world: World, port: Callable[[], int]) -> None:
        self.world = world
        self._port = port

    def url(self, host: str, path: str) -> str:
        """Absolute URL of ``path`` on ``host`` at the server's port."""
        return f"http://{host}:{self._port()}{path}"

    def _host(self, url: str) -> tuple[Host | None, str]:
        host, path = split(url)
        return self.world.host(host), path

    # -- robots --------------------------------------------------------------------------
    def disallowed(self, url: str, ua_token: str = DEFAULT_TOKEN) -> bool:
        """Whether robots rules forbid ``ua_token`` to fetch ``url`` (path normalised first)."""
        host, path = self._host(url)
        if host is None or self.is_robots_path(url):
            return False
        return host.disallowed(path, ua_token)

    def is_robots_path(self, url: str) -> bool:
        """Whether fetching ``url`` is part of reading robots.txt (incl. its redirect target)."""
        host, path = self._host(url)
        return host is not None and robots.normalize_path(path) in host.robots_paths()

    def crawl_delay(self, host: str, ua_token: str = DEFAULT_TOKEN) -> float | None:
        """The robots Crawl-delay (seconds) that applies to ``ua_token`` on ``host``."""
        h = self.world.host(host)
        return None if h is None else h.crawl_delay(ua_token)

    def crawl_delays(self, ua_token: str = DEFAULT_TOKEN) -> dict[str, float]:
        """Every host's Crawl-delay, for :func:`simweb.audit.politeness_violations`."""
        out = {name: self.crawl_delay(name, ua_token) for name in self.world.hosts}
        return {k: v for k, v in out.items() if v is not None}

    # -- pages and links -----------------------------------------------------------------
    def hosts(self) -> list[str]:
        """All host names."""
        return list(self.world.hosts)

    def pages(self, host: str) -> list[str]:
        """URLs of every page generated on ``host`` (entry points for infinite hosts)."""
        h = self.world.host(host)
        return [] if h is None else [self.url(host, p) for p in h.pages()]

    def links(self, url: str) -> list[str]:
        """Outlinks of the page at ``url`` as generated: absolute, without fragments and
        tracking parameters, dot segments resolved, in document order, de-duplicated."""
        host, path = self._host(url)
        return [] if host is None else [self.url(h, p) for h, p in host.links(path)]

    # -- change over time ----------------------------------------------------------------
    def _clock(self, url: str) -> PoissonPage | None:
        host, path = self._host(url)
        if isinstance(host, NormalSite):
            return host.clock(path)
        if isinstance(host, Changing):
            return host.clocks.get(path)
        return None

    def change_rates(self) -> dict[str, float]:
        """URL -> true change rate of every page of the normal sites: what a crawl's estimates
        are judged against (the demos write it as the crawl home's reference rates)."""
        return {u: self.change_rate(u) for site in self.world.sites for u in self.pages(site.name)}

    def change_rate(self, url: str) -> float:
        """True Poisson change rate λ (changes per day); 0 for static and trivially changing
        pages."""
        clock = self._clock(url)
        return 0.0 if clock is None else clock.rate

    def version(self, url: str, day: int) -> int:
        """Content version of ``url`` on simulated ``day`` (number of changes in [0, day])."""
        clock = self._clock(url)
        return 0 if clock is None else clock.version(day)

    def next_change(self, url: str, after: float) -> float:
        """Simulated time (days) of the first content change of ``url`` strictly after
        ``after``; inf for pages that never change."""
        clock = self._clock(url)
        return math.inf if clock is None else clock.next_change(after)

    def trivial_changes(self) -> set[str]:
        """URLs whose bytes change daily only by a rotating timestamp line."""
        host = self.world.host("changing.sim.test")
        assert isinstance(host, Changing)
        return {self.url(host.name, p) for p in host.trivial}

    # -- change signals (sitemap <lastmod>, feeds) -----------------------------------------
    def _site(self, host: str) -> NormalSite | None:
        h = self.world.host(host)
        return h if isinstance(h, NormalSite) else None

    def signal_kind(self, host: str) -> str | None:
        """How ``host``'s sitemap dates its pages (simweb.signals.KINDS); None for hosts other
        than the normal sites."""
        site = self._site(host)
        return None if site is None else site.signal_kind

    def signal_kinds(self) -> dict[str, str]:
        """Normal host -> its signal kind."""
        return {s.name: s.signal_kind for s in self.world.sites}

    def honest_signal_hosts(self) -> set[str]:
        """Hosts whose sitemap dates are exactly the pages' last changes (kind "accurate")."""
        return {h for h, k in self.signal_kinds().items() if k == ACCURATE}

    def signal_date(self, url: str, day: int) -> datetime | None:
        """The <lastmod> ``url``'s sitemap publishes on ``day``, at full precision (the sitemap
        writes its UTC date: compare ``.date()``; feeds carry the whole time); None for URLs
        the sitemap does not list and for sites of kind "none"."""
        host, path = split(url)
        site = self._site(host)
        return None if site is None else site.signal_date(path, day)

    def has_feed(self, host: str) -> bool:
        """Whether ``host`` publishes a feed."""
        site = self._site(host)
        return site is not None and site.has_feed

    def feed_url(self, host: str) -> str | None:
        """URL of ``host``'s feed (RSS on even, Atom on odd sites), None without one."""
        return self.url(host, FEED_PATH) if self.has_feed(host) else None

    # -- duplicates ----------------------------------------------------------------------
    def _dup(self) -> Dup:
        host = self.world.host("dup.sim.test")
        assert isinstance(host, Dup)
        return host

    def duplicate_groups(self) -> list[set[str]]:
        """Groups of URLs serving byte-identical bodies."""
        d = self._dup()
        return [{self.url(d.name, p) for p in g} for g in d.exact_groups()]

    def near_duplicate_groups(self) -> list[set[str]]:
        """Groups of URLs whose text differs only by a counter/timestamp line or two words."""
        d = self._dup()
        return [{self.url(d.name, p) for p in g} for g in d.near_groups()]

    # -- charsets, redirects, traps ------------------------------------------------------
    def charset_text(self, url: str) -> str | None:
        """The sentence a correct decoder finds in a charset.sim.test page."""
        host, path = split(url)
        entry = CHARSET_PAGES.get(path) if host == "charset.sim.test" else None
        return None if entry is None else entry[0]

    def charset(self, url: str) -> str | None:
        """The real encoding of a charset.sim.test page (Python codec name)."""
        host, path = split(url)
        entry = CHARSET_PAGES.get(path) if host == "charset.sim.test" else None
        return None if entry is None else entry[1]

    def redirect_chain(self, url: str, max_hops: int = 20) -> list[tuple[int, str]]:
        """[(status, Location as absolute URL), ...] following redirects.sim.test without the
        network; stops at a non-redirect, a loop, another host or ``max_hops``."""
        out: list[tuple[int, str]] = []
        host, path = self._host(url)
        seen = {path}
        while isinstance(host, Redirects) and len(out) < max_hops:
            loc = host.location(path, self._port())
            if loc is None:
                break
            status, target = loc
            if target.startswith("http://"):
                out.append((status, target))
                break
            path = target if target.startswith("/") else "/" + target
            out.append((status, self.url(host.name, path)))
            if path in seen:
                break
            seen.add(path)
        return out

    def trap_kind(self, url: str) -> str | None:
        """ "calendar", "session", "deep" or "params" for trap URLs, else None."""
        host, path = self._host(url)
        return host.kind(path) if isinstance(host, Trap) else None
