"""Crawler traps: when a host is one, and what a trap host may still fetch.

A host is a trap when it holds more URLs than `updatedb.host_page_cap`, when one URL shape
(digits and query values masked: calendars, id-driven and session-looping paths) repeats more
than `updatedb.trap_pattern_cap` times (updatedb, over all of crawldb), or when most of its new
pages in a round are duplicates, a near-duplicate flood (dedup). A trap host keeps refreshing
the pages it already has; its unfetched URLs are marked `trap` (crawldb.mark_traps) and never
generated (generate), so a trap costs what it held before it was recognised, and no more.
"""

from __future__ import annotations

import re

PAGE_CAP = "page cap"
REPEATED_PATTERN = "repeated url pattern"
NEAR_DUP_FLOOD = "near-duplicate flood"
# A round's new pages on a host are judged as a flood only from this many on.
FLOOD_MIN_NEW_PAGES = 10


def url_shape(url: str) -> str:
    """A URL with digit runs and query values masked: calendars and id-driven traps collapse."""
    path, _, query = url.partition("?")
    shape = re.sub(r"\d+", "N", path)
    if query:
        keys = sorted(p.split("=", 1)[0] for p in query.split("&"))
        shape += "?" + "&".join(keys)
    return shape


def url_shape_sql(col: str = "url") -> str:
    """`url_shape` as a SQL expression: the same string, without a Python round trip per URL.

    `\\p{Nd}` (Java) is Python's `\\d` for str (Unicode decimal digits); keys are sorted in
    code point order by both (UTF-8 byte order is code point order).
    """
    query = f"substr({col}, instr({col}, '?') + 1)"
    return (
        f"regexp_replace(substring_index({col}, '?', 1), '\\\\p{{Nd}}+', 'N') || "
        f"CASE WHEN instr({col}, '?') > 0 AND {query} != '' THEN '?' || array_join("
        f"array_sort(transform(split({query}, '&'), p -> substring_index(p, '=', 1))), '&') "
        "ELSE '' END"
    )


def host_trap_reason(pages_known: int, max_shape: int, page_cap: int,
                     pattern_cap: int) -> str | None:
    """Why a host is a trap by the URLs crawldb holds for it (None: it is not)."""
    if pages_known > page_cap:
        return PAGE_CAP
    if max_shape > pattern_cap:
        return REPEATED_PATTERN
    return None


def host_trap_reason_sql(pages_known: str, max_shape: str, page_cap: int,
                         pattern_cap: int) -> str:
    """`host_trap_reason` over two columns."""
    return (f"CASE WHEN {pages_known} > {int(page_cap)} THEN '{PAGE_CAP}' "
            f"WHEN {max_shape} > {int(pattern_cap)} THEN '{REPEATED_PATTERN}' END")


def near_dup_flood(new_pages: int, duplicates: int, fraction: float) -> bool:
    """A host whose new pages in a round are duplicates at `fraction` or more
    (dedup.trap_near_dup_fraction), over at least FLOOD_MIN_NEW_PAGES of them."""
    return new_pages >= FLOOD_MIN_NEW_PAGES and duplicates >= new_pages * fraction


def near_dup_flood_sql(new_pages: str, duplicates: str, fraction: float) -> str:
    """`near_dup_flood` over two columns."""
    return (f"({new_pages} >= {FLOOD_MIN_NEW_PAGES} AND "
            f"{duplicates} >= {new_pages} * {float(fraction)!r})")


def blocked(trap: bool | None, status: str) -> bool:
    """A URL a trap host may not fetch: one never fetched (the host's known pages are still
    refreshed)."""
    return bool(trap) and status == "unfetched"


def blocked_sql(trap: str = "trap", status: str = "status") -> str:
    """A URL a trap host may not fetch: one never fetched (the host's known pages are still
    refreshed)."""
    return f"(coalesce({trap}, false) AND {status} = 'unfetched')"
