"""Sitemap and feed documents of normal sites, rendered from (path, date) rows.

Pure functions of their arguments, so the sitemap bytes of the default ``accurate`` kind are
exactly what simweb served before signal kinds existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime

from simweb.text import esc

FEED_PATH = "/feed.xml"
RSS_TYPE = "application/rss+xml"
ATOM_TYPE = "application/atom+xml"
SITEMAP_TYPE = "application/xml; charset=utf-8"
FEED_ITEMS = 20

#: A sitemap or feed row: path and the date published for it (None: no date).
Row = tuple[str, datetime | None]


def sitemap_xml(base: str, rows: Sequence[Row]) -> bytes:
    """A sitemaps.org urlset; <lastmod> is the UTC date (W3C Datetime, day precision)."""
    urls = []
    for path, when in rows:
        lastmod = "" if when is None else f"<lastmod>{when.date().isoformat()}</lastmod>"
        urls.append(f"<url><loc>{base}{path}</loc>{lastmod}</url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "\n".join(urls)
        + "\n</urlset>\n"
    ).encode()


def newest(rows: Sequence[tuple[str, datetime]], n: int = FEED_ITEMS) -> list[tuple[str, datetime]]:
    """The ``n`` newest rows, newest first; ties keep site order (stable sort)."""
    return sorted(rows, key=lambda r: r[1], reverse=True)[:n]


def rfc3339(dt: datetime) -> str:
    """Atom's date format, in UTC with a ``Z``."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def feed_xml(atom: bool, base: str, name: str, items: Sequence[tuple[str, str, datetime]]) -> bytes:
    """An RSS 2.0 or Atom 1.0 feed of (path, title, date) items, in the order given."""
    updated = max((d for _, _, d in items), default=None)
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if atom:
        entries = "".join(
            f'<entry><title>{esc(t)}</title><link href="{base}{p}"/><id>{base}{p}</id>'
            f"<updated>{rfc3339(d)}</updated></entry>\n"
            for p, t, d in items
        )
        stamp = f"<updated>{rfc3339(updated)}</updated>\n" if updated else ""
        return (
            f'{head}<feed xmlns="http://www.w3.org/2005/Atom">\n<title>{esc(name)}</title>\n'
            f'<id>{base}/</id>\n<link rel="self" href="{base}{FEED_PATH}"/>\n'
            f'<link href="{base}/"/>\n{stamp}<author><name>{esc(name)}</name></author>\n'
            f"{entries}</feed>\n"
        ).encode()
    entries = "".join(
        f"<item><title>{esc(t)}</title><link>{base}{p}</link>"
        f'<guid isPermaLink="true">{base}{p}</guid>'
        f"<pubDate>{format_datetime(d, usegmt=True)}</pubDate></item>\n"
        for p, t, d in items
    )
    stamp = f"<lastBuildDate>{format_datetime(updated, usegmt=True)}</lastBuildDate>\n"
    return (
        f'{head}<rss version="2.0">\n<channel>\n<title>{esc(name)}</title>\n'
        f"<link>{base}/</link>\n<description>Recent changes on {esc(name)}</description>\n"
        f"{stamp if updated else ''}{entries}</channel>\n</rss>\n"
    ).encode()


def feed_link(atom: bool) -> str:
    """The <head> line announcing a site's feed (autodiscovery)."""
    ctype = ATOM_TYPE if atom else RSS_TYPE
    return f'<link rel="alternate" type="{ctype}" title="Feed" href="{FEED_PATH}">\n'
