"""The crawl's standard questions, answered once for the HTML report and the notebooks.

Every function takes a DuckDB connection from `recrawl.fastsql.connect` (views `crawl.<table>`
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

Only numbers here: drawing them (series, colours, matplotlib plots) is `recrawl.charts`.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path

from recrawl.config import default, local_path
from recrawl.crawldb_rules import (
    FETCH_STATUSES,  # noqa: F401 (notebooks use an.FETCH_STATUSES)
    LEGACY_EXTRACTOR,
    SUCCESS,
    ChangeColumns,
    meaningful_change_sql,
)
from recrawl.politeness import SECONDS_PER_DAY, host_delay_sql

# Change-rate buckets (changes per day): ~monthly, weekly, every few days, daily, hourly-ish.
CHANGE_RATE_EDGES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
# Age buckets for freshness, in days since the last successful fetch.
AGE_EDGES = (1.0, 3.0, 7.0, 30.0)
# fetch_list.reason: why generate chose a URL (recrawl.schemas.FETCH_REASONS, without pyspark).
FETCH_REASONS = ("signal", "new", "due", "fill")
# Hosts by what their change signals are worth to the scheduler (freshness_by_signal_class).
SIGNAL_CLASSES = ("trusted", "probed-untrusted", "no signals")
# True change rates known for a crawl's URLs (a simulated web's truth, or a study's ground
# truth), kept beside its tables: `url,true_rate` (changes per day), one row per URL.
REFERENCE_RATES = "reference_rates.csv"


def rows(con, sql: str, params: Sequence | None = None) -> list[dict]:
    """Run `sql` and return its rows as dicts (column name -> value)."""
    cur = con.execute(sql, list(params) if params is not None else None)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def has_tables(con, *names: str) -> bool:
    """True when every named table (view) exists in the connection's current schema."""
    have = {
        r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    return all(n in have for n in names)


def has_columns(con, table: str, *columns: str) -> bool:
    """True when the table (view) exists and has every named column: a table created before a
    column was added lacks it until `crawler init` adds it (docs/tables.md)."""
    have = {
        r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ?", [table]
        ).fetchall()
    }
    return bool(have) and all(c in have for c in columns)


def _in(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


# Rounds in display order: every round id seen in fetches or rounds, with its logical date.
def _changed_sql(trivial_distance: int) -> str:
    """updatedb's change rule (recrawl.crawldb_rules) over a URL's successive successes:
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
                 count(*) FILTER (WHERE fetch_status IN ({_in(SUCCESS)})) AS successful,
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
    `schedule.trivial_change_distance` key: pass the crawl's, else defaults.toml's).
    `discovered` counts URLs that entered crawldb on the round's logical date (seeds and new
    outlinks).
    """
    if not has_tables(con, "fetches", "pages", "rounds", "crawldb"):
        return []
    if trivial_distance is None:
        trivial_distance = int(default("schedule.trivial_change_distance"))
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
          WHERE f.fetch_status IN ({_in(SUCCESS)})
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


def _bucket_sql(column: str, edges: Sequence[float], unit: str) -> tuple[str, list[str]]:
    """A CASE expression numbering `column`'s bucket, and the buckets' labels."""
    labels = [f"< {edges[0]:g}{unit}"]
    labels += [f"{lo:g}–{hi:g}{unit}" for lo, hi in zip(edges, edges[1:], strict=False)]
    labels.append(f"≥ {edges[-1]:g}{unit}")
    whens = " ".join(f"WHEN {column} < {e!r} THEN {i}" for i, e in enumerate(edges))
    return f"CASE {whens} ELSE {len(edges)} END", labels


def change_rate_distribution(con, edges: Sequence[float] = CHANGE_RATE_EDGES) -> list[dict]:
    """How often pages change, and how often the schedule revisits them: per change-rate bucket
    (estimated changes per day), the URLs and the median revisit interval chosen for them
    (`fetch_interval_s` in days; None for an empty bucket).

    Only URLs with an estimate (fetched at least once by the schedule step). Every bucket is
    listed, empty ones with 0, lowest rate first.
    """
    if not has_tables(con, "crawldb"):
        return []
    case, labels = _bucket_sql("change_rate", edges, "/d")
    rows = {b: (n, med) for b, n, med in con.execute(
        f"SELECT {case} AS b, count(*), median(fetch_interval_s / 86400.0) FROM crawldb "
        "WHERE change_rate IS NOT NULL GROUP BY b"
    ).fetchall()}
    bounds = [None, *edges, None]
    return [
        {"bucket": label, "low": bounds[i], "high": bounds[i + 1],
         "urls": rows.get(i, (0, None))[0], "median_interval_d": rows.get(i, (0, None))[1]}
        for i, label in enumerate(labels)
    ]


def change_rates(con) -> list[float]:
    """Every URL's estimated change rate (changes per day), for histograms."""
    if not has_tables(con, "crawldb"):
        return []
    return [r[0] for r in con.execute(
        "SELECT change_rate FROM crawldb WHERE change_rate IS NOT NULL ORDER BY change_rate"
    ).fetchall()]


def write_reference_rates(home: str, rates: Mapping[str, float]) -> Path:
    """Write known true change rates (URL -> changes per day) as the crawl home's reference
    file (`REFERENCE_RATES`); a local crawl home only. The demos write simweb's truth here."""
    root = local_path(home)
    if root is None:
        raise ValueError(f"reference rates are kept in a local crawl home, not {home}")
    path = root / REFERENCE_RATES
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["url", "true_rate"])
        out.writerows((url, repr(float(rate))) for url, rate in sorted(rates.items()))
    return path


def reference_rates_file(home: str) -> str | None:
    """The crawl home's reference file when the home is local and holds one, else None."""
    root = local_path(home)
    path = None if root is None else root / REFERENCE_RATES
    return str(path) if path is not None and path.is_file() else None


# A URL listed twice counts once (at its mean rate).
_REFERENCE = """r AS (SELECT url, avg(true_rate) AS true_rate FROM read_csv(?, header = true,
                       columns = {'url': 'VARCHAR', 'true_rate': 'DOUBLE'}) GROUP BY url),
    held AS (SELECT r.true_rate, c.change_rate, c.fetch_interval_s / 86400.0 AS interval_d
             FROM r JOIN crawldb c USING (url) WHERE c.status = 'fetched')"""


def rate_vs_truth(con, reference: str, edges: Sequence[float] = CHANGE_RATE_EDGES) -> list[dict]:
    """The schedule's estimates against known true rates (`reference`: a REFERENCE_RATES file).

    Per true-rate bucket (the buckets of `change_rate_distribution`), over the URLs held
    (crawldb status `fetched`) that the file names: URLs, those with an estimate yet, and the
    medians of the true rate, the estimated rate (`change_rate`) and the revisit interval the
    schedule chose (days). Every bucket is listed, lowest rate first.
    """
    if not has_tables(con, "crawldb"):
        return []
    case, labels = _bucket_sql("true_rate", edges, "/d")
    got = {r[0]: r[1:] for r in _reference_query(con, reference, f"""
        SELECT {case} AS b, count(*), count(change_rate), median(true_rate),
               median(change_rate), median(interval_d)
        FROM held GROUP BY b""")}
    out = []
    for i, label in enumerate(labels):
        urls, estimated, true, est, interval = got.get(i, (0, 0, None, None, None))
        out.append({"bucket": label, "urls": urls, "estimated_urls": estimated,
                    "median_true_rate": true, "median_estimated_rate": est,
                    "median_interval_d": interval})
    return out


def rate_rank_correlation(con, reference: str) -> tuple[float | None, int]:
    """Spearman's rank correlation of estimated and true rates over the held URLs with an
    estimate (ties get their mean rank), and how many URLs it is over; None below 3 URLs or
    when either side is constant."""
    if not has_tables(con, "crawldb"):
        return None, 0
    [(rho, n)] = _reference_query(con, reference, """,
        j AS (SELECT true_rate AS x, change_rate AS y FROM held WHERE change_rate IS NOT NULL),
        k AS (SELECT rank() OVER (ORDER BY x) + (count(*) OVER (PARTITION BY x) - 1) / 2.0 AS rx,
                     rank() OVER (ORDER BY y) + (count(*) OVER (PARTITION BY y) - 1) / 2.0 AS ry
              FROM j)
        SELECT corr(rx, ry), count(*) FROM k""")
    ok = n >= 3 and rho is not None and rho == rho  # NaN when a side is constant
    return (float(rho) if ok else None), int(n)


def _reference_query(con, reference: str, rest: str) -> list[tuple]:
    """`WITH r, held` (the reference file joined to crawldb) then `rest`; a file that is not
    a reference-rates file is a ValueError saying so."""
    import duckdb  # lazy: the fast path's engine, as in recrawl.fastsql

    try:
        return con.execute(f"WITH {_REFERENCE}{rest}", [reference]).fetchall()
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0]
        raise ValueError(f"{reference} is not a reference-rates file (a header url,true_rate, "
                         f"then a URL and its changes per day on each line): {first}") from e


def freshness(con, edges: Sequence[float] = AGE_EDGES) -> list[dict]:
    """Age of the stored copies at the last round's logical date: URLs per age bucket.

    Also counts URLs overdue (next_fetch_time before that date) in each bucket. URLs never
    fetched successfully form the last bucket, `never`.
    """
    if not has_tables(con, "crawldb", "rounds"):
        return []
    as_of = con.execute("SELECT max(logical_date) FROM rounds").fetchone()[0]
    if as_of is None:
        return []
    age = "(epoch(CAST(? AS TIMESTAMP)) - epoch(last_fetch_time)) / 86400.0"
    case, labels = _bucket_sql(age, edges, " d")
    # The `age` placeholder appears once per edge in the CASE expression.
    params = [as_of] * len(edges) + [as_of]
    got = {
        r[0]: (r[1], r[2]) for r in con.execute(
            f"""SELECT CASE WHEN last_fetch_time IS NULL THEN -1 ELSE {case} END AS b,
                       count(*), count(*) FILTER (WHERE next_fetch_time < CAST(? AS TIMESTAMP))
                FROM crawldb GROUP BY b""", params
        ).fetchall()
    }
    out = [{"bucket": label, "urls": got.get(i, (0, 0))[0], "overdue": got.get(i, (0, 0))[1]}
           for i, label in enumerate(labels)]
    out.append({"bucket": "never", "urls": got.get(-1, (0, 0))[0], "overdue": got.get(-1, (0, 0))[1]})
    return out


# --- change signals (docs/freshness.md, "Change signals"; recrawl/signal_trust.py) ---------------

_CRAWLDB_SIGNAL_COLUMNS = ("signal_time", "signal_precision_s")
_HOST_SIGNAL_COLUMNS = (
    "signal_tp", "signal_fp", "signal_fn", "signal_tn", "signal_precision", "signal_recall",
    "signal_trusted", "signal_defer", "signals_read_at", "lm_trusted",
)
# The last round's logical date, the origin of ages and of the future-date tolerance.
_AS_OF = "as_of AS (SELECT CAST(max(logical_date) AS TIMESTAMP) AS t FROM rounds)"


def _signalled_changed_sql(tolerance_days: float) -> str:
    """recrawl.signal_trust.signalled_changed over crawldb joined to `as_of`, in DuckDB: the
    newest signal's interval (signal_time, signal_precision_s wide, at least a second) reaches
    past the copy's fetch time, and the signal is no date beyond the last round plus the
    tolerance (that is a lie, not a signal). False (not NULL) without a signal or a copy."""
    return (f"coalesce(epoch_us(signal_time) + 1000000 * greatest(1, coalesce(signal_precision_s, 1))"
            f" > epoch_us(last_fetch_time) AND epoch_us(signal_time) <= "
            f"epoch_us(as_of.t) + {round(float(tolerance_days) * 86400e6)}, false)")


def _signal_sources_sql(con) -> str:
    """signal_sources, or an empty stand-in where it is missing (a crawl home made before
    change signals; object storage homes are probed for the contract tables only)."""
    if has_tables(con, "signal_sources"):
        return "signal_sources"
    return ("(SELECT NULL::VARCHAR AS host, NULL::VARCHAR AS kind, NULL::TIMESTAMP AS read_at "
            "WHERE false)")


def _signal_fetches_sql(con) -> str:
    """fetch_list rows that generate chose for a change signal, or none when the table or its
    `reason` column is missing."""
    if has_columns(con, "fetch_list", "round_id", "host", "reason"):
        return "(SELECT round_id, host FROM fetch_list WHERE reason = 'signal')"
    return "(SELECT NULL::VARCHAR AS round_id, NULL::VARCHAR AS host WHERE false)"


def signal_trust_per_host(con, top: int | None = None,
                          future_tolerance_days: float = 1.0) -> list[dict]:
    """Per host: its change-signal sources, the trust its signals earned, and what they did.

    Columns: `sources` (sitemaps and feeds in signal_sources) and their `kinds`; the decayed
    check counts `tp`, `fp`, `fn`, `tn` (a revisit of a URL the host lists: signalled and
    changed, signalled but unchanged or a future date, changed but not signalled, neither) and
    `checks` (their sum); `precision` and `recall` (hosts.signal_precision / signal_recall, the
    Beta(1, 1) means the crawler decided with: (tp + 1) / (tp + fp + 2), (tp + 1) / (tp + fn + 2));
    the verdicts `trusted` (its signalled changes go first), `defer` (its URLs fresh by their
    signal may wait) and `lm_trusted` (Last-Modified moves with content); `signalled_urls`
    (crawldb URLs with a signal), `changed_since_fetch` (of them, those whose signal says the
    page changed after our copy was fetched: signal_time + signal_precision_s seconds later than
    last_fetch_time, the signal no more than `future_tolerance_days` after the last round's
    logical date, as `signals.future_tolerance_days`), `signal_fetches` (fetch_list rows of the
    last round chosen for a signal, reason `signal`) and `signals_read_at`.

    Hosts with neither a source nor a check (nor a URL with a signal) are left out; most
    evidence first. `top`: keep the first `top` hosts (None: all). Empty when crawldb or hosts
    lack the signal columns (tables created before change signals).
    """
    if not (has_tables(con, "rounds")
            and has_columns(con, "crawldb", "host", "last_fetch_time", *_CRAWLDB_SIGNAL_COLUMNS)
            and has_columns(con, "hosts", "host", *_HOST_SIGNAL_COLUMNS)):
        return []
    limit = f"LIMIT {int(top)}" if top else ""
    return rows(con, f"""
        WITH {_AS_OF},
        last_round AS (SELECT arg_max(round_id, (logical_date, round_id)) AS round_id FROM rounds),
        src AS (SELECT host, count(*) AS sources, list(DISTINCT kind ORDER BY kind) AS kinds
                FROM {_signal_sources_sql(con)} GROUP BY host),
        urls AS (SELECT host, count(*) AS signalled_urls,
                        count(*) FILTER (WHERE {_signalled_changed_sql(future_tolerance_days)})
                          AS changed_since_fetch
                 FROM crawldb, as_of WHERE signal_time IS NOT NULL GROUP BY host),
        fetched AS (SELECT host, count(*) AS signal_fetches FROM {_signal_fetches_sql(con)}
                    WHERE round_id = (SELECT round_id FROM last_round) GROUP BY host),
        h AS (SELECT host, signal_tp AS tp, signal_fp AS fp, signal_fn AS fn, signal_tn AS tn,
                     coalesce(signal_tp, 0) + coalesce(signal_fp, 0) + coalesce(signal_fn, 0)
                       + coalesce(signal_tn, 0) AS checks,
                     signal_precision AS precision, signal_recall AS recall,
                     coalesce(signal_trusted, false) AS trusted,
                     coalesce(signal_defer, false) AS defer, lm_trusted, signals_read_at
              FROM hosts),
        every AS (SELECT host FROM h UNION SELECT host FROM src UNION SELECT host FROM urls)
        SELECT e.host, coalesce(s.sources, 0) AS sources, coalesce(s.kinds, []) AS kinds,
               h.precision, h.recall, coalesce(h.trusted, false) AS trusted,
               coalesce(h.defer, false) AS defer, h.lm_trusted,
               h.tp, h.fp, h.fn, h.tn, coalesce(h.checks, 0) AS checks,
               coalesce(u.signalled_urls, 0) AS signalled_urls,
               coalesce(u.changed_since_fetch, 0) AS changed_since_fetch,
               coalesce(f.signal_fetches, 0) AS signal_fetches, h.signals_read_at
        FROM every e LEFT JOIN h USING (host) LEFT JOIN src s USING (host)
        LEFT JOIN urls u USING (host) LEFT JOIN fetched f USING (host)
        WHERE coalesce(s.sources, 0) > 0 OR coalesce(h.checks, 0) > 0
           OR coalesce(u.signalled_urls, 0) > 0
        ORDER BY checks DESC, sources DESC, signalled_urls DESC, e.host {limit}""")


def fetch_reasons_per_round(con) -> list[dict]:
    """Per round: the fetch-list rows by why generate chose them (`signal`: a change signal,
    trusted or probed; `new`: never fetched; `due`: the policy's revisit; `fill`: a page not
    yet due filling the round; `unknown`: rows written before the column existed), `generated`
    (all of them) and `signal_requests`, the signals step's sitemap and feed reads (rounds
    counts `signals.requests`; None where the round did not record it), which come out of the
    same budget. Empty when fetch_list has no `reason` column."""
    if not (has_tables(con, "rounds") and has_columns(con, "fetch_list", "round_id", "reason")):
        return []
    known = _in(FETCH_REASONS)
    per_reason = ",\n".join(f"count(*) FILTER (WHERE reason = '{r}') AS {r}" for r in FETCH_REASONS)
    coalesced = ", ".join(f"coalesce(l.{r}, 0) AS {r}" for r in FETCH_REASONS)
    return rows(con, f"""
        WITH round_order AS (
          SELECT round_id, max(logical_date) AS logical_date FROM (
            SELECT round_id, logical_date FROM rounds
            UNION ALL SELECT DISTINCT round_id, NULL::DATE FROM fetch_list
          ) GROUP BY round_id
        ),
        l AS (SELECT round_id, {per_reason},
                     count(*) FILTER (WHERE reason IS NULL OR reason NOT IN ({known})) AS unknown,
                     count(*) AS generated
              FROM fetch_list GROUP BY round_id)
        SELECT o.round_id, o.logical_date, {coalesced}, coalesce(l.unknown, 0) AS unknown,
               coalesce(l.generated, 0) AS generated,
               r.counts['signals.requests'] AS signal_requests
        FROM round_order o LEFT JOIN l USING (round_id) LEFT JOIN rounds r USING (round_id)
        ORDER BY o.logical_date NULLS LAST, o.round_id""")


def freshness_by_signal_class(con, future_tolerance_days: float = 1.0) -> list[dict]:
    """A freshness proxy per signal class of host, over the held pages (crawldb status
    `fetched`), at the last round's logical date.

    Classes, from the hosts columns: `trusted` (signal_trusted: its signalled changes go
    first), `probed-untrusted` (its sources answered or revisits checked its signals, but it is
    not trusted, yet or any more: a few of its signalled changes per round go first, as probes)
    and `no signals` (neither, or no hosts row). Per class: `hosts` and `pages` held,
    `changed_share` (of the pages whose last fetch could tell, the share that found a
    meaningful change, crawldb.last_changed), `mean_age_d` (mean days since the last fetch),
    `mean_change_rate` (mean estimated changes per day) and `stale_by_signal` (pages whose own
    signal says they changed after our copy, as in `signal_trust_per_host`).

    This is not freshness. Freshness is the share of stored copies still equal to the live
    page, which needs the web's truth (benchmarks/pipeline_freshness.py measures it on simweb,
    docs/freshness.md). Without it, a revisit that found a change shows a copy that had gone
    stale, and age times rate says how stale copies may be; `stale_by_signal` is a lower bound
    on the stale copies a host's own signals admit. Every class is listed, in SIGNAL_CLASSES
    order (an empty one with 0 pages and None means). Empty when the signal columns are missing.
    """
    if not (has_tables(con, "rounds")
            and has_columns(con, "crawldb", "host", "status", "last_fetch_time", "last_changed",
                            "change_rate", *_CRAWLDB_SIGNAL_COLUMNS)
            and has_columns(con, "hosts", "host", *_HOST_SIGNAL_COLUMNS)):
        return []
    trusted, probed, none = SIGNAL_CLASSES
    got = {r["signal_class"]: r for r in rows(con, f"""
        WITH {_AS_OF},
        cls AS (SELECT host, CASE
                  WHEN coalesce(signal_trusted, false) THEN '{trusted}'
                  WHEN signals_read_at IS NOT NULL OR coalesce(signal_tp, 0) + coalesce(signal_fp, 0)
                       + coalesce(signal_fn, 0) + coalesce(signal_tn, 0) > 0 THEN '{probed}'
                  ELSE '{none}' END AS signal_class
                FROM hosts),
        held AS (SELECT c.*, coalesce(k.signal_class, '{none}') AS signal_class
                 FROM crawldb c LEFT JOIN cls k USING (host) WHERE c.status = 'fetched')
        SELECT signal_class, count(DISTINCT host) AS hosts, count(*) AS pages,
               avg(CASE WHEN last_changed THEN 1.0 WHEN NOT last_changed THEN 0.0 END)
                 AS changed_share,
               avg((epoch_us(as_of.t) - epoch_us(last_fetch_time)) / 86400e6) AS mean_age_d,
               avg(change_rate) AS mean_change_rate,
               count(*) FILTER (WHERE {_signalled_changed_sql(future_tolerance_days)})
                 AS stale_by_signal
        FROM held, as_of GROUP BY signal_class""")}
    empty = {"hosts": 0, "pages": 0, "changed_share": None, "mean_age_d": None,
             "mean_change_rate": None, "stale_by_signal": 0}
    return [{"signal_class": c, **empty, **got.get(c, {})} for c in SIGNAL_CLASSES]


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
    (recrawl.politeness.host_delay: max(Crawl-delay, min delay)).

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
