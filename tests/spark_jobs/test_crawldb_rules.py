"""The crawldb rule book: each rule gives the same answer as Python, as Spark SQL (updatedb) and
as DuckDB SQL (the analytics), on one table of cases."""

from __future__ import annotations

import duckdb
import pytest

from recrawl.rules.crawldb_rules import ChangeColumns, meaningful_change, meaningful_change_sql

pytestmark = pytest.mark.spark

TRIVIAL = 3
NEG = -(2**63) + 5  # simhashes are signed 64-bit in the tables
# status, new digest, old digest, new hash, old hash, new simhash, old simhash, has previous,
# then the two texts' extractors (NULL: before pages.text_extractor, read as trafilatura)
CASES = [(*c, None, None) for c in [
    ("not_modified", None, "d1", None, "h1", None, 1, True),         # a 304: no change
    ("not_modified", None, None, None, None, None, None, False),     # a 304 says so even alone
    ("fetched", "d1", None, "h1", None, 1, None, False),             # first capture: unknown
    ("http_error", None, "d1", None, "h1", None, 1, True),           # not a success: unknown
    ("timeout", None, None, None, None, None, None, False),
    ("fetched", "d1", "d1", "h1", "h2", 0, 2**40, True),             # same payload
    ("fetched", "d2", "d1", "h1", "h1", 0, 2**40, True),             # same text
    ("fetched", "d2", "d1", "h1", "h2", 0b0000, 0b0111, True),       # rotating clock: 3 bits
    ("fetched", "d2", "d1", "h1", "h2", 0b0000, 0b1111, True),       # 4 bits: a change
    ("fetched", "d2", "d1", "h1", "h2", NEG, NEG ^ 0b11, True),      # signed, 2 bits
    ("fetched", "d2", "d1", "h1", "h2", -1, 0, True),                # signed, 64 bits
    ("fetched", "d2", "d1", None, "h2", 5, 5, True),                 # not parsed: a change
    ("fetched", "d2", "d1", "h1", None, None, None, True),
    ("fetched", None, "d1", "h1", "h2", None, 7, True),              # no simhash to compare
    ("fetched", None, None, "h1", "h1", None, None, True),            # no digests, same text
]] + [
    ("fetched", "d2", "d1", "h1", "h2", 0, 0b1111, True, "resiliparse", "trafilatura"),  # unknown
    ("fetched", "d2", "d1", "h1", "h2", 0, 0b1111, True, "resiliparse", None),  # NULL: trafilatura
    ("fetched", "d2", "d1", "h1", "h2", 0, 0b1111, True, "trafilatura", None),  # same: a change
    ("fetched", "d2", "d1", "h1", "h2", 0, 0b0011, True, "resiliparse", "resiliparse"),  # trivial
    ("fetched", "d1", "d1", "h1", "h2", 0, 0b1111, True, "resiliparse", "trafilatura"),  # same bytes
    ("fetched", "d2", "d1", None, "h2", None, 0, True, "resiliparse", "trafilatura"),  # not parsed
]
COLS = ChangeColumns(status="status", new_digest="nd", old_digest="od", new_hash="nh",
                     old_hash="oh", new_simhash="ns", old_simhash="os", has_previous="prev",
                     new_extractor="ne", old_extractor="oe")
DDL = ("status string, nd string, od string, nh string, oh string, ns bigint, os bigint, "
       "prev boolean, ne string, oe string, i int")


def _python(c: tuple) -> bool | None:
    return meaningful_change(*c[:8], trivial_distance=TRIVIAL, new_extractor=c[8],
                             old_extractor=c[9])


def test_the_change_rule_is_one_rule_in_python_spark_and_duckdb(spark):
    want = [_python(c) for c in CASES]
    assert want[:5] == [False, False, None, None, None]
    assert want[5:11] == [False, False, False, True, False, True]
    assert want[15:] == [None, None, True, False, False, True]

    rows = [(*c, i) for i, c in enumerate(CASES)]
    df = spark.createDataFrame(rows, DDL)
    got_spark = [r[0] for r in df.orderBy("i").selectExpr(
        meaningful_change_sql(COLS, TRIVIAL, "spark")).collect()]
    assert got_spark == want

    con = duckdb.connect()
    con.execute("CREATE TABLE t (status VARCHAR, nd VARCHAR, od VARCHAR, nh VARCHAR, "
                "oh VARCHAR, ns BIGINT, os BIGINT, prev BOOLEAN, ne VARCHAR, oe VARCHAR, "
                "i INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    got_duck = [r[0] for r in con.execute(
        f"SELECT {meaningful_change_sql(COLS, TRIVIAL, 'duckdb')} FROM t ORDER BY i").fetchall()]
    assert got_duck == want


def test_an_unknown_dialect_is_refused():
    with pytest.raises(ValueError, match="dialect"):
        meaningful_change_sql(COLS, TRIVIAL, "postgres")


def test_the_fetch_core_and_the_tables_name_the_same_statuses():
    from fetcher import models
    from recrawl.rules import crawldb_rules
    from recrawl.store import schemas

    assert models.FETCH_STATUSES == crawldb_rules.FETCH_STATUSES == schemas.FETCH_STATUSES
    rules = crawldb_rules
    assert set(rules.SUCCESS) | set(rules.TRANSIENT) <= set(rules.FETCH_STATUSES)
    assert set(rules.DUE_STATUSES) | set(rules.SCHEDULED_STATUSES) <= set(rules.CRAWLDB_STATUSES)


def test_due_ness_and_the_per_host_cap_are_one_rule_in_python_and_spark(spark):
    import datetime as dt

    from recrawl.rules.crawldb_rules import CRAWLDB_STATUSES, is_due, is_due_sql, per_host_cap, per_host_cap_sql

    logical = dt.datetime(2026, 3, 1)
    rows = [(s, logical + dt.timedelta(hours=h), d, i)
            for i, (s, h, d) in enumerate(
                (s, h, d) for s in CRAWLDB_STATUSES for h in (-30, 0, 11, 13)
                for d in (0.0, 0.3, 7.0, 400.0))]
    df = spark.createDataFrame(rows, "status string, next_fetch_time timestamp, delay double, i int")
    for lookahead in (0.0, 0.5):
        due_by = f"TIMESTAMP '{(logical + dt.timedelta(days=lookahead)).isoformat(sep=' ')}'"
        got = [r[0] for r in df.orderBy("i").selectExpr(is_due_sql(due_by)).collect()]
        assert got == [is_due(s, t, logical, lookahead) for s, t, _, _ in rows]
        assert any(got) and not all(got)
    for budget, configured in ((60.0, 0), (300.0, 0), (60.0, 7)):
        got = [r[0] for r in df.orderBy("i").selectExpr(
            per_host_cap_sql(budget, "delay", configured)).collect()]
        assert got == [per_host_cap(budget, d, configured) for _, _, d, _ in rows]


def test_eligibility_is_one_rule_in_python_and_spark(spark):
    """may_fetch / is_eligible: due, not deferred, no back-off by the wall clock, not a new URL
    of a trap host, a delay within the cap (NULL above it)."""
    import datetime as dt

    from recrawl.rules.crawldb_rules import (
        CRAWLDB_STATUSES,
        eligible_sql,
        is_eligible,
        may_fetch,
        may_fetch_sql,
    )

    logical = dt.datetime(2026, 3, 1)
    wall = dt.datetime(2026, 12, 6, 7, 0)
    rows = [(s, logical + dt.timedelta(hours=h), trap, back, delay, defer, i)
            for i, (s, h, trap, back, delay, defer) in enumerate(
                (s, h, trap, back, delay, defer) for s in CRAWLDB_STATUSES for h in (-30, 13)
                for trap in (True, False, None)
                for back in (None, wall - dt.timedelta(minutes=1), wall + dt.timedelta(hours=1))
                for delay in (None, 1.0) for defer in (True, False, None))]
    df = spark.createDataFrame(rows, "status string, next_fetch_time timestamp, trap boolean, "
                               "backoff_until timestamp, delay double, d boolean, i int")
    wall_sql = f"TIMESTAMP '{wall.isoformat(sep=' ')}'"
    due_by = f"TIMESTAMP '{(logical + dt.timedelta(days=0.5)).isoformat(sep=' ')}'"
    got = [tuple(r) for r in df.orderBy("i").selectExpr(
        may_fetch_sql(wall_sql), eligible_sql(due_by, wall_sql, deferred="d")).collect()]
    want = [(may_fetch(s, trap, back, delay, wall),
             is_eligible(s, t, trap, back, delay, logical, wall, 0.5, deferred=bool(d)))
            for s, t, trap, back, delay, d, _ in rows]
    assert got == want
    assert any(e for _, e in want) and not all(m for m, _ in want)


def test_a_new_url_gets_the_same_values_from_python_and_from_the_merge_sql(spark):
    from recrawl.rules.crawldb_rules import new_url_values, new_url_values_sql

    want = new_url_values(2.5)
    sql = new_url_values_sql(2.5)
    row = spark.sql("SELECT " + ", ".join(f"{v} AS {k}" for k, v in sql.items())).first()
    assert row.asDict() == want and want["fetch_interval_s"] == 216000
    assert want["status"] == "unfetched"


def test_a_fetchs_status_transition_is_one_rule_in_python_and_spark(spark):
    import itertools

    from recrawl.rules.crawldb_rules import CRAWLDB_STATUSES, FETCH_STATUSES, next_status, next_status_sql

    max_retries = 3
    rows = [(f, h, d, old, r, i) for i, (f, h, d, old, r) in enumerate(itertools.product(
        FETCH_STATUSES, (None, 200, 301, 302, 308), (False, True, None),
        ("unfetched", "fetched", "duplicate", "gone"), (None, 0, 1, 2)))]
    df = spark.createDataFrame(
        rows, "fetch_status string, http_status int, is_dup boolean, status string, "
              "retries int, i int")
    sql = next_status_sql(max_retries, fetch_status="fetch_status", http_status="http_status",
                          is_dup="is_dup", old_status="status", retries="retries")
    got = [r[0] for r in df.orderBy("i").selectExpr(sql).collect()]
    want = [next_status(f, h, bool(d), old, r, max_retries) for f, h, d, old, r, _ in rows]
    assert got == want
    assert set(want) <= set(CRAWLDB_STATUSES)
    # the transitions the docstring of spark_jobs/updatedb.py promises
    assert next_status("redirect", 301, False, "fetched", 0, 3) == "redirect_perm"
    assert next_status("redirect", 302, False, "fetched", 0, 3) == "redirect_temp"
    assert next_status("not_modified", 304, False, "duplicate", 0, 3) == "duplicate"
    assert next_status("timeout", None, False, "fetched", 1, 3) == "fetched"
    assert next_status("timeout", None, False, "fetched", 2, 3) == "failed"
    assert next_status("too_large", 200, False, "unfetched", None, 3) == "failed"
    assert next_status("retry_later", 503, False, "gone", 0, 3) == "gone"


def test_the_history_window_is_one_rule_in_python_and_spark(spark):
    from recrawl.rules.changerate import update_history
    from recrawl.rules.crawldb_rules import HISTORY_MAX, append_history_sql

    def hist(n):
        return [{"interval_d": float(i + 1), "changed": i % 3 == 0} for i in range(n)]

    # (history before, interval in days, changed): empty, short, one below, at and above the
    # window (the short ones were emptied by a negative slice start), a non-positive interval
    cases = [([], 1.5, True), (hist(1), 2.0, False), (hist(5), 0.5, True),
             (hist(HISTORY_MAX - 1), 1.0, True), (hist(HISTORY_MAX), 3.0, False),
             (hist(HISTORY_MAX + 3), 1.0, True), (hist(4), 0.0, True)]
    want = [update_history(h, i, c) for h, i, c in cases]
    assert [len(w) for w in want] == [1, 2, 6, HISTORY_MAX, HISTORY_MAX, HISTORY_MAX, 4]
    rows = [(h, i, c, n) for n, (h, i, c) in enumerate(cases)]
    df = spark.createDataFrame(
        rows, "h array<struct<interval_d: double, changed: boolean>>, iv double, ch boolean, n int")
    got = [[r.asDict() for r in row[0]] for row in df.orderBy("n").selectExpr(
        append_history_sql("h", "iv", "ch")).collect()]
    assert got == want
