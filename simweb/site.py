"""The generated world: normal sites with a link graph, plus the registry of every host.

Normal sites ``site{i}.sim.test`` are what a crawl mostly sees: robots.txt files of several kinds,
a sitemap, and HTML pages that link to each other with a skewed in-degree (Zipf-weighted
targets) so PageRank has something to find. Pages change slowly by the Poisson model and always
answer conditional GETs. Every choice is a pure function of (seed, host, page), so two worlds with
the same seed serve identical bytes.
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import random
from datetime import datetime

from simweb import content, feeds, hostile, signals
from simweb.changes import RATE_MIXES, PoissonPage, log_uniform_rate, web_mix_rate
from simweb.host import Host, Link
from simweb.response import PDF, PNG_1PX, Request, Response, cached, not_found, sim_datetime
from simweb.signals import Mix, assign, choose
from simweb.text import esc, page, paragraph, rng_for, stable_hash, title

SITEMAP = "\nSitemap: {base}/sitemap.xml\n"

#: robots.txt kinds, chosen by site index modulo len(ROBOTS_KINDS).
ROBOTS_KINDS = (
    # 0: allow everything
    "User-agent: *\nDisallow:\n",
    # 1: the classic private directory
    "User-agent: *\nDisallow: /private/\n",
    # 2: longest match (Allow beats a shorter Disallow) and * / $ wildcards
    "User-agent: *\nDisallow: /private/\nAllow: /private/public-\n"
    "Disallow: /*?sort=\nDisallow: /*.pdf$\n",
    # 3: groups for other crawlers that must not be applied to us
    "User-agent: Googlebot\nDisallow: /p/\n\nUser-agent: BadBot\nUser-agent: EvilScraper\n"
    "Disallow: /\n\nUser-agent: *\nDisallow: /private/\n",
    # 4: a group naming our token (case differs): it replaces the * group entirely
    "User-agent: *\nDisallow: /private/\nDisallow: /p/\n\n"
    "User-agent: RecrawlBot\nDisallow: /private/\nAllow: /private/public-\n",
)


def site_name(i: int) -> str:
    """Host name of normal site ``i``."""
    return f"site{i}.sim.test"


def page_path(k: int) -> str:
    """Path of page ``k`` on a normal site: some are under /private/."""
    if k == 0:
        return "/"
    if k % 10 == 3:
        return f"/private/{k}.html"
    if k % 10 == 7:
        return f"/private/public-{k}.html"
    return f"/p/{k}.html"


@functools.lru_cache(maxsize=64)
def _zipf_cum(n: int, s: float) -> list[float]:
    return list(itertools.accumulate(1 / (i + 1) ** s for i in range(n)))


def zipf_pick(rng: random.Random, n: int, exclude: int = -1, s: float = 1.2) -> int:
    """Index in [0, n) with weight 1/(i+1)^s: low indices collect most in-links."""
    while True:
        i = rng.choices(range(n), cum_weights=_zipf_cum(n, s))[0]
        if i != exclude or n == 1:
            return i


def relative_ref(base_dir: str, target: str) -> str:
    """A relative reference from directory ``base_dir`` to absolute path ``target``."""
    tpath, sep, query = target.partition("?")
    tdir, name = tpath.rsplit("/", 1)
    rel = posixpath.relpath(tdir or "/", base_dir)
    ref = name if rel == "." else f"{rel}/{name}"
    return (ref or "./") + sep + query


class NormalSite(Host):
    """One ordinary site: robots kind by index, Zipf link graph, slowly changing pages, a
    sitemap whose dates follow its signal kind (simweb.signals) and maybe a feed."""

    def __init__(
        self,
        i: int,
        n_sites: int,
        n_pages: int,
        seed: object,
        rates: str = "loguniform",
        signal_kind: str = signals.ACCURATE,
        has_feed: bool = False,
    ) -> None:
        super().__init__(site_name(i), seed)
        if rates not in RATE_MIXES:
            raise ValueError(f"rates must be one of {RATE_MIXES}, got {rates!r}")
        if signal_kind not in signals.KINDS:
            raise ValueError(f"signal_kind must be one of {signals.KINDS}, got {signal_kind!r}")
        self.rates = rates
        self.signal_kind, self.has_feed = signal_kind, has_feed
        self.atom = i % 2 == 1  # feed format: RSS 2.0 on even sites, Atom 1.0 on odd
        self.i, self.n_sites, self.n_pages = i, n_sites, max(2, n_pages)
        self.kind = i % len(ROBOTS_KINDS)
        rules = ROBOTS_KINDS[self.kind]
        if i == min(1, n_sites - 1):  # exactly one site asks for a 1 s delay
            rules = rules.replace("User-agent: *\n", "User-agent: *\nCrawl-delay: 1\n", 1)
        self.robots_text = rules + SITEMAP
        self.paths = [page_path(k) for k in range(self.n_pages)]
        self.index = {p: k for k, p in enumerate(self.paths)}
        self.base_href = i % 3 == 0  # home page uses <base href=".../p/">
        self.extra = ["/old.html"] if i == 0 else []  # meta-refresh page(s)
        self._links: dict[int, list[Link]] = {}  # filled lazily: worlds can be large
        self._clock = {p: PoissonPage(seed, self.name + p, self._rate(p)) for p in self.pages()}
        self._cache: dict[tuple[str, int, int], bytes] = {}

    def _rate(self, path: str) -> float:
        # "loguniform" (the default, which the fetcher/e2e tests and the demo were written
        # against): slow pages only, 0.005-0.1/day. "web": the measured mix of
        # simweb.changes.WEB_RATE_CLASSES, for freshness benchmarks.
        if self.rates == "web":
            return web_mix_rate(self.seed, self.name + path)
        return log_uniform_rate(self.seed, self.name + path, 0.005, 0.1)

    # -- the link graph ------------------------------------------------------------------
    def _page_links(self, k: int) -> list[Link]:
        if k not in self._links:
            self._links[k] = self._make_links(k)
        return self._links[k]

    def _make_links(self, k: int) -> list[Link]:
        rng = rng_for("links", self.seed, self.name, k)
        n, out = self.n_pages, []
        if k:
            out.append((self.name, "/"))
        if k + 1 < n:
            out.append((self.name, self.paths[k + 1]))  # "next": chains every page
        nxt = next((j for j in range(k + 1, n) if self.paths[j].startswith("/p/")), None)
        if nxt is not None:
            out.append((self.name, self.paths[nxt]))  # skip link keeps /p/ pages reachable
        if k == 0:
            out += [(self.name, self.paths[j]) for j in range(1, min(n, 9))]
            if self.n_sites > 1:
                out.append((site_name((self.i + 1) % self.n_sites), "/"))
            out += [(self.name, p) for p in self.extra]
        for _ in range(rng.randint(3, 8)):
            out.append((self.name, self.paths[zipf_pick(rng, n, exclude=k)]))
        if self.n_sites > 1 and rng.random() < 0.7:
            other = zipf_pick(rng, self.n_sites, exclude=self.i)
            out.append((site_name(other), page_path(zipf_pick(rng, min(n, 12)))))
        if self.kind == 2 and k % 3 == 1:
            out.append((self.name, self.paths[k] + "?sort=asc"))  # disallowed by /*?sort=
        if self.kind == 2 and k == 0:
            out.append((self.name, "/files/report.pdf"))  # disallowed by /*.pdf$
        seen: set[Link] = set()
        return [x for x in out if not (x in seen or seen.add(x))]

    # -- ground truth --------------------------------------------------------------------
    def pages(self) -> list[str]:
        return self.paths + self.extra

    def links(self, path: str) -> list[Link]:
        if path in self.extra:
            return [(self.name, "/p/1.html")]
        k = self.index.get(path.partition("?")[0])
        return [] if k is None else list(self._page_links(k))

    def clock(self, path: str) -> PoissonPage | None:
        """The change process of a page, None for unknown paths."""
        return self._clock.get(path)

    def listed(self) -> list[str]:
        """Paths the sitemap (and feed) list: every generated page outside /private/."""
        return [p for p in self.paths if not p.startswith("/private/")]

    def signal_date(self, path: str, day: int) -> datetime | None:
        """The sitemap's <lastmod> for ``path`` on ``day`` (full precision; the sitemap writes
        its date); None when the path is not listed or the kind publishes no dates."""
        if path.startswith("/private/") or path not in self.index:
            return None
        return signals.lastmod(self.signal_kind, self._clock[path], day)

    def feed_date(self, path: str, day: int) -> datetime:
        """A feed item's date: the sitemap's, or the true last change on sites without sitemap
        dates (a CMS's feed carries post times even when its sitemap has none)."""
        published = self.signal_date(path, day)
        return self._clock[path].last_modified(day) if published is None else published

    # -- serving -------------------------------------------------------------------------
    def handle(self, req: Request) -> Response:
        path = req.path
        if path == "/sitemap.xml":
            return self._sitemap(req)
        if path == feeds.FEED_PATH and self.has_feed:
            return self._feed(req)
        if path == "/img/map.png":
            return Response(200, PNG_1PX, "image/png")
        if path == "/files/report.pdf":
            return Response(200, PDF, "application/pdf")
        clock = self._clock.get(path)
        if clock is None:
            return not_found(req)
        version = clock.version(req.day)
        key = (path, version, req.port)
        body = self._cache.get(key)
        if body is None:
            body = self._cache[key] = self._render(req, path, version).encode()
        return cached(req, body, clock.etag(req.day), clock.last_modified(req.day))

    def _sitemap(self, req: Request) -> Response:
        rows = [(p, self.signal_date(p, req.day)) for p in self.listed()]
        body = feeds.sitemap_xml(req.base(), rows)
        dates = [d for _, d in rows if d is not None]
        newest = max(dates, default=sim_datetime(req.day))
        return _validated(req, body, newest, feeds.SITEMAP_TYPE)

    def _feed(self, req: Request) -> Response:
        rows = feeds.newest([(p, self.feed_date(p, req.day)) for p in self.listed()])
        items = [(p, page_title(self.seed, self.name, p), d) for p, d in rows]
        name = page_title(self.seed, self.name, "/")
        body = feeds.feed_xml(self.atom, req.base(), name, items)
        ctype = feeds.ATOM_TYPE if self.atom else feeds.RSS_TYPE
        newest = max((d for _, d in rows), default=sim_datetime(req.day))
        return _validated(req, body, newest, ctype)

    def _href(self, req: Request, link: Link, base_dir: str, form: int) -> str:
        """Render a link in one of several equivalent spellings a parser must normalise."""
        host, path = link
        absolute = f"{req.base(host)}{path}"
        if host != self.name:
            return (absolute, f"//{host}:{req.port}{path}", absolute + "#top")[form % 3]
        utm = ("&" if "?" in path else "?") + "utm_source=newsletter&utm_medium=email"
        return (
            path,
            relative_ref(base_dir, path),
            absolute,
            path + "#section-2",
            path + utm,
            relative_ref(base_dir, path) + "#comments",
        )[form % 6]

    def _render(self, req: Request, path: str, version: int) -> str:
        # Only feed sites get the autodiscovery line: other sites' bytes stay as they were.
        feed = feeds.feed_link(self.atom) if self.has_feed else ""
        if path in self.extra:
            head = f'<meta http-equiv="refresh" content="0; url={req.base()}/p/1.html">\n{feed}'
            return page(
                "Moved", '<p>This page has moved to <a href="/p/1.html">here</a>.</p>', head
            )
        k = self.index[path]
        rng = rng_for("page", self.seed, self.name, k)
        head = f'<meta name="description" content="{esc(title(rng))}">\n{feed}'
        base_dir = path.rsplit("/", 1)[0] or "/"
        if k == 0 and self.base_href:
            head += f'<base href="{req.base()}/p/">\n'
            base_dir = "/p"
        if k and self.i % 2 == 0:
            head += f'<link rel="canonical" href="{req.base()}{path}">\n'
        heading = page_title(self.seed, self.name, path)
        news = paragraph(rng_for("news", self.seed, self.name, k, version), 40)
        paras = [paragraph(rng, rng.randint(40, 90)) for _ in range(rng.randint(3, 5))]
        links = self._page_links(k)
        anchors = [
            (self._href(req, lk, base_dir, rng.randrange(6)), page_title(self.seed, *lk))
            for lk in links
        ]
        area = ""
        if k % 4 == 1 and len(anchors) > 2:  # one link only as an image-map <area>
            href, alt = anchors.pop()
            area = (
                '<img src="/img/map.png" usemap="#m" alt="map">\n<map name="m">'
                f'<area shape="rect" coords="0,0,10,10" href="{esc(href)}" alt="{esc(alt)}">'
                "</map>\n"
            )
        inline = " ".join(f'See <a href="{esc(h)}">{esc(a)}</a>.' for h, a in anchors[:2])
        related = "\n".join(f'<li><a href="{esc(h)}">{esc(a)}</a></li>' for h, a in anchors[2:])
        top = '<header><nav><a id="top" href="#top">Top</a></nav></header>\n'
        body = (
            ("" if k == 0 and self.base_href else top)
            + f"<main><article>\n<h1>{esc(heading)}</h1>\n"
            f'<p class="news">Update {version}: {news}</p>\n'
            + "\n".join(f"<p>{p}</p>" for p in paras)
            + f"\n<p>{inline}</p>\n</article></main>\n"
            f"<aside><h2>Related</h2>\n<ul>\n{related}\n</ul>\n{area}</aside>\n"
            f'<footer><a href="mailto:webmaster@{self.name}">Contact</a> '
            '<a href="javascript:window.print()">Print</a> '
            '<a href="tel:+15550100">Call</a></footer>'
        )
        return page(heading, body, head)


def _validated(req: Request, body: bytes, last_modified: datetime, ctype: str) -> Response:
    """A generated XML document with validators: ETag from its bytes, so conditional GETs
    answer 304 exactly until its content changes."""
    return cached(req, body, f'"{stable_hash(body)[:16]}"', last_modified, ctype)


def page_title(seed: object, host: str, path: str) -> str:
    """Title of a generated page, also used as anchor text of links to it."""
    return title(rng_for("title", seed, host, path.partition("?")[0]))


class World:
    """Every host of one simulated web, by name.

    ``signals`` is a mix of sitemap signal kinds over the normal sites (simweb.signals);
    ``feeds`` the share of normal sites that also publish a feed.
    """

    def __init__(
        self,
        seed: object,
        n_sites: int,
        pages_per_site: int,
        rates: str = "loguniform",
        signals: Mix = "accurate",
        feeds: float = 0.0,
    ) -> None:
        self.seed = seed
        names = [site_name(i) for i in range(n_sites)]
        kinds = assign(signals, names, seed)
        with_feed = choose(feeds, names, seed)
        self.sites = [
            NormalSite(i, n_sites, pages_per_site, seed, rates, kinds[n], n in with_feed)
            for i, n in enumerate(names)
        ]
        special = hostile.hosts(seed) + content.hosts(seed)
        self.hosts: dict[str, Host] = {h.name: h for h in [*self.sites, *special]}

    def host(self, name: str) -> Host | None:
        """The host serving ``name``, or None."""
        return self.hosts.get(name)
