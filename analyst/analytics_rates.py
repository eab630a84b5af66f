"""Change rates and freshness for analysts (re-exported by analyst.analytics): the estimates'
distribution, the estimates against known true rates (a reference file beside the tables, not a
Delta table), and how fresh the held copies are. Conventions as in analyst.analytics."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from analyst.analytics_sql import has_tables
from recrawl.config import local_path
from recrawl.rules.units import SECONDS_PER_DAY

# Change-rate buckets (changes per day): ~monthly, weekly, every few days, daily, hourly-ish.
CHANGE_RATE_EDGES = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
# Age buckets for freshness, in days since the last successful fetch.
AGE_EDGES = (1.0, 3.0, 7.0, 30.0)
# True change rates known for a crawl's URLs (a simulated web's truth, or a study's ground
# truth), kept beside its tables: `url,true_rate` (changes per day), one row per URL.
REFERENCE_RATES = "reference_rates.csv"


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
        f"SELECT {case} AS b, count(*), median(fetch_interval_s / {float(SECONDS_PER_DAY)}) FROM crawldb "
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
    import duckdb  # lazy: the fast path's engine, as in analyst.fastsql

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
    age = f"(epoch(CAST(? AS TIMESTAMP)) - epoch(last_fetch_time)) / {float(SECONDS_PER_DAY)}"
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


# --- change signals (docs/freshness.md, "Change signals"; recrawl/rules/signal_trust.py) ---------------
