"""The crawl's standard questions, answered once for the HTML report and the notebooks.

Every function takes a DuckDB connection from `analyst.fastsql.connect` (views `crawl.<table>`
over the Delta tables) and returns a list of plain dicts, one per row, ordered for display — so
the report, the notebooks and a test all read the same numbers. A function whose tables are
missing (a crawl home before its first round) returns an empty list; so does one whose columns
are missing (tables created before the columns were added, until `crawler init` migrates them).

Conventions: rounds are ordered by logical date, then round id; a URL's host is the politeness
key `scheme://host:port` that crawldb, fetch_list, robots and hosts use; "now" for back-offs is
passed in (they are wall-clock times, see docs/design-choices.md), and ages for freshness are
measured from the last round's logical date, as the scheduler measures them.

The exceptions are the reference rates (known true change rates, docs/analysts.md): a plain
CSV file beside the tables, not a Delta table, which `write_reference_rates` writes and
`reference_rates_file` finds without a connection; `rate_rank_correlation` returns one pair.

Only numbers here: drawing them (series, colours, matplotlib plots) is `analyst.charts`.
Change rates and freshness live in `analyst.analytics_rates`, change signals in
`analyst.analytics_signals`; this module re-exports them, so `analyst.analytics` stays the
analysts' one namespace.
"""

from __future__ import annotations

import datetime as dt

from analyst.analytics_rates import (  # noqa: F401 (the analysts' one namespace)
    AGE_EDGES,
    CHANGE_RATE_EDGES,
    REFERENCE_RATES,
    change_rate_distribution,
    change_rates,
    freshness,
    rate_rank_correlation,
    rate_vs_truth,
    reference_rates_file,
    write_reference_rates,
)
from analyst.analytics_signals import (  # noqa: F401 (the analysts' one namespace)
    FETCH_REASONS,
    SIGNAL_CLASSES,
    fetch_reasons_per_round,
    freshness_by_signal_class,
    signal_trust_per_host,
)
from analyst.analytics_sql import has_columns, has_tables, rows, sql_in  # noqa: F401
from recrawl.config import default
from recrawl.rules.crawldb_rules import (
    FETCH_STATUSES,  # noqa: F401 (notebooks use an.FETCH_STATUSES)
    LEGACY_EXTRACTOR,
    SUCCESS,
    ChangeColumns,
    meaningful_change_sql,
)
from recrawl.rules.politeness import host_delay_sql
from recrawl.rules.units import SECONDS_PER_DAY


# Rounds in display order: every round id seen in fetches or rounds, with its logical date.
def _changed_sql(trivial_distance: int) -> str:
    """updatedb's change rule (recrawl.rules.crawldb_rules) over a URL's successive successes:
    `prev_*` are the URL's last non-NULL values before this fetch."""
    return meaningful_change_sql(ChangeColumns(
        status="fetch_status", new_digest="digest", old_digest="prev_digest",
        new_hash="content_hash", old_hash="prev_hash", new_simhash="simhash",
        old_simhash="prev_simhash", has_previous="true",
        new_extractor="text_extractor", old_extractor="prev_extractor",
    ), trivial_distance, dialect="duckdb")


_ROUND_ORDER = """
  round_order AS (
    SELECT round_id, max(logical_date) AS logical_date FROM (
      SELECT round_id, logical_date FROM rounds
      UNION ALL SELECT DISTINCT round_id, NULL::DATE FROM fetches
    ) GROUP BY round_id
  )"""

# A fetch's host: from its fetch-list row, else crawldb, else parsed from the URL.
_FETCH_HOSTS = """
  fetch_hosts AS (
    SELECT f.*, coalesce(l.host, c.host, regexp_extract(f.url, '^([a-zA-Z]+://[^/?#]+)', 1)) AS host
    FROM fetches f
    LEFT JOIN fetch_list l ON l.round_id = f.round_id AND l.url = f.url
    LEFT JOIN (SELECT url, host FROM crawldb) c ON c.url = f.url
  )"""


def summary(con) -> dict:
    """Headline numbers: URLs known and fetched, hosts, rounds, pages, links, duplicates."""
    out: dict = {}
    if has_tables(con, "crawldb"):
        out.update(rows(con, """
            SELECT count(*) AS urls, count(*) FILTER (WHERE fetch_count > 0) AS urls_fetched,
                   count(DISTINCT host) AS hosts,
                   count(*) FILTER (WHERE status = 'unfetched') AS urls_unfetched
            FROM crawldb""")[0])
    for table, key in (("pages", "pages"), ("links", "links"), ("duplicates", "duplicates"),
                       ("fetches", "fetch_attempts")):
        if has_tables(con, table):
            out[key] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if has_tables(con, "rounds"):
        r = rows(con, """SELECT count(*) AS rounds, max(logical_date) AS last_logical_date,
                                arg_max(round_id, (logical_date, round_id)) AS last_round
                         FROM rounds""")[0]
        out.update(r)
    return out


def crawldb_status(con) -> list[dict]:
    """URLs per crawldb status, most common first."""
    if not has_tables(con, "crawldb"):
        return []
    return rows(con, "SELECT status, count(*) AS urls FROM crawldb GROUP BY status "
                     "ORDER BY urls DESC, status")


def rounds_overview(con) -> list[dict]:
    """One row per round: dates, duration and the main step counts from `rounds.counts`."""
    if not has_tables(con, "rounds"):
        return []
    return rows(con, """
        SELECT round_id, logical_date, started_at, finished_at,
               epoch(finished_at) - epoch(started_at) AS duration_s,
               coalesce(counts['generate.generated'], 0) AS generated,
               coalesce(counts['fetch.urls'], 0) AS fetch_attempts,
               coalesce(counts['fetch.fetched'], 0) AS fetched,
               coalesce(counts['fetch.not_modified'], 0) AS not_modified,
               coalesce(counts['parse.pages'], 0) AS pages,
               coalesce(counts['updatedb.new_urls'], 0) AS new_urls,
               coalesce(counts['updatedb.crawldb_urls'], 0) AS crawldb_urls,
               coalesce(counts['dedup.exact'], 0) + coalesce(counts['dedup.near'], 0) AS duplicates,
               steps_done
        FROM rounds ORDER BY logical_date, round_id""")


def step_timing_per_round(con) -> list[dict]:
    """One row per step run of each round (round_id, logical_date, step, started_at, seconds,
    cpu_seconds, gates, failed): when it started, its wall and driver-CPU seconds, its health
    gates (`gate: result`, `;`-separated) and whether one of them failed the round. Empty for
    rounds run before steps kept their timing (`crawler init` adds the columns)."""
    if not has_columns(con, "rounds", "step_seconds", "step_started_at", "step_cpu_seconds",
                       "gates", "failed_gate"):
        return []
    out = []
    for r in rows(con, """
            SELECT round_id, logical_date, step_started_at, step_seconds, step_cpu_seconds,
                   gates, failed_gate
            FROM rounds ORDER BY logical_date, round_id"""):
        started = r["step_started_at"] or {}
        seconds = r["step_seconds"] or {}
        gates = r["gates"] or {}
        failed = r["failed_gate"] or ""
        for step in sorted(seconds, key=lambda s: (started.get(s) is None, started.get(s), s)):
            mine = {g.split(".", 1)[1]: v for g, v in gates.items() if g.startswith(step + ".")}
            out.append({
                "round_id": r["round_id"], "logical_date": r["logical_date"], "step": step,
                "started_at": started.get(step), "seconds": float(seconds[step]),
                "cpu_seconds": float((r["step_cpu_seconds"] or {}).get(step) or 0.0),
                "gates": "; ".join(f"{g}: {v}" for g, v in mine.items()),
                "failed": failed.split(".", 1)[1] if failed.startswith(step + ".") else "",
            })
    return out


def fetch_status_per_round(con) -> list[dict]:
    """(round_id, logical_date, fetch_status, n): what every fetch attempt of a round ended as."""
    if not has_tables(con, "fetches", "rounds"):
        return []
    return rows(con, f"""
        WITH {_ROUND_ORDER}
        SELECT f.round_id, o.logical_date, f.fetch_status, count(*) AS n
        FROM fetches f JOIN round_order o USING (round_id)
        GROUP BY f.round_id, o.logical_date, f.fetch_status
        ORDER BY o.logical_date, f.round_id, n DESC, f.fetch_status""")


def status_mix_per_host(con, top: int | None = None) -> list[dict]:
    """(host, fetch_status, n) over all rounds, hosts with the most attempts first.

    Args:
        top: keep only the `top` hosts by attempts (None: all).
    """
    if not has_tables(con, "fetches", "fetch_list", "crawldb"):
        return []
    limit = f"LIMIT {int(top)}" if top else ""
    return rows(con, f"""
        WITH {_FETCH_HOSTS},
        totals AS (SELECT host, count(*) AS total FROM fetch_hosts GROUP BY host
                   ORDER BY total DESC, host {limit})
        SELECT f.host, f.fetch_status, count(*) AS n, any_value(t.total) AS host_total
        FROM fetch_hosts f JOIN totals t USING (host)
        GROUP BY f.host, f.fetch_status
        ORDER BY host_total DESC, f.host, n DESC, f.fetch_status""")


def throughput_per_round(con) -> list[dict]:
    """Per round: fetched pages over the fetch step's span (first to last `fetch_time`).

    `pages_per_s` counts fetched pages (200s with a body); `attempts_per_s` counts every row,
    304s, errors and deferrals included. A round whose fetches share one timestamp has no span
    and no rate (None).
    """
    if not has_tables(con, "fetches", "rounds"):
        return []
    return rows(con, f"""
        WITH {_ROUND_ORDER},
        t AS (
          SELECT round_id, count(*) AS attempts,
                 count(*) FILTER (WHERE fetch_status = 'fetched') AS fetched,
                 count(*) FILTER (WHERE fetch_status IN ({sql_in(SUCCESS)})) AS successful,
                 min(fetch_time) AS first_fetch, max(fetch_time) AS last_fetch,
                 (epoch_us(max(fetch_time)) - epoch_us(min(fetch_time))) / 1e6 AS seconds,
                 avg(duration_ms) AS mean_duration_ms,
                 sum(coalesce(content_length, 0)) AS bytes
          FROM fetches GROUP BY round_id
        )
        SELECT t.round_id, o.logical_date, attempts, fetched, successful, first_fetch, last_fetch,
               seconds,
               CASE WHEN seconds > 0 THEN fetched / seconds END AS pages_per_s,
               CASE WHEN seconds > 0 THEN attempts / seconds END AS attempts_per_s,
               mean_duration_ms, bytes
        FROM t JOIN round_order o USING (round_id)
        ORDER BY o.logical_date, t.round_id""")


def new_vs_changed_per_round(con, trivial_distance: int | None = None) -> list[dict]:
    """Per round: pages seen for the first time, changed, and unchanged since their last fetch.

    Rebuilt from the per-round history in `fetches` and `pages` with the updatedb rule (a 304 or
    the same payload is no change; so is a SimHash distance up to `trivial_distance`, the
    `updatedb.trivial_change_distance` key: pass the crawl's, else defaults.toml's).
    `discovered` counts URLs that entered crawldb on the round's logical date (seeds and new
    outlinks).
    """
    if not has_tables(con, "fetches", "pages", "rounds", "crawldb"):
        return []
    if trivial_distance is None:
        trivial_distance = int(default("updatedb.trivial_change_distance"))
    # pages made before the column: every text was trafilatura's (the rule reads NULL so)
    extractor = ("p.text_extractor" if has_columns(con, "pages", "text_extractor")
                 else "NULL::VARCHAR")
    return rows(con, f"""
        WITH {_ROUND_ORDER},
        ok AS (
          SELECT f.round_id, o.logical_date, f.url, f.fetch_status,
                 CASE WHEN f.fetch_status = 'fetched' THEN f.payload_digest END AS digest,
                 p.content_hash, p.simhash, {extractor} AS text_extractor
          FROM fetches f JOIN round_order o USING (round_id)
          LEFT JOIN pages p ON p.round_id = f.round_id AND p.url = f.url
          WHERE f.fetch_status IN ({sql_in(SUCCESS)})
        ),
        seq AS (
          SELECT *, row_number() OVER w AS nth,
                 last_value(digest IGNORE NULLS) OVER wp AS prev_digest,
                 last_value(content_hash IGNORE NULLS) OVER wp AS prev_hash,
                 last_value(simhash IGNORE NULLS) OVER wp AS prev_simhash,
                 last_value(CASE WHEN content_hash IS NOT NULL
                            THEN coalesce(text_extractor, '{LEGACY_EXTRACTOR}') END
                            IGNORE NULLS) OVER wp AS prev_extractor
          FROM ok
          WINDOW w AS (PARTITION BY url ORDER BY logical_date NULLS LAST, round_id),
                 wp AS (PARTITION BY url ORDER BY logical_date NULLS LAST, round_id
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        ),
        judged AS (
          SELECT *, CASE WHEN nth = 1 THEN NULL ELSE {_changed_sql(trivial_distance)}
            END AS changed
          FROM seq
        ),
        per_round AS (
          SELECT round_id, count(*) FILTER (WHERE nth = 1) AS new,
                 count(*) FILTER (WHERE changed) AS changed,
                 count(*) FILTER (WHERE NOT changed) AS unchanged
          FROM judged GROUP BY round_id
        ),
        discovered AS (
          SELECT CAST(discovered_at AS DATE) AS logical_date, count(*) AS discovered
          FROM crawldb GROUP BY 1
        )
        SELECT o.round_id, o.logical_date, coalesce(p.new, 0) AS new,
               coalesce(p.changed, 0) AS changed, coalesce(p.unchanged, 0) AS unchanged,
               coalesce(d.discovered, 0) AS discovered
        FROM round_order o LEFT JOIN per_round p USING (round_id)
        LEFT JOIN discovered d ON d.logical_date = o.logical_date
        ORDER BY o.logical_date NULLS LAST, o.round_id""")


def duplicates_per_round(con) -> list[dict]:
    """(round_id, logical_date, kind, n): exact and near duplicates found in each round."""
    if not has_tables(con, "duplicates", "rounds", "fetches"):
        return []
    return rows(con, f"""
        WITH {_ROUND_ORDER}
        SELECT d.round_id, o.logical_date, d.kind, count(*) AS n
        FROM duplicates d LEFT JOIN round_order o USING (round_id)
        GROUP BY d.round_id, o.logical_date, d.kind
        ORDER BY o.logical_date NULLS LAST, d.round_id, d.kind""")


def top_duplicate_clusters(con, top: int = 10) -> list[dict]:
    """The biggest duplicate clusters: a surviving (canonical) URL and the URLs folded into it."""
    if not has_tables(con, "duplicates"):
        return []
    return rows(con, """
        SELECT canonical_url, count(DISTINCT url) AS duplicates,
               count(DISTINCT url) FILTER (WHERE kind = 'exact') AS exact,
               count(DISTINCT url) FILTER (WHERE kind = 'near') AS near,
               max(distance) AS max_distance, count(DISTINCT round_id) AS rounds,
               list(DISTINCT url ORDER BY url)[1:3] AS examples
        FROM duplicates GROUP BY canonical_url
        ORDER BY duplicates DESC, canonical_url LIMIT ?""", [int(top)])


def top_hosts(con, top: int = 15) -> list[dict]:
    """Hosts with the most known URLs: crawldb status counts, host state and host rank."""
    if not has_tables(con, "crawldb"):
        return []
    join = ("LEFT JOIN hosts h USING (host)" if has_tables(con, "hosts") else
            "LEFT JOIN (SELECT NULL::VARCHAR AS host, NULL::DOUBLE AS host_rank, "
            "NULL::BOOLEAN AS trap, NULL::VARCHAR AS trap_reason, "
            "NULL::TIMESTAMP AS backoff_until) h USING (host)")
    return rows(con, f"""
        SELECT c.host, count(*) AS urls,
               count(*) FILTER (WHERE c.status = 'fetched') AS fetched,
               count(*) FILTER (WHERE c.status = 'unfetched') AS unfetched,
               count(*) FILTER (WHERE c.status NOT IN ('fetched', 'unfetched')) AS other,
               any_value(h.host_rank) AS host_rank, coalesce(any_value(h.trap), false) AS trap,
               any_value(h.trap_reason) AS trap_reason, any_value(h.backoff_until) AS backoff_until
        FROM crawldb c {join}
        GROUP BY c.host ORDER BY urls DESC, c.host LIMIT ?""", [int(top)])


def politeness_backoffs(con, now: dt.datetime | None = None) -> list[dict]:
    """Hosts that pushed back: back-off windows, failures, retry_later deferrals, Crawl-delay.

    One row per host with a `backoff_until`, consecutive failures, or retry_later fetches;
    `active` is whether the back-off still runs at `now` (wall clock, default: the current
    time, UTC). Ordered by retry_later deferrals, then failures.
    """
    if not has_tables(con, "hosts", "fetches", "fetch_list", "crawldb"):
        return []
    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(tzinfo=None)
    robots = ("LEFT JOIN (SELECT host, crawl_delay, http_status AS robots_status FROM robots) r "
              "USING (host)" if has_tables(con, "robots") else
              "LEFT JOIN (SELECT NULL::VARCHAR AS host, NULL::DOUBLE AS crawl_delay, "
              "NULL::INTEGER AS robots_status) r USING (host)")
    return rows(con, f"""
        WITH {_FETCH_HOSTS},
        deferred AS (
          SELECT host, count(*) FILTER (WHERE fetch_status = 'retry_later') AS retry_later,
                 count(*) FILTER (WHERE fetch_status IN
                   ('timeout', 'connect_error', 'dns_error', 'http_error')) AS failures,
                 count(*) AS attempts,
                 count(DISTINCT round_id) FILTER (WHERE fetch_status = 'retry_later') AS rounds_deferred
          FROM fetch_hosts GROUP BY host
        ),
        base AS (
          SELECT coalesce(h.host, d.host) AS host, h.backoff_until,
                 coalesce(h.consecutive_failures, 0) AS consecutive_failures,
                 coalesce(d.retry_later, 0) AS retry_later, coalesce(d.failures, 0) AS failures,
                 coalesce(d.attempts, 0) AS attempts,
                 coalesce(d.rounds_deferred, 0) AS rounds_deferred
          FROM hosts h FULL OUTER JOIN deferred d ON d.host = h.host
        )
        SELECT b.*, r.crawl_delay, r.robots_status,
               coalesce(b.backoff_until > ?, false) AS active
        FROM base b {robots}
        WHERE b.backoff_until IS NOT NULL OR b.consecutive_failures > 0 OR b.retry_later > 0
        ORDER BY b.retry_later DESC, b.consecutive_failures DESC, b.host""", [now])


def retry_later_per_round(con) -> list[dict]:
    """(round_id, logical_date, retry_later, hosts): deferrals (429/503, Crawl-delay too long)."""
    if not has_tables(con, "fetches", "fetch_list", "crawldb", "rounds"):
        return []
    return rows(con, f"""
        WITH {_ROUND_ORDER}, {_FETCH_HOSTS}
        SELECT o.round_id, o.logical_date,
               count(f.url) FILTER (WHERE f.fetch_status = 'retry_later') AS retry_later,
               count(DISTINCT f.host) FILTER (WHERE f.fetch_status = 'retry_later') AS hosts
        FROM round_order o LEFT JOIN fetch_hosts f USING (round_id)
        GROUP BY o.round_id, o.logical_date ORDER BY o.logical_date NULLS LAST, o.round_id""")


def top_pages_by_pagerank(con, top: int = 20) -> list[dict]:
    """Highest PageRank URLs with their host, status, latest title and in-link count."""
    if not has_tables(con, "scores"):
        return []
    crawldb = "crawldb" if has_tables(con, "crawldb") else \
        "(SELECT NULL::VARCHAR AS url, NULL::VARCHAR AS host, NULL::VARCHAR AS status)"
    pages = "pages" if has_tables(con, "pages") else \
        "(SELECT NULL::VARCHAR AS url, NULL::VARCHAR AS title, NULL::VARCHAR AS round_id)"
    links = "links" if has_tables(con, "links") else \
        "(SELECT NULL::VARCHAR AS src_url, NULL::VARCHAR AS dst_url)"
    return rows(con, f"""
        WITH top AS (SELECT url, pagerank, computed_at FROM scores
                     ORDER BY pagerank DESC, url LIMIT ?),
        titles AS (SELECT url, arg_max(title, round_id) AS title FROM {pages}
                   WHERE url IN (SELECT url FROM top) AND title IS NOT NULL GROUP BY url),
        inlinks AS (SELECT dst_url AS url, count(DISTINCT src_url) AS inlinks FROM {links}
                    WHERE dst_url IN (SELECT url FROM top) GROUP BY dst_url)
        SELECT t.url, c.host, t.pagerank, c.status, ti.title, coalesce(i.inlinks, 0) AS inlinks,
               t.computed_at
        FROM top t LEFT JOIN {crawldb} c USING (url) LEFT JOIN titles ti USING (url)
        LEFT JOIN inlinks i USING (url)
        ORDER BY t.pagerank DESC, t.url""", [int(top)])


def host_link_graph(con, top: int = 12) -> list[dict]:
    """(src_host, dst_host, links) between the `top` hosts with the most links in or out."""
    if not has_tables(con, "links"):
        return []
    return rows(con, """
        WITH e AS (SELECT src_host, dst_host, count(*) AS links FROM links
                   WHERE src_host IS NOT NULL AND dst_host IS NOT NULL GROUP BY ALL),
        deg AS (SELECT host, sum(links) AS d FROM (
                  SELECT src_host AS host, links FROM e UNION ALL SELECT dst_host, links FROM e)
                GROUP BY host ORDER BY d DESC, host LIMIT ?)
        SELECT src_host, dst_host, links FROM e
        WHERE src_host IN (SELECT host FROM deg) AND dst_host IN (SELECT host FROM deg)
        ORDER BY links DESC, src_host, dst_host""", [int(top)])


def host_link_matrix(con, top: int = 12) -> tuple[list[str], list[list[int]]]:
    """`host_link_graph` as a square matrix: (hosts, links[source][destination])."""
    edges = host_link_graph(con, top)
    hosts = sorted({e["src_host"] for e in edges} | {e["dst_host"] for e in edges})
    index = {h: i for i, h in enumerate(hosts)}
    matrix = [[0] * len(hosts) for _ in hosts]
    for e in edges:
        matrix[index[e["src_host"]]][index[e["dst_host"]]] = e["links"]
    return hosts, matrix


def politeness_capacity(con, min_delay_s: float | None = None,
                        max_crawl_delay_s: float | None = None) -> list[dict]:
    """Per host, the most pages a day politeness allows: 86400 / the host's delay
    (recrawl.rules.politeness.host_delay: max(Crawl-delay, min delay)).

    Hosts whose Crawl-delay exceeds `max_crawl_delay_s` are deferred by the fetcher (delay
    NULL, 0 a day). The sum over hosts bounds what any cluster can fetch per day
    (docs/operators.md). Pass the crawl's `fetcher.*` settings; the defaults are
    recrawl/defaults.toml's.
    """
    if not has_tables(con, "crawldb"):
        return []
    robots = ("LEFT JOIN robots r USING (host)" if has_tables(con, "robots") else
              "LEFT JOIN (SELECT NULL::VARCHAR AS host, NULL::DOUBLE AS crawl_delay) r USING (host)")
    delay = host_delay_sql(
        "any_value(r.crawl_delay)",
        default("fetcher.min_delay_s") if min_delay_s is None else min_delay_s,
        default("fetcher.max_crawl_delay_s") if max_crawl_delay_s is None else max_crawl_delay_s)
    return rows(con, f"""
        SELECT host, urls, crawl_delay, delay_s,
               CAST(coalesce(floor({SECONDS_PER_DAY} / delay_s), 0) AS BIGINT) AS max_pages_per_day
        FROM (SELECT host, count(*) AS urls, any_value(r.crawl_delay) AS crawl_delay,
                     {delay} AS delay_s
              FROM crawldb {robots} GROUP BY host)
        ORDER BY urls DESC, host""")


def as_frame(records: list[dict]):
    """The rows as a pandas DataFrame (for notebooks; pandas is in the analytics extra)."""
    import pandas as pd  # lazy: heavy (pandas, an analytics extra)

    return pd.DataFrame.from_records(records)
