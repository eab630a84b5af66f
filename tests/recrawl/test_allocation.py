"""The freshness-optimal allocation's mathematics (recrawl/rules/allocation.py); the policy built on
it is tested in test_schedules.py."""

from __future__ import annotations

import math

import pytest

from recrawl.rules.allocation import (
    bucket_center,
    freshness,
    h_inverse,
    optimal_frequency,
    rate_weight_bucket,
)

# --- the freshness model -----------------------------------------------------------------------


def test_freshness_closed_form():
    assert freshness(1.0, 1.0) == pytest.approx(1 - math.exp(-1))
    assert freshness(2.0, 1.0) == pytest.approx((1 - math.exp(-2)) / 2)
    assert freshness(0.0, 1.0) == 1.0
    assert freshness(1.0, 0.0) == 0.0
    assert freshness(1e-9, 1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("y", [1e-20, 1e-9, 1e-4, 0.01, 0.3, 0.5, 0.9, 0.999999, 1 - 1e-15])
def test_h_inverse(y):
    r = h_inverse(y)
    assert 1 - (1 + r) * math.exp(-r) == pytest.approx(y, rel=1e-6)
    assert h_inverse(0.0) == 0.0 and h_inverse(1.0) == math.inf


def test_optimal_frequency_marginal_condition():
    # w dF/df = mu at the optimum: dF/df = (1 - (1 + r) e^-r) / lam with r = lam / f
    for lam, w, mu in [(0.5, 1.0, 0.3), (2.0, 3.0, 0.1), (0.01, 0.2, 1.0)]:
        f = optimal_frequency(lam, w, mu)
        r = lam / f
        assert w * (1 - (1 + r) * math.exp(-r)) / lam == pytest.approx(mu, rel=1e-9)
        df = 1e-7 * f
        numeric = (freshness(lam, f + df) - freshness(lam, f - df)) / (2 * df)
        assert w * numeric == pytest.approx(mu, rel=1e-4)
    assert optimal_frequency(3.0, 1.0, 0.5) == 0.0  # lam > w / mu: not worth refreshing
    assert optimal_frequency(0.0, 1.0, 0.5) == 0.0
    assert optimal_frequency(1.0, 1.0, 0.0) == math.inf



# --- histogram buckets ------------------------------------------------------------------------


def test_rate_weight_bucket_roundtrip():
    for r, w in [(0.013, 2.5), (1.7, 1e-4), (0.5, 0.5)]:
        rc, wc = bucket_center(rate_weight_bucket(r, w))
        assert abs(math.log10(rc) - math.log10(r)) <= 1 / 16 + 1e-12
        assert abs(math.log10(wc) - math.log10(w)) <= 1 / 16 + 1e-12
    assert bucket_center(rate_weight_bucket(0.0, None))[0] == 0.0
    assert rate_weight_bucket(0.1, 1.0) != rate_weight_bucket(0.2, 1.0)
