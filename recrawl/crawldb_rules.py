"""The crawldb rule book: crawl rules written once, as Python and as the SQL the jobs run.

Each rule is a Python function (what tests and readers reason with) next to a generator of the
SQL that Spark (updatedb) or DuckDB (recrawl.analytics) evaluates; tests/spark_jobs/
test_crawldb_rules.py runs one table of cases through all three. So far: the status names, the
change rule and the change-history window (docs/architecture.md lists where the other rules
live).
"""

from __future__ import annotations

from dataclasses import dataclass

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

# --- change history ---------------------------------------------------------------------------

# Visits kept in crawldb.change_history (the newest ones); the estimator reads no more.
HISTORY_MAX = 32


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
) -> bool | None:
    """Did the page change since its previous capture, trivial edits aside?

    None (unknown: no entry in the change history) when the visit was not a success or there
    is no previous capture to compare with. A 304, the same payload digest or the same text
    hash is no change; so is a SimHash within `trivial_distance` bits of the previous one (a
    rotating timestamp, a view counter: schedule.trivial_change_distance), which would
    otherwise make every page with a clock on it change on every visit. A text hash missing on
    either side (not parsed) with a different payload counts as a change.
    """
    if status == "not_modified":
        return False
    if status != "fetched" or not has_previous:
        return None
    if new_digest is not None and new_digest == old_digest:
        return False
    if new_hash is None or old_hash is None:
        return True
    if new_hash == old_hash:
        return False
    if new_simhash is not None and old_simhash is not None:
        return bin((new_simhash ^ old_simhash) & (2**64 - 1)).count("1") > trivial_distance
    return True


@dataclass(frozen=True)
class ChangeColumns:
    """SQL expressions for `meaningful_change`'s arguments in one query."""

    status: str
    new_digest: str
    old_digest: str
    new_hash: str
    old_hash: str
    new_simhash: str
    old_simhash: str
    has_previous: str


def meaningful_change_sql(c: ChangeColumns, trivial_distance: int, dialect: str = "spark") -> str:
    """`meaningful_change` as a SQL CASE (BOOLEAN, NULL for unknown) in `dialect`: "spark"
    (updatedb's MERGE) or "duckdb" (the analytics)."""
    if dialect == "spark":
        distance = f"bit_count({c.new_simhash} ^ {c.old_simhash})"
    elif dialect == "duckdb":
        distance = f"bit_count(xor({c.new_simhash}, {c.old_simhash}))"
    else:
        raise ValueError(f"unknown SQL dialect {dialect!r}: spark or duckdb")
    return f"""CASE
      WHEN {c.status} = 'not_modified' THEN false
      WHEN {c.status} != 'fetched' OR NOT ({c.has_previous}) THEN NULL
      WHEN {c.new_digest} IS NOT NULL AND {c.new_digest} = {c.old_digest} THEN false
      WHEN {c.new_hash} IS NULL OR {c.old_hash} IS NULL THEN true
      WHEN {c.new_hash} = {c.old_hash} THEN false
      WHEN {c.new_simhash} IS NOT NULL AND {c.old_simhash} IS NOT NULL
           AND {distance} <= {int(trivial_distance)} THEN false
      ELSE true END"""
