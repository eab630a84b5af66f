"""Sitemaps (sitemaps.org protocol): recognise a sitemap document and list its <loc> URLs.

Sitemaps reach the crawl from robots.txt `Sitemap:` lines (updatedb adds them to crawldb); when
fetched, the parse step turns their <loc> entries into outlinks of kind "sitemap". A regular
expression is enough for <loc> and far cheaper than an XML parser on 50 MB files; the entity
unescaping covers what the protocol requires (&amp; &lt; &gt; &apos; &quot;).

Change signals: `sitemap_entries` also reads each entry's <lastmod> (a W3C Datetime, parsed by
`parse_w3c_datetime` into the interval it denotes), and `Signal` is the common shape of a
sitemap or feed (recrawl/content/feeds.py) date for a URL.
"""

from __future__ import annotations

import calendar
import functools
import gzip
import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MAX_LOCS = 50_000  # the protocol's per-file limit
_LOC = re.compile(rb"<loc>\s*([^<]{1,4096}?)\s*</loc>", re.IGNORECASE)
_ROOT = re.compile(rb"<(?:[a-z0-9_-]+:)?(urlset|sitemapindex)[\s>]", re.IGNORECASE)
MIN_YEAR, MAX_YEAR = 1990, 2100  # dates outside are typos or placeholders, not signals


@dataclass(frozen=True)
class Signal:
    """A published change date for ``url``: modified in [time, time + precision_s seconds)."""

    url: str
    time: datetime  # aware, UTC: the start of the interval the published value denotes
    precision_s: int  # the interval's width: 86400 for a date, 1 for a datetime with seconds
    kind: str  # "sitemap" or "feed" (schemas.SIGNAL_KINDS)


def is_sitemap(body: bytes, content_type: str | None) -> bool:
    """True for a sitemap or sitemap index (XML, possibly gzip-compressed)."""
    head = _maybe_gunzip(body[:1 << 20])[:4096]
    ctype = (content_type or "").lower()
    if "html" in ctype and not head.lstrip().startswith(b"<?xml"):
        return False
    return bool(_ROOT.search(head))


def sitemap_locs(body: bytes, limit: int = MAX_LOCS) -> list[str]:
    """The <loc> URLs of a sitemap (or of a sitemap index: the child sitemaps)."""
    data = _maybe_gunzip(body)
    out = []
    for m in _LOC.finditer(data):
        out.append(html.unescape(m.group(1).decode("utf-8", "replace")).strip())
        if len(out) >= limit:
            break
    return out


def _maybe_gunzip(body: bytes) -> bytes:
    if body[:2] == b"\x1f\x8b":
        try:
            d = gzip.GzipFile(fileobj=__import__("io").BytesIO(body))
            return d.read(50 * 1024 * 1024)
        except (OSError, EOFError):
            return b""
    return body


_W3C = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,]\d+)?)?"
    r"\s*([Zz]|[+-]\d\d(?::?\d\d)?)?)?)?)?",
    re.ASCII,
)


def parse_w3c_datetime(value: str) -> tuple[datetime, int] | None:
    """A W3C Datetime (YYYY, YYYY-MM, YYYY-MM-DD, ...Thh:mm[:ss[.s]]TZD) as (start, width).

    ``start`` is the aware UTC datetime at which the denoted interval begins and ``width`` its
    length in seconds (a year's, a month's or a day's length; 60 for minutes; 1 for seconds,
    fractions are truncated). Tolerated: no TZD (taken as UTC), a space for "T", "+hhmm" and
    "+hh". ``None`` for anything malformed or outside MIN_YEAR..MAX_YEAR (in UTC); never raises.
    """
    return _parse_w3c(value.strip()) if isinstance(value, str) else None


@functools.lru_cache(maxsize=4096)  # a sitemap repeats its lastmod values: ~4 µs saved per hit
def _parse_w3c(value: str) -> tuple[datetime, int] | None:
    m = _W3C.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute, second, tzd = m.groups()
    try:
        y = int(year)
        if month is None:
            start, width = datetime(y, 1, 1), (366 if calendar.isleap(y) else 365) * 86400
        elif day is None:
            start = datetime(y, int(month), 1)
            width = calendar.monthrange(y, int(month))[1] * 86400
        elif hour is None:
            start, width = datetime(y, int(month), int(day)), 86400
        else:
            start = datetime(y, int(month), int(day), int(hour), int(minute), int(second or 0))
            width = 60 if second is None else 1
            start -= _offset(tzd)
    except (ValueError, OverflowError):  # month 13, Feb 30, hour 24, offset +25:00, ...
        return None
    if not MIN_YEAR <= start.year <= MAX_YEAR:
        return None
    return start.replace(tzinfo=UTC), width


def _offset(tzd: str | None) -> timedelta:
    if tzd is None or tzd in "Zz":
        return timedelta(0)
    hours, minutes = int(tzd[1:3]), (int(tzd[-2:]) if len(tzd) > 3 else 0)
    if hours > 23 or minutes > 59:
        raise ValueError(tzd)
    delta = timedelta(hours=hours, minutes=minutes)
    return -delta if tzd[0] == "-" else delta


# One pass over the tags that matter (linear on 50 MB, unlike a lazy `<url>.*?</url>` match on
# a file whose blocks never close), with the text that follows each tag. A block's <loc> and
# <lastmod> must carry the block's own prefix: <image:loc> inside <url> is an image, not the page.
_ENTRY_TAG = re.compile(
    rb"<(/?)((?:[A-Za-z_][\w.-]*:)?)(url|sitemap|loc|lastmod)(?:\s[^<>]*)?>([^<]*)",
    re.IGNORECASE,
)


def sitemap_entries(
    body: bytes, limit: int = MAX_LOCS
) -> list[tuple[str, tuple[datetime, int] | None]]:
    """Each <url> (or index <sitemap>) block's <loc> and parsed <lastmod>, in document order.

    The loc is entity-unescaped and stripped; the lastmod is ``parse_w3c_datetime``'s result,
    ``None`` when absent or malformed. A block without a loc is skipped; an unclosed block ends
    at the next one. Gzip is tolerated; never raises.
    """
    data = _maybe_gunzip(body)
    out: list[tuple[str, tuple[datetime, int] | None]] = []
    block: bytes | None = None  # prefix of the open block
    loc = lastmod = None
    for m in _ENTRY_TAG.finditer(data):
        close, prefix, name, text = m.groups()
        name = name.lower()
        if name in (b"url", b"sitemap"):
            if close and prefix != block:
                continue
            if block is not None and loc:
                out.append((loc, lastmod))
                if len(out) >= limit:
                    return out
            block, loc, lastmod = (None if close else prefix), None, None
        elif block == prefix and not close:
            value = _element_text(data, m.end(), text)
            if value is None:
                continue
            if name == b"loc" and loc is None:
                loc = value.strip()
            elif name == b"lastmod" and lastmod is None:
                lastmod = parse_w3c_datetime(value)
    if block is not None and loc and len(out) < limit:
        out.append((loc, lastmod))
    return out


def _element_text(data: bytes, end: int, text: bytes) -> str | None:
    """The text of an element: ``text`` follows its start tag and ends at ``end``. ``None`` when
    the element does not close right there (a cut file, nested markup) or is implausibly long."""
    if not text.strip() and data.startswith(b"<![CDATA[", end):  # a few CMSs wrap URLs in it
        stop = data.find(b"]]>", end + 9, end + 4096)
        if stop >= 0 and data[stop + 3:stop + 5] == b"</":
            return data[end + 9:stop].decode("utf-8", "replace")
        return None
    if len(text) > 4096 or not data.startswith(b"</", end):
        return None
    return html.unescape(text.decode("utf-8", "replace"))


def is_sitemap_index(body: bytes) -> bool:
    """True when the root element is <sitemapindex> (its locs are sitemaps, not pages)."""
    m = _ROOT.search(_maybe_gunzip(body[:1 << 20])[:4096])
    return bool(m) and m.group(1).lower() == b"sitemapindex"
