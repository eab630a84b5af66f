"""The generated world: determinism, link graph vs served HTML, robots truth, duplicates,
charsets and change over time, all checked through real HTTP against the real server."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import pytest

from simweb import SimWeb
from simweb.hostile import ROBOTS_RULES_CASES
from simweb.response import EPOCH, parse_http_date
from tests.simweb.conftest import Client


class Links(HTMLParser):
    """Collect <base href> and <a>/<area> hrefs."""

    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and a.get("href"):
            self.base = a["href"]
        elif tag in ("a", "area") and a.get("href"):
            self.hrefs.append(a["href"] or "")


def outlinks(page_url: str, body: bytes) -> set[str]:
    """What a careful link extractor finds: resolved, no fragments, no utm_ parameters."""
    p = Links()
    p.feed(body.decode())
    base = urljoin(page_url, p.base) if p.base else page_url
    out = set()
    for href in p.hrefs:
        if href.startswith(("mailto:", "javascript:", "tel:", "#")):
            continue
        parts = urlsplit(urljoin(base, href))
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not k.startswith("utm_")])
        out.add(urlunsplit((parts.scheme, parts.netloc, parts.path, query, "")))
    return out


def test_same_seed_same_bytes_other_seed_differs(web: SimWeb, client: Client) -> None:
    other = SimWeb(seed=42, n_sites=6, pages_per_site=20)
    different = SimWeb(seed=7, n_sites=6, pages_per_site=20)
    with other, different:
        c_other, c_diff = Client(other.port), Client(different.port)
        for host, path in [
            ("site0.sim.test", "/"),
            ("site3.sim.test", "/p/5.html"),
            ("dup.sim.test", "/near/1/2.html"),
            ("changing.sim.test", "/c/3.html"),
            ("site2.sim.test", "/robots.txt"),
        ]:
            mine = client.get(host, path)[2].replace(f":{web.port}".encode(), b":PORT")
            again = c_other.get(host, path)[2].replace(f":{other.port}".encode(), b":PORT")
            assert mine == again, (host, path)
        a = client.get("site0.sim.test", "/")[2].replace(f":{web.port}".encode(), b"")
        b = c_diff.get("site0.sim.test", "/")[2].replace(f":{different.port}".encode(), b"")
        assert a != b
        assert other.truth.links(other.base("site1.sim.test") + "/p/4.html") == [
            u.replace(str(web.port), str(other.port))
            for u in web.truth.links(web.base("site1.sim.test") + "/p/4.html")
        ]


def test_served_links_match_truth_on_every_normal_page(web: SimWeb, client: Client) -> None:
    for i in range(6):
        host = f"site{i}.sim.test"
        pages = web.truth.pages(host)
        assert len(pages) >= 20
        for url in pages:
            status, headers, body = client.url(url)
            assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
            assert outlinks(url, body) == set(web.truth.links(url)), url


def test_pages_are_realistic_html(web: SimWeb, client: Client) -> None:
    _, _, home = client.get("site0.sim.test", "/")
    _, _, page = client.get("site2.sim.test", "/p/4.html")
    text = re.sub(r"<[^>]+>", " ", page.decode())
    assert 150 <= len(re.findall(r"[a-z]+", text)) <= 600
    assert b"<title>" in page and b'<link rel="canonical"' in page
    assert b"<base href=" in home and b"mailto:" in home and b"javascript:" in home
    assert b"utm_source=" in home and b"#" in home
    _, _, old = client.get("site0.sim.test", "/old.html")
    assert b'http-equiv="refresh"' in old
    areas = [client.url(u)[2] for u in web.truth.pages("site1.sim.test")]
    assert any(b"<area " in b for b in areas)
    status, headers, sitemap = client.get("site0.sim.test", "/sitemap.xml")
    assert status == 200 and headers["content-type"].startswith("application/xml")
    assert sitemap.count(b"<loc>") == sum(
        "/private/" not in u for u in web.truth.pages("site0.sim.test") if "old" not in u
    )


def test_in_degree_is_skewed(web: SimWeb) -> None:
    indeg: Counter[str] = Counter()
    for i in range(6):
        for url in web.truth.pages(f"site{i}.sim.test"):
            indeg.update(web.truth.links(url))
    counts = sorted(indeg.values())
    assert counts[-1] >= 4 * statistics.median(counts)


@pytest.mark.parametrize("path,allowed", ROBOTS_RULES_CASES.items())
def test_robotsrules_truth_table(web: SimWeb, path: str, allowed: bool) -> None:
    url = web.base("robotsrules.sim.test") + path
    assert web.truth.disallowed(url) is not allowed
    if path != "/":
        assert web.truth.disallowed(url, "otherbot")  # the * group disallows everything


def test_robots_truth_on_normal_and_robots_hosts(web: SimWeb) -> None:
    t, b = web.truth, web.base
    assert not t.disallowed(b("site0.sim.test") + "/private/3.html")
    assert t.disallowed(b("site1.sim.test") + "/private/3.html")
    assert t.disallowed(b("site2.sim.test") + "/private/3.html")
    assert not t.disallowed(b("site2.sim.test") + "/private/public-7.html")
    assert t.disallowed(b("site2.sim.test") + "/p/4.html?sort=asc")
    assert t.disallowed(b("site2.sim.test") + "/files/report.pdf")
    assert not t.disallowed(b("site2.sim.test") + "/files/report.pdf?page=2")
    assert not t.disallowed(b("site3.sim.test") + "/p/1.html")  # only Googlebot is kept out
    assert t.disallowed(b("site3.sim.test") + "/p/1.html", "googlebot")
    assert not t.disallowed(b("site4.sim.test") + "/p/1.html")  # our own group wins over *
    assert t.disallowed(b("site4.sim.test") + "/p/1.html", "otherbot")
    assert t.disallowed(b("robots500.sim.test") + "/")
    assert not t.disallowed(b("robots500.sim.test") + "/robots.txt")
    assert not t.disallowed(b("robots404.sim.test") + "/page/1.html")
    assert t.disallowed(b("robotsredirect.sim.test") + "/secret/1.html")
    assert t.is_robots_path(b("robotsredirect.sim.test") + "/real-robots.txt")
    assert t.crawl_delay("site1.sim.test") == 1.0
    assert t.crawl_delay("site0.sim.test") is None
    assert t.crawl_delay("robotsdelay.sim.test") == 2.0
    assert t.crawl_delay("robotsslowdelay.sim.test") == 120.0
    assert t.crawl_delays()["site1.sim.test"] == 1.0


def test_truth_agrees_with_protego_on_plain_paths(web: SimWeb, client: Client) -> None:
    """Independent matchers: they must agree wherever Protego is RFC-conformant (it does not
    remove dot segments, so those paths are left out)."""
    protego = pytest.importorskip("protego")
    hosts = [f"site{i}.sim.test" for i in range(6)] + ["robotsrules.sim.test"]
    for host in hosts:
        rules = protego.Protego.parse(client.get(host, "/robots.txt")[2].decode())
        urls = web.truth.pages(host) + [
            u for p in web.truth.pages(host) for u in web.truth.links(p)
        ]
        for url in urls:
            if "/." in url or urlsplit(url).hostname != host:
                continue
            for token in ("recrawlbot", "otherbot", "googlebot"):
                assert web.truth.disallowed(url, token) is not rules.can_fetch(url, token), (
                    url,
                    token,
                )


def test_duplicate_groups(web: SimWeb, client: Client) -> None:
    simhash = pytest.importorskip("simhash")
    exact = web.truth.duplicate_groups()
    near = web.truth.near_duplicate_groups()
    assert len(exact) >= 3 and len(near) >= 3
    firsts = []
    for group in exact:
        bodies = {client.url(u)[2] for u in group}
        assert len(bodies) == 1 and len(group) >= 3
        firsts.append(bodies.pop())
    assert len(set(firsts)) == len(firsts)
    for group in near:
        texts = [re.sub(r"<[^>]+>", " ", client.url(u)[2].decode()) for u in sorted(group)]
        assert len(set(texts)) == len(texts)
        hashes = [simhash.Simhash(t) for t in texts]
        assert max(hashes[0].distance(h) for h in hashes) <= 3
    distinct = [
        re.sub(r"<[^>]+>", " ", client.get("dup.sim.test", f"/distinct/{k}.html")[2].decode())
        for k in range(3)
    ]
    d = [simhash.Simhash(t) for t in distinct]
    assert min(d[0].distance(d[1]), d[0].distance(d[2]), d[1].distance(d[2])) > 3


def test_charset_pages_decode_to_known_text(web: SimWeb, client: Client) -> None:
    urls = web.truth.links(web.base("charset.sim.test") + "/")
    assert len(urls) >= 6
    for url in urls:
        status, headers, body = client.url(url)
        sentence, codec = web.truth.charset_text(url), web.truth.charset(url)
        assert status == 200 and sentence and codec
        assert sentence in body.decode(codec)
        if codec in ("gbk", "shift_jis"):
            with pytest.raises(UnicodeDecodeError):
                body.decode("utf-8")
    _, headers, bom = client.get("charset.sim.test", "/bom.html")
    assert bom.startswith(b"\xef\xbb\xbf") and "iso-8859-1" in headers["content-type"].lower()
    _, headers, meta = client.get("charset.sim.test", "/sjis-meta.html")
    assert headers["content-type"] == "text/html" and b"charset=Shift_JIS" in meta


def test_change_rates_and_versions(web: SimWeb) -> None:
    t = web.truth
    urls = [u for u in t.pages("changing.sim.test") if "/c/" in u]
    rates = [t.change_rate(u) for u in urls]
    assert min(rates) >= 0.01 and max(rates) <= 2.0 and max(rates) / min(rates) > 20
    expected = sum(rates) * 200
    observed = sum(t.version(u, 200) for u in urls)
    assert abs(observed - expected) < 5 * expected**0.5
    for u in urls[:5]:
        versions = [t.version(u, d) for d in range(0, 60, 3)]
        assert versions == sorted(versions) and versions[0] == 0
    assert all(t.change_rate(u) == 0 for u in t.trivial_changes())
    assert 0 < t.change_rate(web.base("site0.sim.test") + "/p/1.html") < 0.2


def test_set_day_changes_content_and_validators(web: SimWeb, client: Client) -> None:
    t = web.truth
    url = max((u for u in t.pages("changing.sim.test") if "/c/" in u), key=t.change_rate)
    path = urlsplit(url).path
    day = next(d for d in range(1, 50) if t.version(url, d) > t.version(url, 0))
    try:
        _, h0, b0 = client.get("changing.sim.test", path)
        web.set_day(day)
        _, h1, b1 = client.get("changing.sim.test", path)
    finally:
        web.set_day(0)
    assert b0 != b1 and h0["etag"] != h1["etag"]
    lm = parse_http_date(h1["last-modified"])
    assert lm is not None and 0 < (lm - EPOCH).total_seconds() <= day * 86400


def test_conditional_get_304(web: SimWeb, client: Client) -> None:
    for host, path in [
        ("site0.sim.test", "/p/1.html"),
        ("changing.sim.test", "/c/0.html"),
        ("dup.sim.test", "/exact/1.html"),
    ]:
        status, h, body = client.get(host, path)
        assert status == 200 and h["etag"] and h["last-modified"]
        s304, h304, b304 = client.get(host, path, {"If-None-Match": h["etag"]})
        assert s304 == 304 and b304 == b"" and h304["etag"] == h["etag"]
        assert client.get(host, path, {"If-None-Match": '"other"'})[0] == 200
        assert client.get(host, path, {"If-Modified-Since": h["last-modified"]})[0] == 304
        assert (
            client.get(host, path, {"If-Modified-Since": "Tue, 01 Jan 2019 00:00:00 GMT"})[0] == 200
        )
        # If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2)
        assert (
            client.get(
                host, path, {"If-None-Match": '"x"', "If-Modified-Since": h["last-modified"]}
            )[0]
            == 200
        )


def test_trivial_changes_only_touch_a_timestamp(web: SimWeb, client: Client) -> None:
    url = sorted(web.truth.trivial_changes())[0]
    path = urlsplit(url).path
    try:
        _, h0, b0 = client.get("changing.sim.test", path)
        web.set_day(3)
        _, h3, b3 = client.get("changing.sim.test", path)
    finally:
        web.set_day(0)
    assert b0 != b3 and h0["etag"] != h3["etag"]
    strip = re.compile(rb"Generated on [0-9-]+\.")
    assert strip.sub(b"", b0) == strip.sub(b"", b3)


def test_web_rate_mix_spans_orders_of_magnitude() -> None:
    """rates="web": most pages change rarely, a minority daily or faster (Cho & Garcia-Molina
    2000's mix), rates over about three decades; next_change agrees with version()."""
    web = SimWeb(seed=5, n_sites=10, pages_per_site=100, rates="web")
    t = web.world
    clocks = [h.clock(p) for h in t.sites for p in h.pages()]
    rates = sorted(c.rate for c in clocks)
    n = len(rates)
    daily = sum(r >= 1.0 for r in rates) / n
    rare = sum(r <= 1 / 30 for r in rates) / n  # a month or slower
    assert 0.10 < daily < 0.30 and rare > 0.40
    assert rates[-1] / rates[0] > 1000
    c = max(clocks, key=lambda c: c.rate)
    e = c.next_change(3.0)
    assert 3.0 < e < 3.0 + 10 and c.version(e) == c.version(3.0) + 1
    assert SimWeb(seed=5, n_sites=1, pages_per_site=5).world.sites[0].clock("/").rate <= 0.1
