"""RSS 2.0, RSS 1.0 (RDF) and Atom feeds as change signals: each entry's link and date.

An entry's updated (else published) date is a lower bound of when its page last changed.
feedparser does the parsing: it copes with broken feeds (a loose parser after the XML one),
RFC 822 dates with named zones, xml:base and RDF's dc:date. It is always handed a BytesIO:
given bytes or a str it opens a local file or fetches a URL when the value names one.
"""

from __future__ import annotations

import calendar
import io
import re
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import feedparser

from recrawl.content.sitemaps import MAX_YEAR, MIN_YEAR

# feedparser takes ~0.7 s per MB of well-formed RSS, twice that when it falls back to its loose
# parser; real feeds are well under 1 MB. A longer body is cut (the loose parser still reads it).
MAX_FEED_BYTES = 2 * 1024 * 1024
FEED_CONTENT_TYPES = ("application/rss+xml", "application/atom+xml", "application/rdf+xml")
# The first element after the prolog (XML declaration, PIs, comments, doctype); possessive, so a
# 4 KB head that does not match costs one pass.
_ROOT = re.compile(
    rb"(?:\s|<\?[^>]*>|<!--.*?-->|<!DOCTYPE(?:[^>\[]|\[[^\]]*\])*>)*+<(?:[\w.-]+:)?([\w.-]+)",
    re.IGNORECASE | re.DOTALL,
)
# RSS 1.0 and 0.9 are rdf:RDF documents in these namespaces; other RDF/XML is not a feed
_RDF_FEED_NS = (b"purl.org/rss/1.0", b"my.netscape.com/rdf/simple/0.9")


def is_feed(body: bytes, content_type: str | None) -> bool:
    """Cheap sniff: the root element (in the first 4 KB) is rss, feed or an RSS 1.0 rdf:RDF;
    when no root element shows there, a feed content type decides."""
    head = bytes(body[:4096])
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 feeds exist; the sniff wants bytes
        head = head.decode("utf-16", "replace").encode("utf-8")
    m = _ROOT.match(head.removeprefix(b"\xef\xbb\xbf"))
    if m is None:
        ctype = (content_type or "").split(";")[0].strip().lower()
        return ctype in FEED_CONTENT_TYPES
    root = m.group(1).lower()
    if root == b"rdf":
        return any(ns in head for ns in _RDF_FEED_NS)
    return root in (b"rss", b"feed")


def feed_entries(
    body: bytes, base_url: str, limit: int = 1000
) -> list[tuple[str, datetime | None]]:
    """Each entry's absolute http(s) link and date (aware UTC), in document order.

    The link is Atom's first rel=alternate link (else RSS's <link> or permalink <guid>, else
    the first link), resolved against xml:base and ``base_url``. The date is updated, else
    published; ``None`` when neither parses or lies outside MIN_YEAR..MAX_YEAR. Entries without
    a usable link are skipped. Never raises: garbage gives ``[]``.
    """
    try:
        parsed = feedparser.parse(
            io.BytesIO(bytes(body[:MAX_FEED_BYTES])),
            # nothing here reads entry HTML: skip its sanitising and URI rewriting (CPU)
            sanitize_html=False,
            resolve_relative_uris=False,
            response_headers={"content-location": base_url},  # the base for xml:base
        )
        out: list[tuple[str, datetime | None]] = []
        for entry in parsed.entries:
            link = _entry_link(entry, base_url)
            if link:
                out.append((link, _entry_date(entry)))
                if len(out) >= limit:
                    break
        return out
    except Exception:  # a hostile feed must not fail the Spark partition
        return []


def _entry_link(entry: dict, base_url: str) -> str | None:
    links = [x for x in entry.get("links") or () if x.get("href")]
    alternate = next((x["href"] for x in links if x.get("rel", "alternate") == "alternate"), None)
    href = alternate or entry.get("link") or (links[0]["href"] if links else None)
    if not isinstance(href, str) or not href.strip():
        return None
    try:
        url = urljoin(base_url, href.strip())
        return url if urlsplit(url).scheme in ("http", "https") else None
    except ValueError:  # "http://[bad", ...: skip the entry, keep the others
        return None


def _entry_date(entry: dict) -> datetime | None:
    # dict.get: FeedParserDict's own get() maps updated to published with a DeprecationWarning
    for key in ("updated_parsed", "published_parsed"):
        parsed = dict.get(entry, key)
        if not parsed:
            continue
        try:
            when = datetime.fromtimestamp(calendar.timegm(parsed), UTC)
        except (OverflowError, OSError, ValueError, TypeError):
            continue
        if MIN_YEAR <= when.year <= MAX_YEAR:
            return when
    return None
