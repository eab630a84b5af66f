"""Change-signal sources: W3C datetimes, sitemap <lastmod>, feed entry dates, feed discovery."""

from __future__ import annotations

import gzip
import warnings
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import feedparser
import pytest

from recrawl.content.feeds import MAX_FEED_BYTES, feed_entries, is_feed
from recrawl.content.parsing import parse_html
from recrawl.content.sitemaps import (
    Signal,
    is_sitemap,
    is_sitemap_index,
    parse_w3c_datetime,
    sitemap_entries,
    sitemap_locs,
)

DAY = 86400


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- W3C Datetime ---------------------------------------------------------------------------

@pytest.mark.parametrize("value,expected", [
    ("2024", (utc(2024, 1, 1), 366 * DAY)),  # leap year
    ("2023", (utc(2023, 1, 1), 365 * DAY)),
    ("2100", (utc(2100, 1, 1), 365 * DAY)),  # divisible by 100, not by 400: not leap
    ("2000-02", (utc(2000, 2, 1), 29 * DAY)),  # divisible by 400: leap
    ("2023-02", (utc(2023, 2, 1), 28 * DAY)),
    ("2024-04", (utc(2024, 4, 1), 30 * DAY)),
    ("2024-12", (utc(2024, 12, 1), 31 * DAY)),
    ("2024-02-29", (utc(2024, 2, 29), DAY)),
    (" 2024-03-05\n", (utc(2024, 3, 5), DAY)),
    ("2024-03-05T10:20Z", (utc(2024, 3, 5, 10, 20), 60)),
    ("2024-03-05T10:20:30Z", (utc(2024, 3, 5, 10, 20, 30), 1)),
    ("2024-03-05T10:20:30.987654Z", (utc(2024, 3, 5, 10, 20, 30), 1)),  # fraction truncated
    ("2024-03-05T10:20:30,5Z", (utc(2024, 3, 5, 10, 20, 30), 1)),
    ("2024-03-05T10:20:30+02:00", (utc(2024, 3, 5, 8, 20, 30), 1)),
    ("2024-03-05T01:20:30+05:30", (utc(2024, 3, 4, 19, 50, 30), 1)),  # back across midnight
    ("2024-12-31T23:30-01:00", (utc(2025, 1, 1, 0, 30), 60)),  # forward across a year
    ("2024-03-05T10:20:30-0800", (utc(2024, 3, 5, 18, 20, 30), 1)),  # tolerated forms:
    ("2024-03-05T10:20:30+02", (utc(2024, 3, 5, 8, 20, 30), 1)),
    ("2024-03-05T10:20:30", (utc(2024, 3, 5, 10, 20, 30), 1)),  # no TZD: UTC
    ("2024-03-05 10:20:30+00:00", (utc(2024, 3, 5, 10, 20, 30), 1)),  # space for T
    ("2024-03-05t10:20:30z", (utc(2024, 3, 5, 10, 20, 30), 1)),
    ("1990-01-01", (utc(1990, 1, 1), DAY)),
    ("2100-12-31T23:59:59Z", (utc(2100, 12, 31, 23, 59, 59), 1)),
])
def test_w3c_datetime_forms_and_widths(value, expected):
    start, width = parse_w3c_datetime(value)
    assert (start, width) == expected
    assert start.tzinfo is UTC


@pytest.mark.parametrize("value", [
    "", "   ", "yesterday", "2024-13", "2024-00", "2023-02-29", "2024-04-31", "2024-1-5",
    "24-01-05", "2024/01/05", "2024-01-05T", "2024-01-05T10", "2024-01-05T25:00Z",
    "2024-01-05T24:00:00Z", "2024-01-05T10:61Z", "2024-01-05T10:20:61Z",
    "2024-01-05T10:20:30+25:00", "2024-01-05T10:20:30+01:75", "2024-01-05T10:20:30 GMT",
    "Mon, 05 Jan 2024 10:20:30 GMT", "2024-01-05T10:20:30Z trailing", "0000-01-01",
    "２０２４-01-05",  # full-width digits are not ASCII digits
    "1989-12-31", "1970-01-01T00:00:00Z", "2101-01-01", "9999-12-31", "1989",
    "2100-12-31T23:59:59-00:01",  # 2101 in UTC
])
def test_w3c_datetime_rejects_garbage_and_out_of_range(value):
    assert parse_w3c_datetime(value) is None


def test_w3c_datetime_never_raises_on_non_strings():
    assert parse_w3c_datetime(None) is None  # type: ignore[arg-type]
    assert parse_w3c_datetime(b"2024-01-01") is None  # type: ignore[arg-type]


def test_signal_is_a_frozen_record():
    s = Signal("http://a.test/", utc(2024, 1, 1), DAY, "sitemap")
    assert s == Signal("http://a.test/", utc(2024, 1, 1), DAY, "sitemap")
    with pytest.raises(FrozenInstanceError):
        s.kind = "feed"  # type: ignore[misc]


# --- sitemap entries ------------------------------------------------------------------------

SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
<url><loc>http://a.test/p/1.html</loc><lastmod>2026-01-01</lastmod></url>
<url>
  <loc> http://a.test/q?x=1&amp;y=2 </loc>
  <changefreq>daily</changefreq>
</url>
<url><lastmod>2024-05-06T07:08:09+02:00</lastmod><loc>http://a.test/lastmod-first</loc></url>
<url><loc>http://a.test/bad-date</loc><lastmod>last tuesday</lastmod></url>
<url><loc>http://a.test/img</loc>
  <image:image><image:loc>http://cdn.a.test/i.jpg</image:loc></image:image>
  <lastmod> 2024-05 </lastmod></url>
<url><lastmod>2024-01-01</lastmod></url>
<url><loc><![CDATA[http://a.test/cdata?a=1&b=2]]></loc><lastmod><![CDATA[2023-03-04]]></lastmod></url>
</urlset>"""


def test_sitemap_entries_with_and_without_lastmod():
    assert sitemap_entries(SITEMAP) == [
        ("http://a.test/p/1.html", (utc(2026, 1, 1), DAY)),
        ("http://a.test/q?x=1&y=2", None),  # no lastmod; entity unescaped, stripped
        ("http://a.test/lastmod-first", (utc(2024, 5, 6, 5, 8, 9), 1)),
        ("http://a.test/bad-date", None),  # malformed lastmod
        ("http://a.test/img", (utc(2024, 5, 1), 31 * DAY)),  # <image:loc> is not the page
        # the <url> without <loc> is skipped
        ("http://a.test/cdata?a=1&b=2", (utc(2023, 3, 4), DAY)),  # CDATA: taken verbatim
    ]
    # the existing <loc> lister is unchanged (it also lists no <image:loc>)
    assert sitemap_locs(SITEMAP)[:2] == ["http://a.test/p/1.html", "http://a.test/q?x=1&y=2"]
    assert not is_sitemap_index(SITEMAP)


def test_sitemap_entries_tolerate_namespace_prefixes_and_case():
    body = b"""<?xml version="1.0"?>
    <sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sm:url><sm:loc>http://a.test/1</sm:loc><sm:lastmod>2024-02-03</sm:lastmod></sm:url>
      <sm:url><loc>http://a.test/other-ns</loc><sm:loc>http://a.test/2</sm:loc></sm:url>
      <URL><LOC>http://a.test/3</LOC><LastMod>2024-02-04T00:00Z</LastMod></URL>
    </sm:urlset>"""
    assert is_sitemap(body, "text/xml")
    assert sitemap_entries(body) == [
        ("http://a.test/1", (utc(2024, 2, 3), DAY)),
        ("http://a.test/2", None),
        ("http://a.test/3", (utc(2024, 2, 4), 60)),
    ]


def test_sitemap_index_entries_and_gzip():
    idx = b"""<?xml version="1.0" encoding="UTF-8"?>
    <!-- generated -->
    <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sitemap><loc>http://a.test/s1.xml.gz</loc><lastmod>2024-06-01T12:00:00+00:00</lastmod></sitemap>
      <sitemap><loc>http://a.test/s2.xml</loc></sitemap>
    </sitemapindex>"""
    expected = [("http://a.test/s1.xml.gz", (utc(2024, 6, 1, 12), 1)), ("http://a.test/s2.xml", None)]
    assert is_sitemap_index(idx) and is_sitemap_index(gzip.compress(idx))
    assert sitemap_entries(idx) == expected
    assert sitemap_entries(gzip.compress(idx)) == expected
    assert sitemap_entries(gzip.compress(SITEMAP)) == sitemap_entries(SITEMAP)
    assert not is_sitemap_index(b"<html><body>sitemapindex</body></html>")
    assert not is_sitemap_index(b"\x1f\x8bgarbage")


def test_sitemap_entries_limit_and_broken_input():
    many = b"<urlset>" + b"".join(
        b"<url><loc>http://a.test/%d</loc><lastmod>2024-01-%02d</lastmod></url>" % (i, i % 28 + 1)
        for i in range(50)) + b"</urlset>"
    assert len(sitemap_entries(many)) == 50
    ten = sitemap_entries(many, limit=10)
    assert [u for u, _ in ten] == [f"http://a.test/{i}" for i in range(10)]
    assert ten[9][1] == (utc(2024, 1, 10), DAY)
    assert sitemap_entries(b"\x1f\x8bgarbage") == []
    assert sitemap_entries(b"") == []
    assert sitemap_entries(b"<html><body><loc>http://a.test/</loc></body></html>") == []
    # unclosed blocks end at the next one; a loc cut by the end of the file is not taken
    assert sitemap_entries(b"<urlset><url><loc>http://a.test/1</loc><url><loc>http://a.test/2</loc>"
                           b"<url><loc>http://a.test/cu") == [("http://a.test/1", None),
                                                             ("http://a.test/2", None)]
    # a truncated gzip stream yields nothing rather than raising
    assert sitemap_entries(gzip.compress(many)[:40]) == []


# A hang guard, not a time limit: one pass over this 2 MB takes about half a second, while a
# scan that backtracks over unclosed blocks (a lazy `<url>.*?</url>`: 9 s for 8,000 of these
# blocks, and worse than quadratic) would not end for hours.
@pytest.mark.timeout(120)
def test_sitemap_entries_stay_linear_on_hostile_input():
    body = b"<urlset>" + b"<url><loc>" * 200_000 + b"<url" + b" a" * 100_000
    assert sitemap_entries(body) == []


# --- feeds ----------------------------------------------------------------------------------

RSS = b"""<?xml version="1.0" encoding="utf-8"?>
<?xml-stylesheet type="text/xsl" href="/rss.xsl"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
<title>News</title><link>http://a.test/</link>
<item><title>GMT</title><link>http://a.test/n/1</link><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>
<item><title>EST</title><link>/n/2</link><pubDate>Tue, 10 Jun 2003 04:00:00 EST</pubDate></item>
<item><title>offset</title><link>n/3</link><pubDate>Wed, 11 Jun 2003 01:30:00 +0530</pubDate></item>
<item><title>permalink guid</title><guid isPermaLink="true">http://a.test/n/4</guid>
  <pubDate>Thu, 12 Jun 2003 00:00:00 PDT</pubDate></item>
<item><title>no date</title><link>http://a.test/n/5</link></item>
<item><title>no link</title><guid isPermaLink="false">tag:a.test,2003:6</guid></item>
<item><title>bad date</title><link>http://a.test/n/7</link><pubDate>someday</pubDate></item>
<item><title>epoch</title><link>http://a.test/n/8</link><pubDate>Thu, 01 Jan 1970 00:00:00 GMT</pubDate></item>
<item><title>javascript</title><link>javascript:alert(1)</link></item>
</channel></rss>"""


def test_rss2_entries_with_rfc822_dates():
    assert feed_entries(RSS, "http://a.test/feeds/rss.xml") == [
        ("http://a.test/n/1", utc(2003, 6, 10, 4)),
        ("http://a.test/n/2", utc(2003, 6, 10, 9)),  # EST = -0500
        ("http://a.test/feeds/n/3", utc(2003, 6, 10, 20)),  # relative to the feed's URL
        ("http://a.test/n/4", utc(2003, 6, 12, 7)),  # PDT = -0700
        ("http://a.test/n/5", None),
        ("http://a.test/n/7", None),
        ("http://a.test/n/8", None),  # 1970: a placeholder, not a signal
    ]
    assert feed_entries(RSS, "http://a.test/feeds/rss.xml", limit=2) == [
        ("http://a.test/n/1", utc(2003, 6, 10, 4)), ("http://a.test/n/2", utc(2003, 6, 10, 9))]
    assert is_feed(RSS, "text/xml")


ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://b.test/blog/">
  <title>Blog</title><updated>2024-06-01T00:00:00Z</updated>
  <entry><title>both</title>
    <link rel="self" href="entries/1.atom"/><link rel="alternate" type="text/html" href="posts/1"/>
    <published>2024-01-01T00:00:00Z</published><updated>2024-05-02T03:04:05+02:00</updated></entry>
  <entry><title>published only</title><link href="/posts/2"/>
    <published>2024-02-03T04:05:06-05:00</published></entry>
  <entry xml:base="http://c.test/other/"><title>own base</title><link href="3"/>
    <updated>2024-03-01T00:00:00Z</updated></entry>
  <entry><title>only an edit link</title><link rel="edit" href="edit/4"/></entry>
  <entry><title>no link</title><id>urn:x:5</id><updated>2024-03-01T00:00:00Z</updated></entry>
  <entry><title>far future</title><link href="6"/><updated>2999-01-01T00:00:00Z</updated>
    <published>2024-04-01T00:00:00Z</published></entry>
</feed>"""


def test_atom_entries_updated_over_published_and_links_resolved():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feedparser deprecation warnings either
        entries = feed_entries(ATOM, "http://ignored.test/feed")
    assert entries == [
        ("http://b.test/blog/posts/1", utc(2024, 5, 2, 1, 4, 5)),  # alternate, not self
        ("http://b.test/posts/2", utc(2024, 2, 3, 9, 5, 6)),
        ("http://c.test/other/3", utc(2024, 3, 1)),  # the entry's own xml:base
        ("http://b.test/blog/edit/4", None),  # no alternate: the first link
        ("http://b.test/blog/6", utc(2024, 4, 1)),  # updated out of range: published
    ]
    assert is_feed(ATOM, None)


def test_atom_relative_links_without_xml_base_use_base_url():
    body = b"""<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="p/1"/>
      <updated>2024-01-01T00:00:00Z</updated></entry></feed>"""
    assert feed_entries(body, "https://d.test/feeds/all.atom") == [
        ("https://d.test/feeds/p/1", utc(2024, 1, 1))]


RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="http://e.test/"><title>RDF</title><link>http://e.test/</link></channel>
  <item rdf:about="http://e.test/a"><title>A</title><link>http://e.test/a</link>
    <dc:date>2024-07-08T09:10:11+01:00</dc:date></item>
  <item rdf:about="http://e.test/b"><title>B</title><link>http://e.test/b</link></item>
</rdf:RDF>"""


def test_rss1_rdf_entries():
    assert feed_entries(RDF, "http://e.test/index.rdf") == [
        ("http://e.test/a", utc(2024, 7, 8, 8, 10, 11)), ("http://e.test/b", None)]
    assert is_feed(RDF, "application/xml")
    other_rdf = b'<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>'
    assert not is_feed(other_rdf, "application/rdf+xml")


HTML = b"""<!DOCTYPE html><html><head><title>t</title>
<link rel="alternate" type="application/rss+xml" href="/feed"></head>
<body><a href="/x">x</a><item><link>http://a.test/not-a-feed</link></item></body></html>"""


@pytest.mark.parametrize("body,sniffed", [
    (b"", False), (b"\x00\xff\xfe garbage \x1f\x8b", False), (bytes(range(256)) * 50, False),
    (b"just text", False), (gzip.compress(RSS), False),
    (b"<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'b'>]><x/>", False),
    (b"<rss", True), (b"<rss version='2.0'><channel><item>", True),  # cut feeds, nothing in them
])
def test_garbage_gives_no_entries_and_never_raises(body, sniffed):
    assert feed_entries(body, "http://a.test/") == []
    assert is_feed(body, "text/html") is sniffed


def test_html_passed_as_a_feed():
    # feedparser's loose parser reads it without error and finds no entries (nor the <item>)
    assert feed_entries(HTML, "http://a.test/page") == []
    assert not is_feed(HTML, "text/html") and not is_feed(HTML, "application/rss+xml")


def test_feed_bodies_naming_files_or_urls_are_not_opened(tmp_path, monkeypatch):
    # feedparser.parse(bytes or str) opens the file or fetches the URL the value names
    path = tmp_path / "feed.xml"
    path.write_bytes(RSS)
    assert feed_entries(str(path).encode(), "http://a.test/") == []

    def no_network(*args, **kwargs):
        raise AssertionError("feedparser tried to fetch")

    monkeypatch.setattr(feedparser.http, "get", no_network)
    assert feed_entries(b"http://127.0.0.1:9/feed.xml", "http://a.test/") == []


def test_a_truncated_feed_still_gives_its_complete_entries():
    cut = RSS[:RSS.index(b"<item><title>no date")]
    assert [u for u, _ in feed_entries(cut, "http://a.test/f")][:2] == ["http://a.test/n/1", "http://a.test/n/2"]
    big = RSS.replace(b"</channel>", b"<!--" + b"x" * MAX_FEED_BYTES + b"--></channel>")
    assert len(feed_entries(big, "http://a.test/f")) == 7  # cut at MAX_FEED_BYTES, entries kept


@pytest.mark.parametrize("body,ctype,expected", [
    (b'\xef\xbb\xbf<?xml version="1.0"?>\n<!-- c --><rss version="2.0"/>', None, True),
    (b'<?xml version="1.0"?><!DOCTYPE rss PUBLIC "-//Netscape//DTD RSS 0.91//EN" "x.dtd"><rss>',
     None, True),
    (b'<atom:feed xmlns:atom="http://www.w3.org/2005/Atom">', "text/xml", True),
    ('<?xml version="1.0" encoding="utf-16"?><feed xmlns="http://www.w3.org/2005/Atom"/>'
     .encode("utf-16"), None, True),
    (b"<feedback/>", "application/xml", False),
    (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>', "application/xml", False),
    (b"<html><head><title>rss</title></head></html>", "application/atom+xml", False),
    (b"<!--" + b"x" * 5000, "application/rss+xml; charset=utf-8", True),  # no root: the type
    (b"<!--" + b"x" * 5000, "text/xml", False),
    (b"", "application/atom+xml", True),
])
def test_is_feed_sniff(body, ctype, expected):
    assert is_feed(body, ctype) is expected
    assert not is_sitemap(body, ctype) or not expected


@pytest.mark.timeout(120)  # a hang guard only: the sniff takes microseconds
def test_is_feed_sniff_is_cheap_on_hostile_heads():
    """The sniff looks at the first 4 KB only, whatever follows them."""
    reads = []

    class Body(bytes):
        def __getitem__(self, key):
            reads.append(key)
            return super().__getitem__(key)

    for head in (b"<!DOCTYPE" + b"[" * 4000 + b"<?" * 40, b" " * 4096):
        body = Body(head + b"<rss>" * 1_000_000)  # a root beyond the head does not count
        reads.clear()
        assert is_feed(body, None) is False
        assert is_feed(body, "application/rss+xml") is True  # no root in the head: the type
        assert reads and all(isinstance(k, slice) and k.stop <= 4096 for k in reads), reads


# --- feed discovery in HTML -----------------------------------------------------------------

def outlinks(html: str, url: str = "http://example.com/dir/page.html") -> list[tuple[str, str, str]]:
    page = parse_html(html.encode(), "text/html", url, extract_text=False)
    assert page.error is None, page.error
    return [(o.url, o.anchor, o.kind) for o in page.outlinks]


def test_feed_links_are_outlinks_of_kind_feed():
    html = """<html><head>
      <link rel="alternate" type="application/rss+xml" title=" Site  RSS " href="/feed.xml">
      <link rel="Alternate" type="APPLICATION/ATOM+XML; charset=utf-8" href="atom.xml">
      <link rel="home alternate" type="application/rdf+xml" href="//other.example/index.rdf">
      <link rel="alternate" hreflang="de" href="/de/page.html">
      <link rel="alternate" type="text/html" href="/print.html">
      <link rel="alternate" media="only screen and (max-width: 640px)" href="http://m.example.com/">
      <link rel="stylesheet" type="application/rss+xml" href="/not-alternate.xml">
      <link rel="alternate nofollow" type="application/rss+xml" href="/nofollow.xml">
      <link rel="alternate" type="application/rss+xml" href="javascript:void(0)">
      </head><body><a href="/feed.xml">RSS</a><a href="/x">x</a></body></html>"""
    assert outlinks(html) == [
        ("http://example.com/feed.xml", "Site RSS", "feed"),  # first occurrence gives the kind
        ("http://example.com/dir/atom.xml", "", "feed"),
        ("http://other.example/index.rdf", "", "feed"),
        ("http://example.com/x", "x", "a"),
    ]


def test_feed_links_follow_base_href_and_meta_robots_nofollow():
    html = """<head><base href="http://cdn.example/b/">
      <link rel=alternate type=application/atom+xml href=feed.atom></head>"""
    assert outlinks(html) == [("http://cdn.example/b/feed.atom", "", "feed")]
    html = """<head><meta name="robots" content="nofollow">
      <link rel=alternate type=application/atom+xml href=feed.atom></head>"""
    assert outlinks(html) == []


def test_feed_link_pushed_into_body_is_still_found():
    # a stray character before <head> makes the HTML parser open <body> early
    html = 'x<link rel="alternate" type="application/rss+xml" href="/rss"><a href="/a">a</a>'
    assert outlinks(html) == [("http://example.com/rss", "", "feed"), ("http://example.com/a", "a", "a")]
