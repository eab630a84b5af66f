"""The crawldb rule book: crawl rules written once, as Python and as the SQL the jobs run.

Each rule is a Python function (what tests and readers reason with) next to a generator of the
SQL that Spark (updatedb, generate) or DuckDB (analyst.analytics) evaluates;
tests/spark_jobs/test_crawldb_rules.py runs one table of cases through them. So far: the status
names, a fetch's status transition, due-ness, eligibility for a fetch list (may_fetch,
is_eligible), the per-host cap, a new URL's values, the change rule and the change-history
window (docs/architecture.md lists where the other rules live).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from recrawl.rules.traps import blocked, blocked_sql
from recrawl.rules.units import SECONDS_PER_DAY

# --- statuses ------------------------------------------------------------------------------

# fetches.fetch_status: the fetcher's verdict on one URL (fetcher/models.py declares the same
# names for the fetch core used alone; tests/recrawl/test_crawldb_rules.py keeps them equal).
FETCH_STATUSES = (
    "fetched", "not_modified", "redirect", "gone", "robots_denied", "http_error", "timeout",
    "dns_error", "connect_error", "too_large", "filtered_type", "retry_later", "skipped_budget",
)
# crawldb.status: what updatedb concluded about a URL.
CRAWLDB_STATUSES = (
    "unfetched", "fetched", "gone", "redirect_temp", "redirect_perm", "robots_denied", "failed",
    "duplicate", "trap",
)
# Fetch statuses that mean "we have the page" (a 304 confirms the stored copy).
SUCCESS = ("fetched", "not_modified")
# Fetch failures retried up to updatedb.max_retries before the URL becomes `failed`.
TRANSIENT = ("http_error", "timeout", "dns_error", "connect_error")
# crawldb statuses generate hands out once due (never duplicates, permanent redirects, traps).
DUE_STATUSES = ("unfetched", "fetched", "redirect_temp", "gone", "robots_denied", "failed")
# crawldb statuses whose next fetch the schedule step plans (the rest keep updatedb's times).
SCHEDULED_STATUSES = ("fetched", "duplicate")
# Fetch statuses no retry will cure: the URL is `failed` at once.
UNFETCHABLE = ("too_large", "filtered_type")
# Permanent redirects (the rest are temporary: the URL stays due).
PERMANENT_REDIRECTS = (301, 308)

# --- transitions --------------------------------------------------------------------------------


def next_status(fetch_status: str, http_status: int | None, is_dup: bool, old_status: str,
                retries: int | None, max_retries: int) -> str:
    """crawldb.status after a fetch (Nutch's CrawlDbReducer in spirit). A 304 keeps a
    duplicate a duplicate; transient failures keep the old status until the retries reach
    updatedb.max_retries; statuses without a rule (retry_later, skipped_budget) change nothing."""
    if fetch_status == "fetched":
        return "duplicate" if is_dup else "fetched"
    if fetch_status == "not_modified":
        return "duplicate" if old_status == "duplicate" else "fetched"
    if fetch_status == "redirect":
        return "redirect_perm" if http_status in PERMANENT_REDIRECTS else "redirect_temp"
    if fetch_status in ("gone", "robots_denied"):
        return fetch_status
    if fetch_status in TRANSIENT:
        return "failed" if (retries or 0) + 1 >= max_retries else old_status
    if fetch_status in UNFETCHABLE:
        return "failed"
    return old_status


def next_status_sql(max_retries: int, *, fetch_status: str = "s.fetch_status",
                    http_status: str = "s.http_status", is_dup: str = "s.is_dup",
                    old_status: str = "t.status", retries: str = "t.retries") -> str:
    """`next_status` in Spark SQL; the defaults are updatedb's MERGE aliases (`s` the round's
    fetch, `t` the crawldb row)."""
    return f"""CASE
      WHEN {fetch_status} = 'fetched' THEN
        CASE WHEN coalesce({is_dup}, false) THEN 'duplicate' ELSE 'fetched' END
      WHEN {fetch_status} = 'not_modified' THEN
        CASE WHEN {old_status} = 'duplicate' THEN 'duplicate' ELSE 'fetched' END
      WHEN {fetch_status} = 'redirect' THEN
        CASE WHEN {http_status} IN ({_ints(PERMANENT_REDIRECTS)}) THEN 'redirect_perm'
             ELSE 'redirect_temp' END
      WHEN {fetch_status} IN ('gone', 'robots_denied') THEN {fetch_status}
      WHEN {fetch_status} IN ({sql_list(TRANSIENT)}) THEN
        CASE WHEN coalesce({retries}, 0) + 1 >= {int(max_retries)} THEN 'failed'
             ELSE {old_status} END
      WHEN {fetch_status} IN ({sql_list(UNFETCHABLE)}) THEN 'failed'
      ELSE {old_status} END"""


def sql_list(values: tuple[str, ...]) -> str:
    """SQL IN-list of string literals (the names here are plain words: no escaping needed)."""
    return ", ".join(f"'{v}'" for v in values)


def _ints(values: tuple[int, ...]) -> str:
    return ", ".join(str(int(v)) for v in values)

# --- generation -------------------------------------------------------------------------------


def is_due(status: str, next_fetch_time: dt.datetime | None, logical: dt.datetime,
           lookahead_days: float) -> bool:
    """Is a URL handed out by the round at `logical`? Its status allows it and its next fetch
    time is at or before the round plus the lookahead (generate.due_lookahead_days: rounds
    come once a period, planned intervals do not; half a period rounds to the nearest round)."""
    return (status in DUE_STATUSES and next_fetch_time is not None
            and next_fetch_time <= logical + dt.timedelta(days=lookahead_days))


def is_due_sql(due_by: str) -> str:
    """`is_due` in Spark SQL over crawldb's columns; `due_by` is the timestamp literal of the
    round's logical time plus the lookahead."""
    statuses = sql_list(DUE_STATUSES)
    return f"(status IN ({statuses}) AND next_fetch_time <= {due_by})"


def may_fetch(status: str, trap: bool | None, backoff_until: dt.datetime | None,
              delay_s: float | None, wall_now: dt.datetime) -> bool:
    """May a URL be handed out now at all, due or not (signal chases and fills pass here too)?
    Its host is not backing off (a server's Retry-After or repeated failures, compared with the
    wall clock: they are real time, not the round's logical date), it is not a new URL of a
    trap host (recrawl.rules.traps.blocked), and its host's delay is within the fetcher's cap
    (`delay_s` is recrawl.rules.politeness.host_delay: None above the cap, where the fetcher would
    defer the host and a slot would only come back retry_later)."""
    return (delay_s is not None
            and not (backoff_until is not None and backoff_until > wall_now)
            and not blocked(trap, status))


def may_fetch_sql(wall_now: str, delay: str = "delay") -> str:
    """`may_fetch` in Spark SQL over crawldb's status, the host's trap and backoff_until and a
    delay expression (NULL above the cap); `wall_now` a timestamp literal."""
    return (f"({delay} IS NOT NULL AND NOT coalesce(backoff_until > {wall_now}, false) "
            f"AND NOT {blocked_sql('trap', 'status')})")


def is_eligible(status: str, next_fetch_time: dt.datetime | None, trap: bool | None,
                backoff_until: dt.datetime | None, delay_s: float | None,
                logical: dt.datetime, wall_now: dt.datetime, lookahead_days: float,
                deferred: bool = False) -> bool:
    """Is a URL a candidate of the round's plan (before the budget chooses among them)? It is
    due (`is_due`), not deferred by its host's trusted signals (`deferred`:
    recrawl.rules.signal_trust.is_deferred), and may be fetched now (`may_fetch`). URLs held by an
    open round's marks are taken out before (spark_jobs.generate.live_marks)."""
    return (is_due(status, next_fetch_time, logical, lookahead_days) and not deferred
            and may_fetch(status, trap, backoff_until, delay_s, wall_now))


def eligible_sql(due_by: str, wall_now: str, delay: str = "delay", deferred: str = "false") -> str:
    """`is_eligible` in Spark SQL; `deferred` a boolean SQL expression (NULL counts as no)."""
    return (f"({is_due_sql(due_by)} AND NOT coalesce({deferred}, false) "
            f"AND {may_fetch_sql(wall_now, delay)})")


def per_host_cap(time_budget_s: float, delay_s: float, configured: int) -> int:
    """URLs one host may get in a round: generate.max_per_host when set, else as many as its
    delay lets one fetch task make within its time budget (Nutch's arithmetic), at least one."""
    if configured > 0:
        return configured
    # budget / delay, then floor, as the SQL computes it (60 // 0.3 is 199.0 in floats)
    return max(1, math.floor(time_budget_s / max(delay_s, 0.001)))


def per_host_cap_sql(time_budget_s: float, delay: str, configured: int) -> str:
    """`per_host_cap` in Spark SQL over a delay expression (seconds)."""
    if configured > 0:
        return str(int(configured))
    return f"greatest(1, CAST(floor({float(time_budget_s)!r} / greatest({delay}, 0.001)) AS INT))"


# --- new rows ---------------------------------------------------------------------------------


def new_url_values(default_interval_days: float) -> dict[str, str | int]:
    """crawldb values of a URL seen for the first time, whoever finds it (inject's seeds,
    updatedb's outlinks, redirect targets and sitemaps), besides url, host, depth and the
    round's time in discovered_at and next_fetch_time (due at once)."""
    return {"status": "unfetched", "retries": 0, "fetch_count": 0, "change_count": 0,
            "parse_failures": 0, "fetch_interval_s": int(default_interval_days * SECONDS_PER_DAY)}


def new_url_values_sql(default_interval_days: float) -> dict[str, str]:
    """`new_url_values` as SQL literals, for a MERGE's insert clause."""
    return {k: f"'{v}'" if isinstance(v, str) else str(v)
            for k, v in new_url_values(default_interval_days).items()}


# --- change history ---------------------------------------------------------------------------

# Visits kept in crawldb.change_history (the newest ones); the estimator reads no more.
HISTORY_MAX = 32


def append_history_sql(history: str, interval_d: str, changed: str) -> str:
    """`recrawl.rules.changerate.update_history` in Spark SQL: append one visit (interval in days,
    changed) when the interval is positive and keep the newest HISTORY_MAX.

    Not `slice(h, -N, N)`: Spark's slice returns an empty array when a negative start reaches
    before the first element, which emptied every history shorter than N."""
    appended = (f"concat(coalesce({history}, array()), array(named_struct("
                f"'interval_d', CAST({interval_d} AS DOUBLE), 'changed', {changed})))")
    return f"""CASE WHEN {interval_d} > 0
      THEN slice({appended}, greatest(1, size({appended}) - {HISTORY_MAX} + 1), {HISTORY_MAX})
      ELSE {history} END"""


# The text_extractor of a row written before the column: every crawl then used trafilatura.
LEGACY_EXTRACTOR = "trafilatura"


def meaningful_change(
    status: str,
    new_digest: str | None,
    old_digest: str | None,
    new_hash: str | None,
    old_hash: str | None,
    new_simhash: int | None,
    old_simhash: int | None,
    has_previous: bool,
    trivial_distance: int,
    new_extractor: str | None = None,
    old_extractor: str | None = None,
) -> bool | None:
    """Did the page change since its previous capture, trivial edits aside?

    None (unknown: no entry in the change history) when the visit was not a success or there
    is no previous capture to compare with. A 304, the same payload digest or the same text
    hash is no change; so is a SimHash within `trivial_distance` bits of the previous one (a
    rotating timestamp, a view counter: updatedb.trivial_change_distance), which would
    otherwise make every page with a clock on it change on every visit. A text hash missing on
    either side (not parsed) with a different payload counts as a change.

    Text hashes and SimHashes are compared only when the same extractor found both texts
    (`*_extractor`, pages.text_extractor; None is LEGACY_EXTRACTOR): after a change of
    parse.extractor the texts differ on every page, so a different payload is unknown, as for
    a first capture, until the next visit compares two texts of the new extractor. (Counting it
    as a change would mark nearly every page changed once: real pages' payloads differ on
    every visit by their ads, tokens and clocks.)
    """
    if status == "not_modified":
        return False
    if status != "fetched" or not has_previous:
        return None
    if new_digest is not None and new_digest == old_digest:
        return False
    if new_hash is None or old_hash is None:
        return True
    if (new_extractor or LEGACY_EXTRACTOR) != (old_extractor or LEGACY_EXTRACTOR):
        return None
    if new_hash == old_hash:
        return False
    if new_simhash is not None and old_simhash is not None:
        return bin((new_simhash ^ old_simhash) & (2**64 - 1)).count("1") > trivial_distance
    return True


@dataclass(frozen=True)
class ChangeColumns:
    """SQL expressions for `meaningful_change`'s arguments in one query (the extractors' default
    to NULL: both the legacy one)."""

    status: str
    new_digest: str
    old_digest: str
    new_hash: str
    old_hash: str
    new_simhash: str
    old_simhash: str
    has_previous: str
    new_extractor: str = "NULL"
    old_extractor: str = "NULL"


def meaningful_change_sql(c: ChangeColumns, trivial_distance: int, dialect: str = "spark") -> str:
    """`meaningful_change` as a SQL CASE (BOOLEAN, NULL for unknown) in `dialect`: "spark"
    (updatedb's MERGE) or "duckdb" (the analytics)."""
    if dialect == "spark":
        distance = f"bit_count({c.new_simhash} ^ {c.old_simhash})"
    elif dialect == "duckdb":
        distance = f"bit_count(xor({c.new_simhash}, {c.old_simhash}))"
    else:
        raise ValueError(f"unknown SQL dialect {dialect!r}: spark or duckdb")
    legacy = f"'{LEGACY_EXTRACTOR}'"
    return f"""CASE
      WHEN {c.status} = 'not_modified' THEN false
      WHEN {c.status} != 'fetched' OR NOT ({c.has_previous}) THEN NULL
      WHEN {c.new_digest} IS NOT NULL AND {c.new_digest} = {c.old_digest} THEN false
      WHEN {c.new_hash} IS NULL OR {c.old_hash} IS NULL THEN true
      WHEN coalesce({c.new_extractor}, {legacy}) != coalesce({c.old_extractor}, {legacy})
           THEN NULL
      WHEN {c.new_hash} = {c.old_hash} THEN false
      WHEN {c.new_simhash} IS NOT NULL AND {c.old_simhash} IS NOT NULL
           AND {distance} <= {int(trivial_distance)} THEN false
      ELSE true END"""
