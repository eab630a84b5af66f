"""Poisson change-rate estimation (Cho & Garcia-Molina 2003) against closed forms and simulation."""

from __future__ import annotations

import math
import random
import types

import pytest

from recrawl.rules.changerate import (
    DEFAULT_MAX_RATE,
    DEFAULT_PRIOR,
    HISTORY_DDL,
    GammaPrior,
    estimate_from_history,
    estimate_rate,
    history_arrays,
    is_regular,
    likelihood_score,
    log_likelihood,
    mle_rate,
    raw_rate,
    regular_estimate,
    saturated_rate,
    update_history,
)


def simulate(lam: float, intervals: list[float], rng: random.Random) -> list[bool]:
    """Visit outcomes of a Poisson(lam) page: changed iff >= 1 event in the interval."""
    out = []
    for t in intervals:
        # draw event times explicitly rather than using 1 - exp(-lam t), to test the model
        clock, changed = rng.expovariate(lam), False
        while clock <= t:
            changed = True
            clock += rng.expovariate(lam)
        out.append(changed)
    return out


# --- closed forms ------------------------------------------------------------------------------


def test_regular_estimator_closed_forms():
    assert regular_estimate(10, 0, 1.0) == 0.0  # -log((n+0.5)/(n+0.5))
    assert regular_estimate(10, 10, 1.0) == pytest.approx(math.log(21))  # log((n+.5)/.5)
    assert regular_estimate(4, 4, 2.0) == pytest.approx(math.log(9) / 2)
    assert regular_estimate(10, 5, 2.0) == pytest.approx(-math.log(5.5 / 10.5) / 2)
    assert regular_estimate(0, 0, 1.0) == 0.0
    with pytest.raises(ValueError):
        regular_estimate(3, 4, 1.0)
    with pytest.raises(ValueError):
        regular_estimate(3, 1, 0.0)


def test_regular_history_without_change_is_prior_driven():
    n, interval = 6, 2.0
    raw = estimate_rate([interval] * n, [False] * n, prior=None)
    assert raw == 0.0
    # posterior = (alpha + 0) / (beta + T) with beta = strength * I, alpha = mean * beta
    p = DEFAULT_PRIOR
    want = p.mean * p.strength * interval / (p.strength * interval + n * interval)
    assert estimate_rate([interval] * n, [False] * n) == pytest.approx(want)
    assert want == pytest.approx(p.strength * p.mean / (p.strength + n))


def test_regular_history_all_changed_is_finite():
    n, interval = 8, 0.5
    assert estimate_rate([interval] * n, [True] * n, prior=None) == pytest.approx(
        math.log(2 * n + 1) / interval
    )
    assert saturated_rate(n, interval) == pytest.approx(math.log(17) / 0.5)
    assert saturated_rate(n, 1e-6) == DEFAULT_MAX_RATE


def test_regular_vs_irregular_choice():
    assert is_regular([1.0, 1.005, 0.999])
    assert not is_regular([1.0, 1.02])
    assert not is_regular([])
    # intervals within 1 %: the regular estimator with the mean interval is used
    ts, cs = [1.0, 1.004, 0.998, 1.0], [True, False, True, False]
    assert raw_rate(ts, cs) == pytest.approx(regular_estimate(4, 2, sum(ts) / 4))
    ts2 = [1.0, 3.0, 0.5, 2.0]
    assert raw_rate(ts2, cs) == mle_rate(ts2, cs)


# --- maximum likelihood ------------------------------------------------------------------------


def test_score_is_the_derivative_of_the_log_likelihood():
    ts = [0.5, 1.0, 2.0, 3.5, 0.25]
    cs = [True, False, True, False, True]
    for lam in (0.05, 0.4, 1.3, 4.0):
        h = 1e-6 * lam
        numeric = (log_likelihood(lam + h, ts, cs) - log_likelihood(lam - h, ts, cs)) / (2 * h)
        assert likelihood_score(lam, ts, cs) == pytest.approx(numeric, rel=1e-5)


def test_mle_solves_the_likelihood_equation():
    rng = random.Random(4)
    for _ in range(50):
        n = rng.randint(2, 32)
        ts = [rng.uniform(0.1, 10.0) for _ in range(n)]
        cs = [rng.random() < 0.5 for _ in range(n)]
        if all(cs) or not any(cs):
            continue
        lam = mle_rate(ts, cs)
        if lam >= saturated_rate(n, sum(ts) / n):
            continue  # capped
        # sum_changed t/(e^(lam t)-1) == sum_unchanged t
        lhs = sum(t / math.expm1(lam * t) for t, c in zip(ts, cs, strict=True) if c)
        rhs = sum(t for t, c in zip(ts, cs, strict=True) if not c)
        assert lhs == pytest.approx(rhs, rel=1e-9)
        ll = log_likelihood(lam, ts, cs)
        assert ll >= log_likelihood(lam * 1.01, ts, cs)
        assert ll >= log_likelihood(lam * 0.99, ts, cs)


def test_mle_edge_cases():
    assert mle_rate([1.0, 2.0, 3.0], [False, False, False]) == 0.0
    assert mle_rate([1.0, 2.0, 3.0], [True, True, True]) == pytest.approx(math.log(7) / 2.0)
    assert mle_rate([], []) == 0.0
    assert mle_rate([0.0, 1.0, 2.0], [True, True, False]) == mle_rate([1.0, 2.0], [True, False])
    # a lone short unchanged interval among changes stays finite and below the cap
    lam = mle_rate([5.0, 5.0, 5.0, 0.01], [True, True, True, False])
    assert 0 < lam <= saturated_rate(4, 15.01 / 4)


def test_irregular_mle_equals_regular_mle_for_equal_intervals():
    # with equal intervals the MLE has the closed form -log((n - X) / n) / I
    ts, cs = [2.0] * 10, [True] * 3 + [False] * 7
    assert mle_rate(ts, cs) == pytest.approx(-math.log(7 / 10) / 2.0, rel=1e-10)


# --- simulation --------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.05, 0.5, 2.0])
def test_regular_visits_recover_the_rate(lam):
    rng = random.Random(int(lam * 1000))
    interval = 1.0
    ts = [interval] * 4000
    cs = simulate(lam, ts, rng)
    est = estimate_rate(ts, cs)
    assert est == pytest.approx(lam, rel=0.08)


@pytest.mark.parametrize("lam", [0.05, 0.3, 1.5])
def test_irregular_visits_recover_the_rate(lam):
    rng = random.Random(int(lam * 1000) + 1)
    ts = [rng.uniform(0.2, 4.0) for _ in range(4000)]
    cs = simulate(lam, ts, rng)
    assert estimate_rate(ts, cs) == pytest.approx(lam, rel=0.08)


def test_bias_reduction_beats_the_naive_estimator():
    # Cho & Garcia-Molina: X/T underestimates since several changes in one interval count once
    rng = random.Random(9)
    lam, interval, n = 1.0, 1.0, 20
    naive, improved = [], []
    for _ in range(400):
        cs = simulate(lam, [interval] * n, rng)
        x = sum(cs)
        naive.append(x / (n * interval))
        improved.append(regular_estimate(n, x, interval))
    bias_naive = abs(sum(naive) / len(naive) - lam)
    bias_improved = abs(sum(improved) / len(improved) - lam)
    assert bias_naive > 0.3
    assert bias_improved < 0.1


# --- prior -------------------------------------------------------------------------------------


def test_prior_dominates_with_one_or_two_visits():
    prior = GammaPrior(mean=0.1, strength=2.0)
    one_unchanged = estimate_rate([1.0], [False], prior)
    assert one_unchanged == pytest.approx(2 * 0.1 / 3)
    two_unchanged = estimate_rate([1.0, 1.0], [False, False], prior)
    assert two_unchanged == pytest.approx(0.05)
    raw = estimate_rate([1.0], [True], prior=None)  # log(3) = 1.0986
    shrunk = estimate_rate([1.0], [True], prior)
    assert raw == pytest.approx(math.log(3))
    assert shrunk == pytest.approx((2 * 0.1 + math.log(3)) / 3)
    assert abs(shrunk - prior.mean) < abs(raw - prior.mean)


def test_prior_vanishes_with_many_visits():
    rng = random.Random(2)
    ts = [rng.uniform(0.5, 2.0) for _ in range(1000)]
    cs = simulate(0.7, ts, rng)
    assert estimate_rate(ts, cs) == pytest.approx(estimate_rate(ts, cs, prior=None), rel=0.01)


def test_prior_weight_is_independent_of_the_time_scale():
    daily = estimate_rate([1.0] * 3, [True, False, False], GammaPrior(0.1, 2.0))
    weekly = estimate_rate([7.0] * 3, [True, False, False], GammaPrior(0.1 / 7, 2.0))
    assert weekly == pytest.approx(daily / 7)


def test_no_history_returns_the_prior_mean():
    assert estimate_rate([], []) == DEFAULT_PRIOR.mean
    assert estimate_rate([], [], prior=None) == 0.0
    assert estimate_from_history(None) == DEFAULT_PRIOR.mean
    with pytest.raises(ValueError):
        estimate_rate([1.0], [])
    with pytest.raises(ValueError):
        GammaPrior(mean=-1.0)


# --- stored history ----------------------------------------------------------------------------


def test_update_history_appends_and_truncates():
    h = None
    for i in range(40):
        h = update_history(h, 1.0 + i, i % 3 == 0, max_len=32)
    assert len(h) == 32
    assert h[0] == {"interval_d": 9.0, "changed": False}
    assert h[-1] == {"interval_d": 40.0, "changed": True}
    assert update_history(h, 0.0, True) == h  # two fetches at one logical time: not recorded
    with pytest.raises(ValueError):
        update_history(h, 1.0, True, max_len=0)


def test_history_accepts_rows_tuples_and_nulls():
    ts, cs = history_arrays(
        [
            (1.0, True),
            {"interval_d": 2.0, "changed": False},
            None,
            {"interval_d": None, "changed": True},
        ]
    )
    assert (ts, cs) == ([1.0, 2.0], [True, False])
    sql = pytest.importorskip("pyspark.sql")
    rows = [sql.Row(interval_d=1.5, changed=True), sql.Row(interval_d=0.5, changed=False)]
    assert update_history(rows, 2.0, True, max_len=2) == [
        {"interval_d": 0.5, "changed": False},
        {"interval_d": 2.0, "changed": True},
    ]
    assert estimate_from_history(rows) == estimate_rate([1.5, 0.5], [True, False])


def test_history_ddl_matches_the_table_schema():
    pytest.importorskip("pyspark")
    schemas = pytest.importorskip("recrawl.store.schemas")
    assert schemas.HISTORY.simpleString() == HISTORY_DDL


def test_estimate_is_cheap_per_url(monkeypatch):
    """What keeps an estimate at ~50 us (timing is for benchmarks): the irregular MLE takes a
    handful of Newton steps, each a pass or two over the history, not its 100-step cap."""
    import recrawl.rules.changerate as changerate

    calls = {"exp": 0, "expm1": 0}

    def counted(name):
        def f(x):
            calls[name] += 1
            return getattr(math, name)(x)
        return f

    counting = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math) if k[0] != "_"})
    counting.exp, counting.expm1 = counted("exp"), counted("expm1")
    monkeypatch.setattr(changerate, "math", counting)
    for seed in range(1, 11):
        rng = random.Random(seed)
        hist = [(rng.uniform(0.5, 5.0), rng.random() < 0.4) for _ in range(32)]
        ts, cs = [t for t, _ in hist], [c for _, c in hist]
        calls.update(exp=0, expm1=0)
        assert 0 < estimate_rate(ts, cs) < 10
        assert 1 <= calls["exp"] <= 15, (seed, calls)  # one per Newton step (and the answer)
        assert calls["expm1"] <= 30 * sum(cs), (seed, calls)  # passes over the changes
