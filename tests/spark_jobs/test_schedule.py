"""schedule job: intervals per policy on a tiny crawldb, rows it must not touch, re-runs."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from recrawl.rules.allocation import rate_weight_bucket
from recrawl.rules.changerate import GammaPrior, estimate_from_history
from recrawl.rules.schedules import ChangeRateOptimalSchedule

pytestmark = pytest.mark.spark

ROUND = "20260301"
LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
EARLIER = NOW - dt.timedelta(days=1)
DAY = 86400
FAST = [{"interval_d": 1.0, "changed": True}] * 10
SLOW = [{"interval_d": 1.0, "changed": False}] * 10


def _row(url, history, changed, **kw):
    row = {
        "url": url, "host": "http://a.test", "status": "fetched", "depth": 1,
        "last_fetch_time": NOW, "next_fetch_time": NOW + dt.timedelta(days=1),
        "fetch_interval_s": DAY, "fetch_count": len(history or []) + 1,
        "change_history": history, "last_changed": changed, "last_round": ROUND,
    }
    row.update(kw)
    return row


ROWS = [
    _row("http://a.test/fast", FAST, True),
    _row("http://a.test/slow", SLOW, False),
    _row("http://a.test/new", None, None, fetch_count=1),  # first capture: prior rate
    _row("http://a.test/dup", SLOW, False, status="duplicate"),
    # fetched in an earlier round: shares the budget with its stored rate, is not rescheduled
    _row("http://a.test/old", FAST, True, last_round="20260228", last_fetch_time=EARLIER,
         change_rate=0.5, next_fetch_time=EARLIER + dt.timedelta(days=1),
         scheduled_round="20260228"),
    # failed this round: updatedb already set its retry time
    _row("http://a.test/gone", SLOW, False, status="gone", last_fetch_time=EARLIER,
         next_fetch_time=NOW + dt.timedelta(days=30)),
]
UNTOUCHED = {"http://a.test/old", "http://a.test/gone"}


def _crawldb(spark, cfg, rows=ROWS):
    from recrawl.store.schemas import CRAWLDB, TABLES
    from recrawl.store.tables import conform, create_table

    create_table(spark, cfg, TABLES["crawldb"])
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append"
    ).save(cfg.table_path("crawldb"))


def _rows(spark, cfg):
    df = spark.read.format("delta").load(cfg.table_path("crawldb"))
    return {r["url"]: r.asDict(recursive=True) for r in df.collect()}


def _schedule(spark, cfg):
    from spark_jobs import schedule

    return schedule.run(spark, cfg, ROUND, LOGICAL)


def test_optimal_fast_page_gets_shorter_interval_and_rerun_changes_nothing(spark, cfg):
    cfg = cfg.with_overrides({"schedule.policy": "optimal", "schedule.daily_budget": 3})
    _crawldb(spark, cfg)
    before = _rows(spark, cfg)
    counts = _schedule(spark, cfg)
    after = _rows(spark, cfg)

    assert counts["scheduled"] == 4 and counts["policy"] == 2
    assert counts["population"] == 4  # fast, slow, new, old: duplicates are never refetched
    assert all(isinstance(v, int) for v in counts.values())
    fast, slow = after["http://a.test/fast"], after["http://a.test/slow"]
    assert fast["fetch_interval_s"] < after["http://a.test/new"]["fetch_interval_s"]
    assert after["http://a.test/new"]["fetch_interval_s"] < slow["fetch_interval_s"]
    # The same allocation the pure solver makes over the same pages and budget.
    prior = GammaPrior(0.1, 2.0)
    rates = {u: estimate_from_history(r["change_history"], prior) for u, r in before.items()}
    rates["http://a.test/old"] = 0.5  # stored estimate, not re-derived
    # (with the configured floor on a revisit's chance of change, 0.3 by default)
    floor = cfg.get("schedule.min_change_probability")
    expected = ChangeRateOptimalSchedule(daily_budget=3, min_change_probability=floor).allocate(
        [(u, rates[u], None) for u in ("http://a.test/fast", "http://a.test/slow",
                                        "http://a.test/new", "http://a.test/old")]
    )
    for url in ("http://a.test/fast", "http://a.test/slow", "http://a.test/new"):
        row = after[url]
        assert row["fetch_interval_s"] == pytest.approx(expected[url] * DAY, abs=1)
        assert row["change_rate"] == pytest.approx(rates[url])
        assert row["next_fetch_time"] == NOW + dt.timedelta(seconds=row["fetch_interval_s"])
        assert row["scheduled_round"] == ROUND
    assert after["http://a.test/dup"]["scheduled_round"] == ROUND  # scheduled, no budget share
    for url in UNTOUCHED:
        assert after[url] == before[url]

    again = _schedule(spark, cfg)
    assert again["scheduled"] == 0
    assert _rows(spark, cfg) == after


@pytest.mark.parametrize(
    ("policy", "fast_days", "slow_days"),
    [("adaptive", 0.8, 1.4), ("fixed", 1.0, 1.0)],  # Nutch's inc 0.4 / dec 0.2; the default
)
def test_adaptive_and_fixed(spark, cfg, policy, fast_days, slow_days):
    cfg = cfg.with_overrides({"schedule.policy": policy})
    _crawldb(spark, cfg, ROWS[:3])
    counts = _schedule(spark, cfg)
    after = _rows(spark, cfg)
    assert counts["scheduled"] == 3 and counts["policy"] == {"adaptive": 1, "fixed": 0}[policy]
    assert after["http://a.test/fast"]["fetch_interval_s"] == round(fast_days * DAY)
    assert after["http://a.test/slow"]["fetch_interval_s"] == round(slow_days * DAY)
    assert after["http://a.test/new"]["fetch_interval_s"] == DAY  # unknown outcome keeps it
    assert after["http://a.test/fast"]["change_rate"] > after["http://a.test/slow"]["change_rate"]


def test_bucket_sql_matches_rate_weight_bucket(spark):
    from pyspark.sql import functions as F

    from spark_jobs.schedule import bucket_sql

    values = [(0.0, 1.0), (None, None), (1e-3, 0.5), (2.55, 1.0), (0.1, 37.0), (1e9, 1e-9)]
    df = spark.createDataFrame(values, "rate double, w double")
    got = [r[0] for r in df.select(F.expr(bucket_sql("rate", "w"))).collect()]
    assert got == [rate_weight_bucket(r, w) for r, w in values]


def test_every_policy_builds_from_the_default_section(cfg):
    from spark_jobs.schedule import build_policy

    section = dict(cfg.section("schedule"))
    for name in ("fixed", "adaptive", "optimal"):
        assert build_policy({**section, "policy": name}).name == name
    assert build_policy({**section, "policy": "optimal"}).default_rate == section["prior_mean"]


def test_optimal_with_only_duplicates_fetched_gives_them_the_longest_interval(spark, cfg):
    cfg = cfg.with_overrides({"schedule.policy": "optimal"})
    _crawldb(spark, cfg, [ROWS[3]])  # duplicates are never generated: no budget share
    counts = _schedule(spark, cfg)
    assert counts["scheduled"] == 1 and counts["population"] == 0
    assert _rows(spark, cfg)["http://a.test/dup"]["fetch_interval_s"] == 30 * DAY


def test_optimal_plans_revisits_with_what_the_discovery_reserve_leaves(spark, cfg):
    from recrawl.rules.schedules import ChangeRateOptimalSchedule

    cfg = cfg.with_overrides({"schedule.policy": "optimal", "schedule.daily_budget": 3,
                              "generate.discovery_share": 0.4})
    frontier = [
        _row(f"http://a.test/frontier{i}", None, None, status="unfetched", last_round=None,
             last_fetch_time=None, fetch_count=0)
        for i in range(5)
    ]
    _crawldb(spark, cfg, ROWS + frontier)
    counts = _schedule(spark, cfg)
    after = _rows(spark, cfg)
    # ceil(0.4 x 3) = 2 of the 3 daily fetches are the frontier's: revisits plan with 1
    assert counts["frontier"] == 5 and counts["budget_per_day"] == 1
    prior = GammaPrior(0.1, 2.0)
    rates = {u: estimate_from_history(r["change_history"], prior) for u, r in after.items()}
    rates["http://a.test/old"] = 0.5
    floor = cfg.get("schedule.min_change_probability")
    expected = ChangeRateOptimalSchedule(daily_budget=1, min_change_probability=floor).allocate(
        [(u, rates[u], None) for u in ("http://a.test/fast", "http://a.test/slow",
                                        "http://a.test/new", "http://a.test/old")]
    )
    # mu is solved on the (rate, weight) histogram, a bucket at its pages' mean rate: under
    # the floor a capped page takes a share that follows its bucket's rate, so mu (and the
    # uncapped intervals) may move by a few parts in 1e5 from the per-page solve
    for url in ("http://a.test/fast", "http://a.test/slow", "http://a.test/new"):
        assert after[url]["fetch_interval_s"] == pytest.approx(expected[url] * DAY, rel=1e-4)
    for row in frontier:  # the frontier is generate's, never scheduled here
        assert after[row["url"]]["scheduled_round"] is None


def test_oracle_rates_replace_the_estimate(spark, cfg, tmp_path):
    """schedule.oracle_rates (benchmarks only): listed URLs get the given rate, and the optimal
    allocation follows it; unlisted URLs keep the estimate."""
    import json

    oracle = tmp_path / "oracle.json"
    # the opposite of what the histories say: "slow" is really fast, "fast" really slow
    oracle.write_text(json.dumps({"http://a.test/slow": 3.0, "http://a.test/fast": 0.002}))
    cfg = cfg.with_overrides({"schedule.policy": "optimal", "schedule.daily_budget": 3,
                              "schedule.oracle_rates": str(oracle)})
    _crawldb(spark, cfg, ROWS[:3])
    _schedule(spark, cfg)
    after = _rows(spark, cfg)
    assert after["http://a.test/slow"]["change_rate"] == 3.0
    assert after["http://a.test/fast"]["change_rate"] == 0.002
    new = after["http://a.test/new"]
    assert new["change_rate"] == pytest.approx(estimate_from_history(None, GammaPrior(0.1, 2.0)))
    assert after["http://a.test/slow"]["fetch_interval_s"] < after["http://a.test/fast"][
        "fetch_interval_s"]


def test_pages_followed_by_trusted_signals_leave_the_allocation(spark, cfg, tmp_path):
    """A host whose signals are trusted for recall (here by the benchmarks' trust oracle) lists
    the fast page with a date: its signal decides, it gets the deferral cap as its interval,
    and its expected fetches come off the budget, but never the other pages' share of it
    (recrawl.rules.signal_trust.policy_budget): with one fetch a day and 1.8 expected chases, the page
    no signal follows still plans with a third of a fetch a day instead of waiting the longest
    interval."""
    from recrawl.store.schemas import HOSTS, TABLES
    from recrawl.store.tables import create_table

    oracle = tmp_path / "trust.json"
    oracle.write_text(json.dumps({"http://a.test": True}))
    cfg = cfg.with_overrides({"schedule.policy": "optimal", "schedule.daily_budget": 1,
                              "signals.trust_oracle": str(oracle)})
    rows = [dict(r) for r in ROWS]
    for r in rows[:2]:  # listed with a date, ~2 changes a day: 0.86 chases a day each
        r.update(signal_time=EARLIER, change_rate=2.0)
    _crawldb(spark, cfg, rows)
    create_table(spark, cfg, TABLES["hosts"])
    spark.createDataFrame([{"host": "http://a.test", "trap": False}], HOSTS).write.format(
        "delta").mode("append").save(cfg.table_path("hosts"))
    counts = _schedule(spark, cfg)
    after = _rows(spark, cfg)
    assert counts["signal_followed"] == 2 and counts["budget_per_day"] == 0
    for url in ("http://a.test/fast", "http://a.test/slow"):  # signals.defer_max_days
        assert after[url]["fetch_interval_s"] == int(cfg.get("signals.defer_max_days")) * DAY
    assert counts["signal_fetches_per_day"] == 2
    # a third of a fetch a day for one page: 5.2 days (the policy's choice for its rate)
    assert 3 * DAY <= after["http://a.test/new"]["fetch_interval_s"] < 10 * DAY


def test_followed_pages_rates_learn_from_the_reads_that_list_them_unchanged(spark, cfg, tmp_path):
    """A page a trusted host's signals follow is not fetched while its date stands still; each
    read that lists it unchanged adds the days since our copy to its last-modified exposure,
    so its rate falls between fetches. A page whose date moved (a change pending), a host
    read before our copy, and a rate that moves less than signals.requote_min_change are left
    alone; a re-run writes nothing more."""
    from recrawl.rules.changerate import lm_rate
    from recrawl.store.schemas import HOSTS, TABLES
    from recrawl.store.tables import create_table

    oracle = tmp_path / "trust.json"
    oracle.write_text(json.dumps({"http://a.test": True, "http://b.test": True}))
    cfg = cfg.with_overrides({"schedule.policy": "optimal", "schedule.daily_budget": 3,
                              "signals.trust_oracle": str(oracle)})
    month_ago = NOW - dt.timedelta(days=30)
    quiet = dict(status="fetched", last_round="20260131", scheduled_round="20260131",
                 last_fetch_time=month_ago, change_rate=0.2, lm_changes=1.0,
                 lm_exposure_d=5.0, signal_time=month_ago - dt.timedelta(days=5))
    rows = [dict(r) for r in ROWS] + [
        _row("http://a.test/quiet", None, None, **quiet),
        # its date moved after our copy: a chase is pending, nothing is known free of changes
        _row("http://a.test/moved", None, None, **{**quiet, "signal_time": EARLIER}),
        # its stored rate is already what the evidence gives: not written again
        _row("http://a.test/steady", None, None, **{**quiet, "lm_changes": 10.0,
                                                    "lm_exposure_d": 1000.0}),
        # its host's last read came before our copy: no quiet days to add
        _row("http://b.test/quiet", None, None, **{**quiet, "host": "http://b.test",
                                                   "last_fetch_time": NOW}),
    ]
    prior = GammaPrior(float(cfg.get("schedule.prior_mean")),
                       float(cfg.get("schedule.prior_strength")))
    days = float(cfg.get("schedule.default_interval_days"))
    steady_rate = lm_rate(10.0, 1030.0, prior, days, visits=1)
    rows[-2]["change_rate"] = steady_rate
    _crawldb(spark, cfg, rows)
    create_table(spark, cfg, TABLES["hosts"])
    spark.createDataFrame([
        {"host": "http://a.test", "trap": False, "signals_read_at": NOW},
        {"host": "http://b.test", "trap": False, "signals_read_at": EARLIER},
    ], HOSTS).write.format("delta").mode("append").save(cfg.table_path("hosts"))
    counts = _schedule(spark, cfg)
    after = _rows(spark, cfg)
    assert counts["requoted"] == 1
    assert after["http://a.test/quiet"]["change_rate"] == pytest.approx(
        lm_rate(1.0, 35.0, prior, days, visits=1))
    assert after["http://a.test/quiet"]["change_rate"] < 0.2
    assert after["http://a.test/quiet"]["lm_exposure_d"] == 5.0  # the span is never stored
    for url in ("http://a.test/moved", "http://b.test/quiet"):
        assert after[url]["change_rate"] == 0.2
    assert after["http://a.test/steady"]["change_rate"] == pytest.approx(steady_rate)
    assert _schedule(spark, cfg).get("requoted", 0) == 0


def test_last_modified_rate_in_sql_equals_page_rate(spark):
    """The requote pass estimates in SQL (recrawl.rules.changerate.lm_rate_sql over the history's mean
    interval and visit count) what `page_rate` estimates in Python, on every shape of input:
    no history, an empty one, one with unusable entries, no changes, no exposure."""
    from recrawl.rules.changerate import history_mean_interval_sql, history_visits_sql, lm_rate_sql
    from recrawl.store.schemas import HISTORY
    from spark_jobs.schedule import page_rate

    prior = GammaPrior(0.1, 2.0)
    histories = [None, [], [(2.0, True), (1.0, False)], [(0.5, True), (None, True), (7.0, None)],
                 [(30.0, False)] * 5]
    cases = [(h, c, e) for h in histories for c in (None, 0.0, 3.0) for e in (None, 0.0, 0.4, 40.0)]
    rows = [([{"interval_d": t, "changed": ch} for t, ch in h] if h is not None else None, c, e)
            for h, c, e in cases]
    df = spark.createDataFrame(rows, f"h {HISTORY.simpleString()}, c double, e double")
    sql = lm_rate_sql("c", "e", history_mean_interval_sql("h", 1.5), history_visits_sql("h"), prior)
    got = [r[0] for r in df.selectExpr(sql).collect()]
    want = [page_rate(h, c, e, True, prior, 1.5) if e is not None else None for h, c, e in cases]
    for g, w, case in zip(got, want, cases, strict=True):
        if w is not None:  # page_rate needs an exposure to take the last-modified branch
            assert g == pytest.approx(w, rel=1e-9), case


@pytest.mark.parametrize("rows", [None, 10**6], ids=["merge", "one-pass"])
def test_schedule_write_by_merge_or_one_pass_rewrite_gives_the_same_crawldb(spark, cfg, rows):
    """set_schedule MERGEs a plan smaller than crawldb's file count and rewrites the table in
    one pass otherwise: either way only planned rows not yet scheduled by the round move, a URL
    crawldb lacks is not added, every other column stays, and the whole is one commit."""
    from recrawl.store.crawldb import set_schedule

    _crawldb(spark, cfg, ROWS + [_row("http://a.test/again", SLOW, False, scheduled_round=ROUND,
                                      change_rate=0.25)])
    before = _rows(spark, cfg)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{cfg.table_path('crawldb')}`").first()["version"]
    later = NOW + dt.timedelta(days=9)
    plan = spark.createDataFrame(
        [(u, 0.7, 9 * DAY, later) for u in ("http://a.test/fast", "http://a.test/new",
                                            "http://a.test/again", "http://b.test/unknown")],
        "url string, change_rate double, fetch_interval_s long, next_fetch_time timestamp")
    set_schedule(spark, cfg, plan, ROUND, rows=rows)
    after = _rows(spark, cfg)

    assert set(after) == set(before)  # nothing added, nothing lost
    for url, row in after.items():
        if url in ("http://a.test/fast", "http://a.test/new"):
            assert (row["change_rate"], row["fetch_interval_s"], row["next_fetch_time"],
                    row["scheduled_round"]) == (0.7, 9 * DAY, later, ROUND)
            moved = {"change_rate", "fetch_interval_s", "next_fetch_time", "scheduled_round"}
            assert {k: v for k, v in row.items() if k not in moved} == \
                {k: v for k, v in before[url].items() if k not in moved}
        else:  # not planned, or already scheduled by this round (a re-run)
            assert row == before[url], url
    history = spark.sql(f"DESCRIBE HISTORY delta.`{cfg.table_path('crawldb')}`").collect()
    assert history[0]["version"] == version + 1  # one commit
    assert history[0]["operation"] == ("MERGE" if rows is None else "WRITE")
