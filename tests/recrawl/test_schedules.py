"""Revisit policies: Nutch fixed / adaptive, and Cho & Garcia-Molina's optimal allocation."""

from __future__ import annotations

import math
import random

import duckdb
import numpy as np
import pytest

from recrawl.rules.allocation import (
    freshness,
    rate_weight_bucket,
)
from recrawl.rules.schedules import (
    AdaptiveSchedule,
    ChangeRateOptimalSchedule,
    FixedSchedule,
    PageState,
    RetryIntervals,
    ScheduleContext,
    interval_seconds,
    make_schedule,
    next_fetch_after,
    next_fetch_after_sql,
)

WIDE = {"min_interval_days": 1e-4, "max_interval_days": 1e7}


def objective(rates, weights, freqs) -> float:
    """Weighted expected freshness sum_i w_i F(lam_i, f_i)."""
    return sum(w * freshness(r, f) for r, w, f in zip(rates, weights, freqs, strict=True))


def random_pages(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rates = np.exp(rng.uniform(math.log(0.01), math.log(3.0), n))
    weights = 1.0 / (1.0 + rng.permutation(n)) ** 0.8  # Zipf-like importance
    return rates, weights


# --- fixed / adaptive --------------------------------------------------------------------------


def test_fixed_schedule():
    s = FixedSchedule(interval_days=3.0)
    assert s.next_interval(PageState(interval_days=10.0, changed=True)) == 3.0
    assert FixedSchedule(default_interval_days=2.0).next_interval(PageState()) == 2.0
    assert (
        FixedSchedule(interval_days=90.0, max_interval_days=30.0).next_interval(PageState()) == 30.0
    )


def test_adaptive_follows_nutch():
    s = AdaptiveSchedule(min_interval_days=0.5, max_interval_days=10.0)
    assert s.next_interval(PageState(interval_days=2.0, changed=True)) == pytest.approx(1.6)
    assert s.next_interval(PageState(interval_days=2.0, changed=False)) == pytest.approx(2.8)
    assert s.next_interval(PageState(interval_days=2.0, changed=None)) == 2.0  # unknown
    assert s.next_interval(PageState(interval_days=0.0, changed=False)) == pytest.approx(1.4)
    assert s.next_interval(PageState(interval_days=0.55, changed=True)) == 0.5  # clamped
    assert s.next_interval(PageState(interval_days=9.0, changed=False)) == 10.0


def test_adaptive_converges_towards_the_change_period():
    # a page that changes every 6 days: the interval oscillates around a few days
    s = AdaptiveSchedule(min_interval_days=0.25, max_interval_days=60.0)
    t, interval, last_change, last_fetch = 0.0, 1.0, 0.0, 0.0
    seen = []
    while t < 600:
        t += interval
        changed = math.floor(t / 6.0) > math.floor(last_fetch / 6.0)
        last_fetch = t
        interval = s.next_interval(PageState(interval_days=interval, changed=changed))
        seen.append(interval)
        last_change = t if changed else last_change
    tail = seen[len(seen) // 2 :]
    assert 2.0 < sum(tail) / len(tail) < 12.0


@pytest.mark.parametrize(
    "kw",
    [
        {"inc_rate": -0.1},
        {"dec_rate": 1.0},
        {"min_interval_days": 0.0},
        {"min_interval_days": 5.0, "max_interval_days": 1.0},
    ],
)
def test_invalid_parameters(kw):
    with pytest.raises(ValueError):
        AdaptiveSchedule(**kw)


# --- optimal allocation ------------------------------------------------------------------------


def test_cho_garcia_molina_five_page_example():
    """SIGMOD 2000 example: rates 1..5 changes/day, 5 fetches/day, equal weights."""
    s = ChangeRateOptimalSchedule(**WIDE)
    a = s.solve([1, 2, 3, 4, 5], [1, 1, 1, 1, 1], None, 5.0)
    assert a.freqs[:4] == pytest.approx([1.15, 1.36, 1.35, 1.14], abs=0.005)
    assert a.freqs[4] == pytest.approx(1e-7)  # the fastest page is not refreshed (max bound)
    assert a.used_budget == pytest.approx(5.0, rel=1e-6)


def test_allocation_meets_budget_and_kkt():
    rates, weights = random_pages(2000, 1)
    s = ChangeRateOptimalSchedule(min_interval_days=0.25, max_interval_days=30.0)
    budget = 2000 / 4.0
    a = s.solve(rates, weights, None, budget)
    assert a.used_budget == pytest.approx(budget, rel=1e-6)
    fmin, fmax = 1 / 30.0, 4.0
    assert np.all(a.freqs >= fmin - 1e-12) and np.all(a.freqs <= fmax + 1e-12)
    interior = (a.freqs > fmin * 1.0001) & (a.freqs < fmax * 0.9999)
    assert interior.sum() > 100
    r = rates[interior] / a.freqs[interior]
    marginal = weights[interior] * (1 - (1 + r) * np.exp(-r)) / rates[interior]
    assert marginal == pytest.approx(np.full(marginal.shape, a.mu), rel=1e-6)
    # at the lower bound the marginal value is below mu, at the upper bound above it
    low = a.freqs <= fmin * 1.0001
    r_low = rates[low] / fmin
    assert np.all(weights[low] * (1 - (1 + r_low) * np.exp(-r_low)) / rates[low] <= a.mu * 1.001)


def test_allocation_is_locally_optimal():
    rates, weights = random_pages(300, 2)
    s = ChangeRateOptimalSchedule(**WIDE)
    a = s.solve(rates, weights, None, 60.0)
    best = objective(rates, weights, a.freqs)
    rng = random.Random(0)
    for _ in range(200):  # move budget between two pages: never better
        i, j = rng.sample(range(300), 2)
        delta = 0.05 * min(a.freqs[i], a.freqs[j]) + 1e-6
        f = a.freqs.copy()
        f[i] += delta
        f[j] -= delta
        if f[j] > 0:
            assert objective(rates, weights, f) <= best + 1e-9


def test_optimal_beats_uniform_and_proportional():
    """Cho & Garcia-Molina: uniform beats proportional; the optimum beats both.

    For rates spread over 2.5 decades the optimum is only ~5 % above uniform: the gain from
    knowing rates alone is modest, the large gains come with importance weights.
    """
    rates, _ = random_pages(1000, 3)
    ones = np.ones_like(rates)
    budget = 200.0
    s = ChangeRateOptimalSchedule(**WIDE)
    opt = objective(rates, ones, s.solve(rates, ones, None, budget).freqs)
    uniform = objective(rates, ones, np.full_like(rates, budget / rates.size))
    proportional = objective(rates, ones, rates * budget / rates.sum())
    assert opt > uniform > proportional
    assert opt > 1.03 * uniform


def test_pages_that_never_change_get_the_maximum_interval():
    s = ChangeRateOptimalSchedule(min_interval_days=0.5, max_interval_days=20.0)
    got = s.allocate([("static", 0.0, 5.0), ("a", 0.2, 1.0), ("b", 1.0, 1.0)], 1.0)
    assert got["static"] == 20.0
    assert got["a"] < 20.0


def test_budget_extremes():
    s = ChangeRateOptimalSchedule(min_interval_days=0.5, max_interval_days=20.0)
    pages = [("a", 0.2, 1.0), ("b", 1.0, 1.0), ("c", 0.0, 1.0)]
    assert s.allocate(pages, 0.01) == {"a": 20.0, "b": 20.0, "c": 20.0}  # below 3 / 20
    assert s.allocate(pages, 100.0) == {"a": 0.5, "b": 0.5, "c": 20.0}  # all fit at the min
    with pytest.raises(ValueError):
        s.allocate(pages)  # no budget configured nor given
    assert s.solve([], [], None, 1.0).freqs.size == 0


def test_missing_rate_and_weight_use_defaults():
    s = ChangeRateOptimalSchedule(daily_budget=1.0, default_rate=0.3, default_weight=1.0)
    got = s.allocate([("x", None, None), ("y", 0.3, 1.0)])
    assert got["x"] == pytest.approx(got["y"])


def test_next_interval_with_mu_reproduces_the_batch_solution():
    rates, weights = random_pages(500, 4)
    s = ChangeRateOptimalSchedule(daily_budget=100.0)
    pages = list(zip(range(500), rates, weights, strict=True))
    batch = s.allocate(pages)
    mu = s.solve_multiplier([(k, r, w, 1) for k, r, w in pages])
    ctx = ScheduleContext(mu=mu)
    for k, r, w in pages[:100]:
        page = PageState(change_rate=float(r), score=float(w))
        assert s.next_interval(page, ctx) == pytest.approx(batch[k], rel=1e-6)
    with pytest.raises(ValueError, match="needs mu"):
        s.next_interval(PageState(change_rate=0.1))


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_change_chance_floor_caps_revisits_and_spends_the_rest(p):
    """With the floor no revisit is planned before a page's chance of change reaches p (the
    maximum interval excepted); the budget those pages leave goes to the others, the problem
    stays optimal under its new box constraints, and the unchanged fetches fall."""
    rates, weights = random_pages(1000, 5)
    free = ChangeRateOptimalSchedule(min_interval_days=0.25, max_interval_days=30.0)
    floored = ChangeRateOptimalSchedule(min_interval_days=0.25, max_interval_days=30.0,
                                        min_change_probability=p)
    budget = 150.0
    a, b = free.solve(rates, weights, None, budget), floored.solve(rates, weights, None, budget)
    assert b.used_budget == pytest.approx(budget, rel=1e-6)
    chance = -np.expm1(-rates / b.freqs)
    at_max = b.freqs <= 1 / 30.0 * 1.0001
    assert np.all(chance[~at_max] >= p - 1e-9)
    assert (-np.expm1(-rates / a.freqs) < p).sum() > 50  # the floor had work to do
    # the pages it capped gave fetches to the others: mu fell
    assert b.mu < a.mu
    unchanged = float(np.sum(b.freqs * np.exp(-rates / b.freqs)))
    assert unchanged < float(np.sum(a.freqs * np.exp(-rates / a.freqs)))
    # optimal within the new bounds: moving budget between two interior pages never helps
    top = np.minimum(4.0, rates / -math.log1p(-p))
    inner = np.flatnonzero((b.freqs > 1 / 30.0 * 1.0001) & (b.freqs < top * 0.9999))
    best = objective(rates, weights, b.freqs)
    rng = random.Random(1)
    for _ in range(100):
        i, j = rng.sample(list(inner), 2)
        f = b.freqs.copy()
        d = 0.02 * min(f[i], f[j])
        f[i] += d
        f[j] -= d
        if f[i] <= top[i]:
            assert objective(rates, weights, f) <= best + 1e-9
    # the per-page path (a Spark UDF's) gives the batch answer at the same mu
    ctx = ScheduleContext(mu=b.mu)
    for k in range(0, 1000, 37):
        page = PageState(change_rate=float(rates[k]), score=float(weights[k]))
        assert 1.0 / floored.next_interval(page, ctx) == pytest.approx(b.freqs[k], rel=1e-6)


def test_change_chance_floor_under_spends_when_every_page_is_capped():
    s = ChangeRateOptimalSchedule(min_interval_days=0.25, max_interval_days=30.0,
                                  min_change_probability=0.5)
    a = s.solve([0.1, 1.0], [1.0, 1.0], None, 100.0)
    assert a.mu == 0.0
    assert 1 - math.exp(-0.1 / a.freqs[0]) == pytest.approx(0.5)
    assert a.used_budget < 2.0  # far below the 100 offered: the rest is not spent
    with pytest.raises(ValueError, match="min_change_probability"):
        ChangeRateOptimalSchedule(min_change_probability=1.0)


def test_buckets_equal_expanded_pages():
    s = ChangeRateOptimalSchedule(daily_budget=30.0)
    buckets = [("b1", 0.05, 1.0, 50), ("b2", 0.5, 2.0, 20), ("b3", 2.0, 0.5, 30)]
    by_bucket = s.allocate_buckets(buckets)
    pages = [(f"{b}-{i}", r, w) for b, r, w, n in buckets for i in range(n)]
    by_page = s.allocate(pages)
    for b, *_ in buckets:
        assert by_page[f"{b}-0"] == pytest.approx(by_bucket[b], rel=1e-6)
    used = sum(n / by_bucket[b] for b, _, _, n in buckets)
    assert used == pytest.approx(30.0, rel=1e-6)


def test_bucket_solution_is_close_to_the_exact_one():
    """Solving mu on a quantized (rate, weight) histogram loses < 1 % of optimal freshness."""
    rates, weights = random_pages(20000, 5)
    s = ChangeRateOptimalSchedule(daily_budget=4000.0)
    exact = s.solve(rates, weights)
    groups: dict[int, list[int]] = {}
    for i, (r, w) in enumerate(zip(rates, weights, strict=True)):
        groups.setdefault(rate_weight_bucket(r, w), []).append(i)
    assert len(groups) < 2000
    buckets = [
        (b, float(rates[ix].mean()), float(weights[ix].mean()), len(ix)) for b, ix in groups.items()
    ]
    mu = s.solve_multiplier(buckets)
    ctx = ScheduleContext(mu=mu)
    freqs = np.array(
        [
            1.0 / s.next_interval(PageState(change_rate=r, score=w), ctx)
            for r, w in zip(rates, weights, strict=True)
        ]
    )
    assert freqs.sum() == pytest.approx(4000.0, rel=0.02)
    assert objective(rates, weights, freqs) >= 0.99 * objective(rates, weights, exact.freqs)


def test_allocate_is_fast_for_many_pages(monkeypatch):
    """What keeps 100,000 pages cheap (~0.5 s on a laptop core; timing is for benchmarks): the
    budget is solved with a handful of evaluations, each one array operation over all pages,
    never a per-page solve."""
    import recrawl.rules.schedules as schedules

    kernel_calls, evaluations = [], []
    real_kernel, real_root = schedules.h_inverse_vec, schedules.find_root_log

    def kernel(y, polish=0):
        kernel_calls.append(np.size(y))
        return real_kernel(y, polish)

    def root(fn, *args, **kwargs):
        def counted(mu):
            evaluations.append(mu)
            return fn(mu)
        return real_root(counted, *args, **kwargs)

    def per_page(*args):
        raise AssertionError("a per-page solve")

    monkeypatch.setattr(schedules, "h_inverse_vec", kernel)
    monkeypatch.setattr(schedules, "find_root_log", root)
    monkeypatch.setattr(schedules, "optimal_frequency", per_page)
    rates, weights = random_pages(100_000, 6)
    s = ChangeRateOptimalSchedule(daily_budget=20_000.0)
    got = s.allocate(list(zip(range(rates.size), rates, weights, strict=True)))
    assert len(got) == 100_000
    assert sum(1.0 / d for d in got.values()) == pytest.approx(20_000.0, rel=1e-6)
    assert 0 < len(evaluations) <= 40  # bisection alone would need about 40
    # one call per evaluation (and one for the answer), over every page at once
    assert len(kernel_calls) <= len(evaluations) + 1 and max(kernel_calls) == 100_000


# --- factory -----------------------------------------------------------------------------------


def test_make_schedule():
    assert isinstance(make_schedule("fixed", interval_days=2.0), FixedSchedule)
    assert isinstance(make_schedule("Adaptive", inc_rate=0.3), AdaptiveSchedule)
    opt = make_schedule("optimal", daily_budget=10.0, max_interval_days=7.0)
    assert isinstance(opt, ChangeRateOptimalSchedule) and opt.daily_budget == 10.0
    assert isinstance(make_schedule("change_rate"), ChangeRateOptimalSchedule)
    assert isinstance(make_schedule("default"), FixedSchedule)


def test_make_schedule_accepts_the_config_section():
    section = {
        "policy": "adaptive",
        "default_interval_days": 1.0,
        "min_interval_days": 0.25,
        "max_interval_days": 30.0,
        "daily_budget": 10000,
    }
    s = make_schedule(section["policy"], **section)
    assert isinstance(s, AdaptiveSchedule) and s.max_interval_days == 30.0


def test_make_schedule_errors():
    with pytest.raises(ValueError, match="unknown schedule policy 'weekly'.*valid: adaptive"):
        make_schedule("weekly")
    with pytest.raises(ValueError, match="unknown parameter.*inc_rat"):
        make_schedule("adaptive", inc_rat=0.1)


def test_interval_seconds():
    assert interval_seconds(1.0) == 86400
    assert interval_seconds(0.25) == 21600


def test_freshness_benchmark_smoke(capsys, monkeypatch):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "freshness.py"
    spec = importlib.util.spec_from_file_location("freshness_bench", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "freshness_bench", mod)  # dataclasses look it up
    spec.loader.exec_module(mod)
    assert mod.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert mod.spearman([1, 2, 2, 3], [3, 2, 2, 1]) == pytest.approx(-1.0)
    assert mod.main(["--pages", "150", "--days", "16", "--budget", "30", "--warmup", "4"]) == 0
    out = capsys.readouterr().out
    assert "fixed (Nutch default)" in out and "optimal, est. rates" in out


# --- discovery vs revisits --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slots", "share", "frontier", "want"),
    [
        (1000, 0.2, 4544, 200),  # the issue #16 case: a fifth of the round for the frontier
        (1000, 0.2, 50, 50),     # never more than the frontier holds
        (1000, 0.2, 0, 0),       # an exhausted frontier reserves nothing
        (10, 0.25, 100, 3),      # rounded up: a share > 0 always reserves a slot
        (5, 0.2, 100, 1),
        (1000, 0.0, 100, 0),
        (1000, 1.0, 100, 100),
        (0, 0.5, 100, 0),
    ],
)
def test_discovery_slots(slots, share, frontier, want):
    from recrawl.rules.schedules import discovery_slots

    assert discovery_slots(slots, share, frontier) == want


def test_revisit_budget_is_what_discovery_leaves():
    from recrawl.rules.schedules import revisit_budget

    assert revisit_budget(1000, 0.2, 4544) == 800
    assert revisit_budget(1000, 0.2, 30) == 970
    assert revisit_budget(1000, 0.2, 0) == 1000  # frontier exhausted: all to revisits
    assert revisit_budget(2.5, 0.5, 10) == 0.5
    # with the held pages counted: their share of the known pages, floored at min_revisit_share
    assert revisit_budget(1000, 0.2, 4544, held=873, min_revisit_share=0.0) == pytest.approx(
        1000 * 873 / 5417)
    assert revisit_budget(1000, 0.2, 4544, held=873, min_revisit_share=0.5) == 500
    assert revisit_budget(1000, 0.2, 30, held=5000, min_revisit_share=0.5) == 970
    assert revisit_budget(1000, 0.2, 0, held=5000, min_revisit_share=0.5) == 1000


@pytest.mark.parametrize("share", [-0.1, 1.01, float("nan")])
def test_discovery_share_out_of_range_is_an_error(share):
    from recrawl.rules.schedules import discovery_slots

    with pytest.raises(ValueError, match="discovery share"):
        discovery_slots(10, share, 10)


def test_change_probability_is_poisson_with_the_prior_for_unknown_rates():
    from recrawl.rules.schedules import change_probability

    assert change_probability(1.0, 1.0, 0.1) == pytest.approx(1 - math.exp(-1.0))
    assert change_probability(None, 2.0, 0.1) == pytest.approx(1 - math.exp(-0.2))
    # no time since the fetch, or a clock that went backwards: nothing can have changed
    assert change_probability(5.0, 0.0, 0.1) == 0.0 and change_probability(5.0, -1.0, 0.1) == 0.0
    ages = [0.5, 1, 2, 4, 8]
    probs = [change_probability(0.3, a, 0.1) for a in ages]
    assert probs == sorted(probs) and all(0.0 < p < 1.0 for p in probs)


# --- the next fetch after a fetch (recrawl.rules.schedules.next_fetch_after) ----------------------

RETRY = RetryIntervals(gone_days=30.0, transient_days=1.0, denied_days=20.0)
# (status, fetch_interval_s) -> seconds to the next fetch
NEXT_FETCH_CASES = [
    ("fetched", 3 * 86400, 3 * 86400),
    ("not_modified", 7 * 86400, 7 * 86400),
    ("fetched", None, 5 * 86400),  # no interval yet: the default (5 days here)
    ("redirect", 86400, 86400),
    ("gone", 86400, 30 * 86400),
    ("too_large", 86400, 30 * 86400),
    ("filtered_type", None, 30 * 86400),
    ("timeout", 86400, 86400),
    ("http_error", 9 * 86400, 86400),
    ("robots_denied", 86400, 20 * 86400),
    ("retry_later", 86400, 0),  # deferred by politeness: due again at once
    ("skipped_budget", 86400, 0),
]


@pytest.mark.parametrize(("status", "interval_s", "want"), NEXT_FETCH_CASES)
def test_next_fetch_after_a_fetch(status, interval_s, want):
    assert next_fetch_after(status, interval_s, RETRY, 5.0) == want


@pytest.mark.spark
def test_next_fetch_after_sql_agrees(spark):
    df = spark.createDataFrame([(s, i) for s, i, _ in NEXT_FETCH_CASES],
                               "status string, interval_s long")
    got = [r["w"] for r in df.selectExpr(
        f"{next_fetch_after_sql('status', 'interval_s', RETRY, 5.0)} AS w").collect()]
    assert got == [w for _, _, w in NEXT_FETCH_CASES]


def test_retry_intervals_come_from_the_updatedb_section():
    from recrawl.config import load_config

    got = RetryIntervals.from_section(load_config(environ={}).section("updatedb"))
    assert got == RetryIntervals(30.0, 1.0, 30.0)


@pytest.mark.parametrize(("score", "mean", "want"), [
    (0.002, 0.001, 2.0),
    (None, 0.001, 1.0),  # unscored page: an average one
    (0.002, None, 1.0),  # a crawl without scores
    (0.0, 0.001, 1e-6),  # floored: no page is worth nothing
    (0.002, 0.0, 1.0),
])
def test_page_weight_and_its_sql_twin(score, mean, want):
    # one rule for the driver's histogram (SQL) and the per-page UDF (Python); the SQL once
    # gave an unscored page the floor (greatest skips NULLs) where the UDF gave it 1.0
    policy = ChangeRateOptimalSchedule()
    assert policy.page_weight(score, mean) == pytest.approx(want)
    got = duckdb.connect().execute(
        f"SELECT {policy.page_weight_sql('s', mean)} FROM (SELECT ?::DOUBLE AS s)", [score]
    ).fetchone()[0]
    assert got == pytest.approx(want)
