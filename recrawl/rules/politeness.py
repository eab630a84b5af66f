"""The politeness delay of a host: one rule for the fetcher (the clock it keeps between two
requests), generate (how many fetch-list slots a host can use in a round) and the analysts'
capacity figures (pages a day politeness allows).

A host is waited on for the longer of our minimum delay and its robots.txt Crawl-delay. A
Crawl-delay above `fetcher.max_crawl_delay_s` is not shortened (that would fetch faster than the
site asked): the host is deferred, fetched by no round until its robots.txt asks for less, and
gets no fetch-list slots (they would all come back `retry_later`).
"""

from __future__ import annotations

from recrawl.rules.units import SECONDS_PER_DAY


def host_delay(crawl_delay: float | None, min_delay_s: float,
               max_crawl_delay_s: float) -> float | None:
    """Seconds between two requests to a host; None when its Crawl-delay exceeds
    `max_crawl_delay_s` (the host is deferred)."""
    asked = 0.0 if crawl_delay is None else float(crawl_delay)
    if asked > max_crawl_delay_s:
        return None
    return max(float(min_delay_s), asked)


def host_delay_sql(crawl_delay: str, min_delay_s: float, max_crawl_delay_s: float) -> str:
    """`host_delay` in SQL (Spark and DuckDB) over a Crawl-delay column or expression: NULL for
    a deferred host."""
    asked = f"coalesce(CAST({crawl_delay} AS DOUBLE), CAST(0 AS DOUBLE))"
    return (f"CASE WHEN {asked} > CAST({float(max_crawl_delay_s)!r} AS DOUBLE) THEN NULL "
            f"ELSE greatest(CAST({float(min_delay_s)!r} AS DOUBLE), {asked}) END")


def pages_per_day(delay_s: float | None) -> int:
    """The most requests a day one host allows at `delay_s` (0 for a deferred host)."""
    if delay_s is None:
        return 0
    return int(SECONDS_PER_DAY // max(delay_s, 1e-3))
