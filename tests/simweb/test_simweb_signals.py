"""Change signals: sitemap <lastmod> per signal kind, feeds, validators and the truth about them.

Everything is read over real HTTP from running simwebs; the per-kind tests compute the expected
dates from the pages' own change processes (PoissonPage), not with simweb.signals.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from datetime import date, datetime, time
from email.utils import parsedate_to_datetime

import pytest

from simweb import SimWeb
from simweb.response import sim_datetime
from simweb.signals import KINDS, LAG_DAYS, PRESETS, assign, parse_mix
from simweb.site import NormalSite
from simweb.web import control
from tests.simweb.conftest import Client

SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
ATOM = "{http://www.w3.org/2005/Atom}"
DAYS = [0, *range(1, 62, 4)]


@pytest.fixture(scope="module")
def sig_web() -> Iterator[SimWeb]:
    """Two sites of every kind (12 sites, 1/6 each), half of them with a feed (seed 1: a feed
    site of every kind); "web" rates so that pages change within the days looked at."""
    w = SimWeb(
        seed=1,
        n_sites=12,
        pages_per_site=40,
        rates="web",
        signals=[(k, 1 / 6) for k in KINDS],
        feeds=0.5,
    )
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def sig_client(sig_web: SimWeb) -> Client:
    return Client(sig_web.port)


def site_of(web: SimWeb, kind: str) -> NormalSite:
    return next(s for s in web.world.sites if s.signal_kind == kind)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def lastmods(client: Client, host: str) -> dict[str, str | None]:
    _, _, body = client.get(host, "/sitemap.xml")
    return {
        path_of(u.findtext(f"{SM}loc") or ""): u.findtext(f"{SM}lastmod")
        for u in ET.fromstring(body).iter(f"{SM}url")
    }


def on_days(web: SimWeb, client: Client, host: str) -> dict[int, dict[str, str | None]]:
    """The sitemap's lastmods on each of DAYS."""
    out = {}
    try:
        for d in DAYS:
            web.set_day(d)
            out[d] = lastmods(client, host)
    finally:
        web.set_day(0)
    return out


def iso(dt: datetime) -> str:
    return dt.date().isoformat()


# -- sitemap dates per kind --------------------------------------------------------------------
def test_every_kind_is_served(sig_web: SimWeb) -> None:
    assert Counter(sig_web.truth.signal_kinds().values()) == dict.fromkeys(KINDS, 2)


def test_accurate_moves_exactly_when_the_page_changes(sig_web: SimWeb, sig_client: Client) -> None:
    site = site_of(sig_web, "accurate")
    seen = on_days(sig_web, sig_client, site.name)
    moved = 0
    for p in site.listed():
        clock = site.clock(p)
        assert clock is not None
        # From day 1 on: a change during day 0 keeps the creation date (day precision).
        for a, b in zip(DAYS[1:], DAYS[2:], strict=False):
            assert seen[b][p] == iso(clock.last_modified(b))
            changed = clock.version(b) != clock.version(a)
            assert (seen[a][p] != seen[b][p]) == changed, (p, a, b)
            moved += changed
    assert moved > 5  # the test saw real changes


def test_none_today_frozen_future(sig_web: SimWeb, sig_client: Client) -> None:
    for kind in ("none", "today", "frozen", "future"):
        site = site_of(sig_web, kind)
        seen = on_days(sig_web, sig_client, site.name)
        for d in DAYS:
            assert set(seen[d]) == set(site.listed())
            for p in site.listed():
                clock = site.clock(p)
                assert clock is not None
                got = seen[d][p]
                if kind == "none":
                    assert got is None
                elif kind == "today":
                    assert got == iso(sim_datetime(d))
                elif kind == "frozen":
                    assert got == iso(clock.last_modified(0)) == seen[0][p]
                else:
                    assert got is not None and date.fromisoformat(got) > sim_datetime(d).date()
        if kind == "none":
            assert b"<lastmod>" not in sig_client.get(site.name, "/sitemap.xml")[2]


def test_lag_is_accurate_lag_days_late(sig_web: SimWeb, sig_client: Client) -> None:
    site = site_of(sig_web, "lag")
    seen = on_days(sig_web, sig_client, site.name)
    late = 0
    for d in DAYS:
        for p in site.listed():
            clock = site.clock(p)
            assert clock is not None
            assert seen[d][p] == iso(clock.last_modified(max(d - LAG_DAYS, 0)))
            late += clock.version(d) != clock.version(d - LAG_DAYS)
    assert late > 0  # some dates really were behind


def test_truth_signal_date_is_what_the_sitemap_publishes(
    sig_web: SimWeb, sig_client: Client
) -> None:
    t = sig_web.truth
    for host, kind in t.signal_kinds().items():
        for d in (0, 9, 30):
            sig_web.set_day(d)
            try:
                seen = lastmods(sig_client, host)
            finally:
                sig_web.set_day(0)
            for path, text in seen.items():
                when = t.signal_date(t.url(host, path), d)
                assert (None if when is None else iso(when)) == text, (host, kind, path, d)
        assert t.signal_date(t.url(host, "/private/3.html"), 5) is None
        assert t.signal_kind(host) == kind
    assert t.honest_signal_hosts() == {h for h, k in t.signal_kinds().items() if k == "accurate"}
    assert t.signal_kind("dup.sim.test") is None and not t.has_feed("dup.sim.test")
    assert t.signal_date(t.url("changing.sim.test", "/c/0.html"), 3) is None


# -- the default web ---------------------------------------------------------------------------
def old_sitemap(web: SimWeb, host: str, day: int) -> bytes:
    """The sitemap as simweb rendered it before signal kinds: every non-private page with the
    date of its last change."""
    site = web.world.host(host)
    assert isinstance(site, NormalSite)
    rows = []
    for p in site.paths:
        if p.startswith("/private/"):
            continue
        lastmod = site._clock[p].last_modified(day).date().isoformat()
        rows.append(f"<url><loc>{web.base(host)}{p}</loc><lastmod>{lastmod}</lastmod></url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "\n".join(rows)
        + "\n</urlset>\n"
    ).encode()


def test_default_web_sitemaps_are_unchanged(web: SimWeb, client: Client) -> None:
    assert set(web.truth.signal_kinds().values()) == {"accurate"}
    assert not any(web.truth.has_feed(h) for h in web.hosts())
    try:
        for day in (0, 25, 90):
            web.set_day(day)
            for site in web.world.sites:
                status, headers, body = client.get(site.name, "/sitemap.xml")
                assert status == 200 and body == old_sitemap(web, site.name, day)
                assert headers["content-type"] == "application/xml; charset=utf-8"
                assert client.get(site.name, "/feed.xml")[0] == 404
    finally:
        web.set_day(0)


def _unported(web: SimWeb, client: Client, host: str, path: str) -> bytes:
    return client.get(host, path)[2].replace(f":{web.port}".encode(), b":PORT")


def test_feed_link_only_on_feed_sites_and_nothing_else_changes(web: SimWeb, client: Client) -> None:
    """Same seed, sizes and rates, feeds on or off: pages differ by the <link> line only."""
    twin = SimWeb(seed=42, n_sites=6, pages_per_site=20, feeds=0.5)  # the `web` fixture's world
    twin.start()
    try:
        twin_client = Client(twin.port)
        feed_sites = {s.name for s in twin.world.sites if s.has_feed}
        assert len(feed_sites) == 3
        for site in twin.world.sites:
            for path in [*site.pages()][:8] + site.extra:
                old = _unported(web, client, site.name, path)
                new = _unported(twin, twin_client, site.name, path)
                if site.name not in feed_sites:
                    assert new == old
                    continue
                ctype = "application/atom+xml" if site.i % 2 else "application/rss+xml"
                line = (
                    f'<link rel="alternate" type="{ctype}" title="Feed" href="/feed.xml">\n'
                ).encode()
                head = new.split(b"</head>")[0]
                assert new.count(line) == 1 and line in head
                assert new.replace(line, b"") == old
    finally:
        twin.stop()


# -- validators --------------------------------------------------------------------------------
def _next_change_day(site: NormalSite, after: int) -> int:
    """The first whole day after ``after`` on which some listed page has changed."""
    t = min(c.next_change(after) for p in site.listed() if (c := site.clock(p)) is not None)
    return int(t) + 1


@pytest.mark.parametrize("path", ["/sitemap.xml", "/feed.xml"])
def test_conditional_get_until_a_page_changes(
    sig_web: SimWeb, sig_client: Client, path: str
) -> None:
    site = next(s for s in sig_web.world.sites if s.signal_kind == "accurate" and s.has_feed)
    h0: dict[str, str] = {}
    try:
        sig_web.set_day(2)
        status, h0, body = sig_client.get(site.name, path)
        assert status == 200 and h0["etag"] and h0["last-modified"] and body
        for cond in ({"If-None-Match": h0["etag"]}, {"If-Modified-Since": h0["last-modified"]}):
            s304, h304, b304 = sig_client.get(site.name, path, cond)
            assert s304 == 304 and b304 == b"" and h304["etag"] == h0["etag"]
        assert sig_client.get(site.name, path, {"If-None-Match": '"x"'})[0] == 200
        sig_web.set_day(_next_change_day(site, 2))
        status, h1, _ = sig_client.get(site.name, path, {"If-None-Match": h0["etag"]})
        assert status == 200 and h1["etag"] != h0["etag"]
        assert sig_client.get(site.name, path, {"If-Modified-Since": h0["last-modified"]})[0] == 200
    finally:
        sig_web.set_day(0)
    # Last-Modified is the newest date published.
    newest = max(d for p in site.listed() if (d := site.signal_date(p, 2)) is not None)
    assert parsedate_to_datetime(h0["last-modified"]) == newest


def test_sitemap_without_dates_still_has_validators(sig_web: SimWeb, sig_client: Client) -> None:
    site = site_of(sig_web, "none")
    status, h, _ = sig_client.get(site.name, "/sitemap.xml")
    assert status == 200 and parsedate_to_datetime(h["last-modified"]) == sim_datetime(0)
    assert sig_client.get(site.name, "/sitemap.xml", {"If-None-Match": h["etag"]})[0] == 304


# -- feeds -------------------------------------------------------------------------------------
def read_feed(body: bytes, atom: bool) -> list[tuple[str, datetime]]:
    """(path, date) of each item, in document order."""
    root = ET.fromstring(body)
    if atom:
        assert root.tag == f"{ATOM}feed" and root.findtext(f"{ATOM}updated")
        out = []
        for e in root.iter(f"{ATOM}entry"):
            link = e.find(f"{ATOM}link")
            assert link is not None and e.findtext(f"{ATOM}title")
            when = datetime.fromisoformat(e.findtext(f"{ATOM}updated") or "")
            out.append((path_of(link.get("href") or ""), when))
        return out
    assert root.tag == "rss" and root.get("version") == "2.0"
    return [
        (path_of(i.findtext("link") or ""), parsedate_to_datetime(i.findtext("pubDate") or ""))
        for i in root.iter("item")
    ]


def test_feeds_list_the_newest_pages_with_the_kinds_dates(
    sig_web: SimWeb, sig_client: Client
) -> None:
    t = sig_web.truth
    feed_sites = [s for s in sig_web.world.sites if s.has_feed]
    assert len(feed_sites) == 6 and {s.signal_kind for s in feed_sites} == set(KINDS)
    assert {s.atom for s in feed_sites} == {False, True}
    for day in (0, 21, 50):
        sig_web.set_day(day)
        try:
            for site in feed_sites:
                url = t.feed_url(site.name)
                assert url is not None and not t.disallowed(url)
                status, h, body = sig_client.url(url)
                ctype = "application/atom+xml" if site.atom else "application/rss+xml"
                assert status == 200 and h["content-type"] == ctype and h["etag"]
                items = read_feed(body, site.atom)
                assert 0 < len(items) <= 20
                dates = [d for _, d in items]
                assert dates == sorted(dates, reverse=True)
                for path, when in items:
                    expected = t.signal_date(t.url(site.name, path), day)
                    if site.signal_kind == "none":  # the true last change, to the second
                        clock = site.clock(path)
                        assert expected is None and clock is not None
                        expected = clock.last_modified(day)
                    assert when == expected, (site.name, site.signal_kind, path)
                listed = {p: site.feed_date(p, day) for p in site.listed()}
                left_out = [d for p, d in listed.items() if p not in dict(items)]
                assert not left_out or max(left_out) <= min(dates)  # the newest 20
        finally:
            sig_web.set_day(0)
    no_feed = next(s for s in sig_web.world.sites if not s.has_feed)
    assert t.feed_url(no_feed.name) is None
    assert sig_client.get(no_feed.name, "/feed.xml")[0] == 404
    assert b"application/rss+xml" not in sig_client.get(no_feed.name, "/p/1.html")[2]


def test_feed_of_a_site_without_sitemap_dates_carries_true_times() -> None:
    with SimWeb(seed=3, n_sites=2, pages_per_site=30, rates="web", signals="none", feeds=1.0) as w:
        c = Client(w.port)
        w.set_day(30)
        for site in w.world.sites:
            items = read_feed(c.get(site.name, "/feed.xml")[2], site.atom)
            assert len(items) == 20
            for path, when in items:
                clock = site.clock(path)
                assert clock is not None and when == clock.last_modified(30)
            assert any(when.time() != time(0) for _, when in items)  # change times, not midnights


def test_feed_path_allowed_by_every_robots_kind(sig_web: SimWeb) -> None:
    t = sig_web.truth
    for site in sig_web.world.sites:
        url = t.url(site.name, "/feed.xml")
        assert not t.disallowed(url) and not t.disallowed(t.url(site.name, "/sitemap.xml"))


# -- mixes -------------------------------------------------------------------------------------
def test_mixed_apportions_exactly() -> None:
    for n, expected in ((5, (2, 1, 1, 1)), (10, (4, 2, 2, 2))):
        names = [f"site{i}.sim.test" for i in range(n)]
        counts = Counter(assign("mixed", names, seed=42).values())
        assert tuple(counts[k] for k in ("accurate", "none", "today", "frozen")) == expected
        web = SimWeb(seed=9, n_sites=n, pages_per_site=5, signals="mixed", feeds=0.4)
        counts = Counter(web.truth.signal_kinds().values())
        assert tuple(counts[k] for k in ("accurate", "none", "today", "frozen")) == expected
        assert sum(web.truth.has_feed(h) for h in web.hosts()) == round(0.4 * n)


def test_assignment_is_stable_and_seeded() -> None:
    names = [f"site{i}.sim.test" for i in range(20)]
    a = assign("lying", names, seed=1)
    assert a == assign("lying", list(reversed(names)), seed=1)
    assert any(assign("lying", names, seed=s) != a for s in range(2, 6))
    assert Counter(a.values()) == {"today": 7, "frozen": 7, "future": 6}
    assert set(assign("lag", names, seed=1).values()) == {"lag"}
    assert assign([("none", 0.5), ("today", 0.5)], names, 1) == assign(
        {"none": 0.5, "today": 0.5}, names, 1
    )
    assert set(PRESETS) >= {"accurate", "none", "mixed", "lying", "lag", *KINDS}


@pytest.mark.parametrize(
    "mix",
    [
        "bogus",
        [("accurate", 0.5)],
        [("weird", 1.0)],
        [("none", 1.5), ("today", -0.5)],
        "a=1",
        [("accurate",)],
        [("accurate", "all")],
    ],
)
def test_bad_mix_is_a_value_error(mix: object) -> None:
    with pytest.raises(ValueError, match="mixed"):
        assign(mix, ["site0.sim.test"], 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SimWeb(n_sites=2, signals=mix)  # type: ignore[arg-type]


def test_parse_mix_and_bad_feed_share() -> None:
    assert parse_mix("mixed") == "mixed"
    assert parse_mix("accurate=0.5, none=0.5") == [("accurate", 0.5), ("none", 0.5)]
    with pytest.raises(ValueError, match="lying"):
        parse_mix("accurate=0.5")
    with pytest.raises(ValueError):
        SimWeb(n_sites=2, feeds=1.5)


def test_control_host_reports_signals(sig_web: SimWeb) -> None:
    got = json.loads(control(sig_web.port, "/__sim/signals"))
    t = sig_web.truth
    assert got == {h: {"kind": k, "feed": t.feed_url(h)} for h, k in t.signal_kinds().items()}
