"""Change signals for analysts (re-exported by analyst.analytics): per host the trust its
sitemap and feed dates earned, why each round's URLs were chosen, and freshness by what a
host's signals are worth. Conventions as in analyst.analytics."""

from __future__ import annotations

from analyst.analytics_sql import has_columns, has_tables, rows, sql_in
from recrawl.rules.units import SECONDS_PER_DAY

# fetch_list.reason: why generate chose a URL (recrawl.store.schemas.FETCH_REASONS, without pyspark).
FETCH_REASONS = ("signal", "new", "due", "fill")
# Hosts by what their change signals are worth to the scheduler (freshness_by_signal_class).
SIGNAL_CLASSES = ("trusted", "probed-untrusted", "no signals")

_CRAWLDB_SIGNAL_COLUMNS = ("signal_time", "signal_precision_s")
_HOST_SIGNAL_COLUMNS = (
    "signal_tp", "signal_fp", "signal_fn", "signal_tn", "signal_precision", "signal_recall",
    "signal_trusted", "signal_defer", "signals_read_at", "lm_trusted",
)
# The last round's logical date, the origin of ages and of the future-date tolerance.
_AS_OF = "as_of AS (SELECT CAST(max(logical_date) AS TIMESTAMP) AS t FROM rounds)"


def _signalled_changed_sql(tolerance_days: float) -> str:
    """recrawl.rules.signal_trust.signalled_changed over crawldb joined to `as_of`, in DuckDB: the
    newest signal's interval (signal_time, signal_precision_s wide, at least a second) reaches
    past the copy's fetch time, and the signal is no date beyond the last round plus the
    tolerance (that is a lie, not a signal). False (not NULL) without a signal or a copy."""
    return (f"coalesce(epoch_us(signal_time) + 1000000 * greatest(1, coalesce(signal_precision_s, 1))"
            f" > epoch_us(last_fetch_time) AND epoch_us(signal_time) <= "
            f"epoch_us(as_of.t) + {round(float(tolerance_days) * SECONDS_PER_DAY * 1e6)}, false)")


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
    known = sql_in(FETCH_REASONS)
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
               avg((epoch_us(as_of.t) - epoch_us(last_fetch_time)) / {SECONDS_PER_DAY * 1e6}) AS mean_age_d,
               avg(change_rate) AS mean_change_rate,
               count(*) FILTER (WHERE {_signalled_changed_sql(future_tolerance_days)})
                 AS stale_by_signal
        FROM held, as_of GROUP BY signal_class""")}
    empty = {"hosts": 0, "pages": 0, "changed_share": None, "mean_age_d": None,
             "mean_change_rate": None, "stale_by_signal": 0}
    return [{"signal_class": c, **empty, **got.get(c, {})} for c in SIGNAL_CLASSES]
