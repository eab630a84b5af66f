"""Change-signal rules (recrawl/rules/signal_trust.py) and the last-modified estimator: the Python
rules on hand-worked cases, and their SQL twins equal to them in Spark."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from recrawl.rules.changerate import GammaPrior, lm_rate
from recrawl.rules.signal_trust import (
    TrustRule,
    beta_mean,
    change_gain,
    change_gain_sql,
    check_outcome,
    check_outcome_sql,
    choose_reads,
    decayed,
    deferred_sql,
    host_trust,
    host_trust_sql,
    http_date_sql,
    is_deferred,
    is_future,
    lm_trusted,
    lm_trusted_sql,
    next_read_at,
    policy_budget,
    signalled_changed,
    signalled_changed_sql,
)

T0 = dt.datetime(2026, 11, 10)
DAY = 86400


@pytest.mark.parametrize("signal,precision,last_fetch,expected", [
    (None, None, T0, None),                                   # no signal
    (T0, DAY, None, None),                                    # never fetched: no copy
    (T0 - dt.timedelta(days=1), DAY, T0, False),              # a date before our copy's day
    (T0, DAY, T0, True),                                      # the day we fetched: may be after
    (T0 - dt.timedelta(hours=2), 1, T0, False),               # exact time before our fetch
    (T0 + dt.timedelta(hours=2), 1, T0, True),                # exact time after
    (T0 + dt.timedelta(days=5), DAY, T0 - dt.timedelta(days=1), None),  # in the future: a lie
])
def test_signalled_changed(signal, precision, last_fetch, expected):
    assert signalled_changed(signal, precision, last_fetch, T0 + dt.timedelta(days=1), 1.0) is expected


def test_future_dates_beyond_the_tolerance_only():
    as_of = T0
    assert not is_future(T0 + dt.timedelta(hours=23), as_of, 1.0)
    assert is_future(T0 + dt.timedelta(hours=25), as_of, 1.0)
    assert not is_future(None, as_of, 1.0)


def test_change_gain_is_the_expected_fresh_share_of_the_next_day():
    assert change_gain(0.0) == 1.0 and change_gain(None) == 1.0
    assert change_gain(1.0) == pytest.approx(1 - math.exp(-1))
    assert change_gain(5.0) == pytest.approx(0.2, abs=0.002)
    assert change_gain(1 / 7) > 0.9


@pytest.mark.parametrize("budget,cost,followed,unfollowed,expected", [
    (36.0, 5.0, 100, 100, 31.0),   # the chases cost less than the followed pages' half
    (36.0, 30.0, 100, 100, 18.0),  # they would take more: the others keep their share
    (36.0, 40.0, 177, 23, 4.14),   # the honest web of docs/freshness.md: 23 unlisted pages
    (36.0, 40.0, 200, 0, 0.0),     # every page followed: nothing left to plan
    (36.0, 0.0, 0, 0, 36.0),       # nothing fetched yet
    (36.0, -2.0, 10, 10, 36.0),    # a negative cost is no cost
    (0.0, 3.0, 10, 10, 0.0),       # no revisit budget at all
])
def test_policy_budget_keeps_the_unfollowed_pages_share(budget, cost, followed, unfollowed,
                                                        expected):
    assert policy_budget(budget, cost, followed, unfollowed) == pytest.approx(expected)


@pytest.mark.parametrize("signalled,changed,listed,future,expected", [
    (True, True, True, False, "tp"),
    (True, False, True, False, "fp"),
    (False, True, True, False, "fn"),
    (False, False, True, False, "tn"),
    (None, True, True, False, "fn"),     # the host publishes signals, this URL has none
    (None, False, True, False, "tn"),
    (None, True, False, False, None),    # the host publishes nothing: nothing to learn
    (True, None, True, False, None),     # no previous copy to compare with
    (None, False, True, True, "fp"),     # a date in the future is a lie whatever happened
])
def test_check_outcome(signalled, changed, listed, future, expected):
    assert check_outcome(signalled, changed, listed, future) == expected


def test_trust_is_earned_lost_and_regained():
    rule = TrustRule()
    assert not host_trust(0, 0, 0, rule).trusted  # no evidence: not trusted
    honest = host_trust(2, 0, 0, rule)
    assert honest.trusted and not honest.defer  # recall needs min_evidence changed checks
    assert host_trust(3, 0, 0, rule).defer
    assert not host_trust(3, 0, 1, rule).defer  # recall 0.67
    liar = host_trust(0.5, 4, 0, rule)  # "always today": most signalled pages unchanged
    assert not liar.trusted and liar.precision < 0.4
    frozen = host_trust(0, 0, 4, rule)  # never moves: every change missed
    assert not frozen.trusted and not frozen.defer and frozen.recall < 0.3
    # a liar that turns honest: its old false positives fade by the decay
    fp, tp = 4.0, 0.0
    for _ in range(10):
        fp, tp = decayed(fp, 0, rule.decay), decayed(tp, 1, rule.decay)
    assert host_trust(tp, fp, 0, rule).trusted
    assert beta_mean(0, 0) == 0.5


def test_lm_trust_needs_agreement_and_evidence():
    rule = TrustRule()
    assert lm_trusted(0, 0, rule) and lm_trusted(1, 1, rule)  # believed until evidence
    assert lm_trusted(4, 0, rule) and lm_trusted(9, 1, rule)  # a rare trivial edit forgiven
    assert not lm_trusted(4, 3, rule) and not lm_trusted(0, 3, rule)


def test_rule_refuses_bad_thresholds():
    with pytest.raises(ValueError, match="trust_decay"):
        TrustRule(decay=0)
    with pytest.raises(ValueError, match="min_precision"):
        TrustRule(min_precision=1.5)


def test_lm_rate_uses_the_age_of_the_copy():
    prior = GammaPrior(0.1, 2.0)
    # one visit, no change seen: the older the copy, the slower the page
    ages = [0.2, 1.0, 7.0, 30.0, 300.0]
    rates = [lm_rate(0, a, prior, 5.0) for a in ages]
    assert rates == sorted(rates, reverse=True)
    assert rates[-1] < 0.004  # a page unchanged for 300 days
    # many observations: the MLE changes / exposure, the prior forgotten
    assert lm_rate(50, 10.0, prior, 0.2) == pytest.approx(5.0, rel=0.05)
    assert lm_rate(3, 30.0, None) == pytest.approx(0.1)
    assert lm_rate(0, 0.0, None) == 0.0


def test_lm_rate_weighs_the_prior_by_what_a_visit_tells():
    # a page changing 5 times a day, visited every 2.5 days: each of 5 revisits found a change
    # ~0.2 days old (exposure 1.2 days with the first fetch's). Weighed as two 2.5-day visits
    # the prior held it near 1/day; weighed as two visits of what these visits told, the
    # evidence ranks it well above a page changing once a day visited as often.
    prior = GammaPrior(0.1, 2.0)
    fast = lm_rate(5, 1.2, prior, 2.5, visits=6)
    daily = lm_rate(4.6, 5.6, prior, 2.5, visits=6)
    assert fast > 2.5 > daily > 0.6
    assert lm_rate(5, 1.2, prior, 2.5) < 1.2  # the old weighting, for the record
    # a slow page's visits each bring their whole interval: the weighting is unchanged
    assert lm_rate(0, 342.0, prior, 14.0, visits=3) == lm_rate(0, 342.0, prior, 14.0)


@pytest.mark.spark
def test_sql_twins_agree_with_python(spark):
    rule = TrustRule()
    as_of = T0 + dt.timedelta(days=1)
    cases = []
    for signal in (None, T0 - dt.timedelta(days=1), T0, T0 + dt.timedelta(hours=3),
                   T0 + dt.timedelta(days=4)):
        for precision in (1, DAY):
            for last in (None, T0, T0 - dt.timedelta(days=2)):
                cases.append((signal, precision, last))
    df = spark.createDataFrame(
        cases, "signal_time timestamp, signal_precision_s long, last_fetch_time timestamp")
    lit = f"timestamp'{as_of.isoformat(sep=' ')}'"
    got = [r[0] for r in df.selectExpr(signalled_changed_sql(lit, 1.0)).collect()]
    want = [signalled_changed(s, p, la, as_of, 1.0) for s, p, la in cases]
    assert got == want

    rates = [0.0, 0.01, 1.0, 5.0, None]
    gains = [r[0] for r in spark.createDataFrame([(r,) for r in rates], "r double")
             .selectExpr(change_gain_sql("r")).collect()]
    assert gains == pytest.approx([change_gain(r) for r in rates])

    outcomes = [(s, c, li, f) for s in (True, False, None) for c in (True, False, None)
                for li in (True, False) for f in (True, False)]
    odf = spark.createDataFrame(outcomes, "s boolean, c boolean, l boolean, f boolean")
    got = [r[0] for r in odf.selectExpr(check_outcome_sql("s", "c", "l", "f")).collect()]
    assert got == [check_outcome(*o) for o in outcomes]

    counts = [(0.0, 0.0, 0.0), (3.0, 0.0, 0.0), (3.0, 0.0, 0.5), (0.5, 4.0, 0.0), (0.0, 0.0, 4.0)]
    sql = host_trust_sql(rule, "tp", "fp", "fn")
    tdf = spark.createDataFrame(counts, "tp double, fp double, fn double")
    for row, (tp, fp, fn) in zip(tdf.selectExpr(sql["precision"], sql["recall"], sql["trusted"],
                                                sql["defer"]).collect(), counts, strict=True):
        t = host_trust(tp, fp, fn, rule)
        assert tuple(row) == (pytest.approx(t.precision), pytest.approx(t.recall), t.trusted,
                              t.defer)

    lm_cases = [(0.0, 0.0), (2.0, 0.0), (0.0, 1.0), (4.0, 0.0), (4.0, 3.0), (9.0, 1.0), (0.0, 3.0)]
    ldf = spark.createDataFrame(lm_cases, "a double, d double")
    assert [r[0] for r in ldf.selectExpr(lm_trusted_sql(rule, "a", "d")).collect()] == [
        lm_trusted(a, d, rule) for a, d in lm_cases]

    # the deferral: every combination of status, trust, read time, signal and copy age
    now = T0 + dt.timedelta(days=40)
    dcases = [(st, d, read, sig, prec, last)
              for st in ("fetched", "unfetched", "gone") for d in (True, False, None)
              for read in (None, now - dt.timedelta(hours=1), now - dt.timedelta(days=2))
              for sig, prec in ((None, None), (T0, DAY), (now, 1))
              for last in (None, now - dt.timedelta(days=3), now - dt.timedelta(days=31))]
    ddf = spark.createDataFrame(dcases, "status string, signal_defer boolean, "
                                "signals_read_at timestamp, signal_time timestamp, "
                                "signal_precision_s long, last_fetch_time timestamp")
    lit_now = f"timestamp'{now.isoformat(sep=' ')}'"
    got = [r[0] for r in ddf.selectExpr(deferred_sql(lit_now, 1.0, 30.0, 1.0)).collect()]
    want = [is_deferred(st, d, read, signalled_changed(sig, prec, last, now, 1.0), last, now,
                        1.0, 30.0) for st, d, read, sig, prec, last in dcases]
    assert got == want and any(want) and not all(want)

    dates = spark.createDataFrame([("Sun, 06 Nov 1994 08:49:37 GMT",), ("Wed, 1 Jan 2026 00:00:00 GMT",),
                                   ("yesterday",), (None,)], "d string")
    assert [r[0] for r in dates.selectExpr(http_date_sql("d")).collect()] == [
        dt.datetime(1994, 11, 6, 8, 49, 37), dt.datetime(2026, 1, 1), None, None]


READS = {"read_interval_days": 1.0, "undated_read_interval_days": 7.0,
         "untrusted_read_interval_days": 3.0}


@pytest.mark.parametrize(("kind", "answered", "entries", "dated", "distrusted", "redundant",
                          "days"), [
    ("sitemap", True, 40, 40, False, False, 1.0),  # dated: every round
    ("sitemap", True, 40, 0, False, False, 7.0),  # no dates: only for its new URLs
    ("sitemap", False, None, None, False, False, 1.0),  # no answer: try again next round
    ("sitemap", True, 40, 40, True, False, 3.0),  # lying host: enough reads to regain trust
    ("sitemap", True, 40, 40, False, True, 1.0),  # the sitemap itself is never redundant
    ("feed", True, 10, 10, False, False, 1.0),
    ("feed", True, 10, 10, False, True, 7.0),  # the dated sitemap proved recall: seldom
    ("feed", False, None, None, False, True, 7.0),
    ("feed", True, 10, 0, False, False, 7.0),
    ("feed", True, 0, 0, False, False, 1.0),  # an empty answer says nothing of dates
])
def test_next_read_at(kind, answered, entries, dated, distrusted, redundant, days):
    got = next_read_at(T0, READS, kind, answered=answered, entries=entries, dated=dated,
                       distrusted=distrusted, feed_redundant=redundant)
    assert got == T0 + dt.timedelta(days=days)


def _src(host: str, kind: str, name: str, next_read: dt.datetime | None = None) -> dict:
    return {"host": host, "kind": kind, "source_url": f"{host}/{name}", "next_read_at": next_read}


def test_reads_spread_over_hosts_longest_overdue_first_within_the_round_cap():
    a1 = _src("a", "sitemap", "s1.xml", T0 - dt.timedelta(days=3))
    a2 = _src("a", "sitemap", "s2.xml", T0 - dt.timedelta(days=9))
    af = _src("a", "feed", "feed.xml")  # never read: most overdue, but a feed
    b1 = _src("b", "sitemap", "s.xml", T0 - dt.timedelta(days=1))
    c1 = _src("c", "sitemap", "s.xml")  # never read
    due = [a1, a2, af, b1, c1]
    # every host's first source (sitemaps first, the longest overdue) before any second; among
    # firsts the never-read, then the longest overdue
    assert choose_reads(due, per_host=3, round_cap=3) == [c1, a2, b1]
    assert choose_reads(due, per_host=3, round_cap=4) == [c1, a2, b1, a1]
    assert choose_reads(due, per_host=3, round_cap=10) == [c1, a2, b1, a1, af]
    assert choose_reads(due, per_host=1, round_cap=10) == [c1, a2, b1]
    assert choose_reads(due, per_host=3, round_cap=0) == []
    # a trusted host's sources are all read (per_host still holds); the cap is the others'
    assert choose_reads(due, per_host=3, round_cap=1, trusted={"a"}) == [a2, a1, af, c1]
    assert choose_reads(due, per_host=2, round_cap=0, trusted={"a", "b"}) == [a2, a1, b1]
    with pytest.raises(ValueError):
        choose_reads(due, per_host=-1, round_cap=1)
