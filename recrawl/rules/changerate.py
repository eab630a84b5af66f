"""Per-URL change history and its Poisson change-rate estimate (docs/design.md step 7, "schedule").

Model (Cho & Garcia-Molina, "Estimating Frequency of Change", ACM TOIT 3(3), 2003): a page
changes as a Poisson process of rate lambda (changes/day). A crawler does not see changes, only
whether the page differs from the copy fetched one interval t earlier, which happens with
probability 1 - exp(-lambda t). Counting visits-with-a-change as changes (the naive X/T)
underestimates lambda, because two changes inside one interval look like one; the estimators
below correct for that.

All times are logical days (the round's logical date, never the wall clock), so backfills
and tests replay history exactly. Everything here is pure Python and cheap per URL (<= 32
history entries, a few Newton steps), meant to run inside a Spark UDF or mapPartitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recrawl.rules.crawldb_rules import HISTORY_MAX

# Hard ceiling on any estimate (changes/day). We cannot learn that a page changes more often
# than we look at it; 48/day (every 30 min) is far beyond schedule.min_interval_days, so it
# only stops pathological inputs (tiny intervals, all changed) from producing huge numbers.
DEFAULT_MAX_RATE = 48.0
# Spark DDL of the stored history; must match recrawl.store.schemas.HISTORY (crawldb.change_history).
HISTORY_DDL = "array<struct<interval_d:double,changed:boolean>>"


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(alpha, beta) prior on lambda, parametrized as a mean and a weight in visits.

    With exact change counts X over observed time T the conjugate posterior mean is
    (alpha + X) / (beta + T). We only observe "changed or not" per visit, so X is replaced by
    the count the data estimator implies, X_eff = lambda_hat * T. We set beta = strength * mean
    interval of the page's own history and alpha = mean * beta: the prior then weighs exactly
    `strength` visits whatever the page's visit interval, and the posterior is the blend
        lambda_post = (strength * mean + n * lambda_hat) / (strength + n).
    Default: mean 0.1 changes/day (a page changes about every ten days until we know better),
    strength 2 visits - weak, so that a handful of visits dominates it.
    """

    mean: float = 0.1
    strength: float = 2.0

    def __post_init__(self) -> None:
        if self.mean < 0 or self.strength < 0:
            raise ValueError("GammaPrior mean and strength must be >= 0")

    def alpha_beta(self, mean_interval_days: float) -> tuple[float, float]:
        """The equivalent Gamma(alpha, beta) for a page visited every `mean_interval_days`."""
        beta = self.strength * mean_interval_days
        return self.mean * beta, beta


DEFAULT_PRIOR = GammaPrior()


# --- what counts as a change ----------------------------------------------------------------


# --- estimators -----------------------------------------------------------------------------


def regular_estimate(n: int, x: int, interval_days: float) -> float:
    """Cho & Garcia-Molina's bias-reduced estimator for n visits every I days, X with changes.

    lambda_hat = -log((n - X + 0.5) / (n + 0.5)) / I. The plain MLE -log((n - X)/n)/I is
    infinite when every visit saw a change; the +0.5 terms remove most of its bias and keep
    X = n finite: log(2n + 1) / I.
    """
    if n <= 0:
        return 0.0
    if not 0 <= x <= n:
        raise ValueError(f"changes x={x} must be within 0..n={n}")
    if interval_days <= 0:
        raise ValueError(f"interval must be > 0, got {interval_days}")
    return -math.log((n - x + 0.5) / (n + 0.5)) / interval_days


def log_likelihood(rate: float, intervals: Sequence[float], changed: Sequence[bool]) -> float:
    """Log-likelihood of the observations under rate `rate` (changes/day)."""
    ll = 0.0
    for t, c in zip(intervals, changed, strict=True):
        if t <= 0:
            continue
        if c:
            p = -math.expm1(-rate * t)
            ll += math.log(p) if p > 0 else -math.inf
        else:
            ll -= rate * t
    return ll


def likelihood_score(rate: float, intervals: Sequence[float], changed: Sequence[bool]) -> float:
    """d/d(rate) of `log_likelihood`: sum_changed t/(e^(rate t) - 1) - sum_unchanged t."""
    s = 0.0
    for t, c in zip(intervals, changed, strict=True):
        if t <= 0:
            continue
        if c:
            x = rate * t
            if x < 700.0:  # beyond, the term underflows to 0 (and expm1 would overflow)
                s += t / math.expm1(x)
        else:
            s -= t
    return s


def _score_slope(rate: float, ts_changed: Sequence[float]) -> float:
    """d/d(rate) of `likelihood_score` (always < 0, so the score is monotone)."""
    d = 0.0
    for t in ts_changed:
        x = rate * t
        if x < 350.0:
            e = math.expm1(x)
            d -= t * t * (e + 1.0) / (e * e)
    return d


def saturated_rate(n: int, mean_interval_days: float, max_rate: float = DEFAULT_MAX_RATE) -> float:
    """Rate reported when every visit saw a change: the bias-reduced value log(2n+1)/mean I.

    The irregular MLE has no finite answer then (the likelihood keeps growing with lambda).
    Using the regular estimator at X = n with the mean interval keeps the irregular and
    regular paths consistent and grows with evidence, as it should; `max_rate` bounds it.
    """
    if n <= 0 or mean_interval_days <= 0:
        return 0.0
    return min(max_rate, math.log(2 * n + 1) / mean_interval_days)


def mle_rate(
    intervals: Sequence[float], changed: Sequence[bool], max_rate: float = DEFAULT_MAX_RATE
) -> float:
    """Maximum-likelihood rate for irregular visit intervals (Cho & Garcia-Molina, sec. 5).

    Solves sum_changed t_i / (e^(lambda t_i) - 1) = sum_unchanged t_i. The left side falls
    monotonically from +inf to 0, so the root is unique; we run Newton on u = log(lambda)
    (the score is close to linear in u over decades of rates) inside a shrinking bisection
    bracket, which converges in a handful of steps. Edge cases: no change seen -> 0 (the
    prior then decides); every visit changed -> `saturated_rate`; the result never exceeds
    that value nor `max_rate`.
    """
    pairs = [(float(t), bool(c)) for t, c in zip(intervals, changed, strict=True) if t > 0]
    if not pairs:
        return 0.0
    ts_changed = [t for t, c in pairs if c]
    sum_unchanged = sum(t for t, c in pairs if not c)
    n, x = len(pairs), len(ts_changed)
    mean_t = sum(t for t, _ in pairs) / n
    cap = saturated_rate(n, mean_t, max_rate)
    if x == 0:
        return 0.0
    if x == n:
        return cap

    def g(lam: float) -> float:
        s = 0.0
        for t in ts_changed:
            z = lam * t
            if z < 700.0:
                s += t / math.expm1(z)
        return s - sum_unchanged

    lam = max(regular_estimate(n, x, mean_t), 1e-12)  # a good start: often within 10 %
    lo = hi = lam
    while g(lo) <= 0:
        lo /= 4.0
    while g(hi) >= 0:
        if hi >= cap:
            return cap
        hi *= 4.0
    u, ulo, uhi = math.log(lam), math.log(lo), math.log(hi)
    for _ in range(100):
        lam = math.exp(u)
        gv = g(lam)
        if gv > 0:
            ulo = u
        else:
            uhi = u
        slope = lam * _score_slope(lam, ts_changed)  # dg/du
        step = gv / slope if slope < 0 else 0.0
        nu = u - step
        if not ulo < nu < uhi:  # Newton left the bracket: bisect instead
            nu = 0.5 * (ulo + uhi)
        if abs(nu - u) < 1e-12 or uhi - ulo < 1e-12:
            u = nu
            break
        u = nu
    return min(math.exp(u), cap)


def is_regular(intervals: Sequence[float], rel_tol: float = 0.01) -> bool:
    """True when all intervals are equal within `rel_tol` (1 %)."""
    ts = [t for t in intervals if t > 0]
    return bool(ts) and max(ts) <= min(ts) * (1.0 + rel_tol)


def raw_rate(
    intervals: Sequence[float], changed: Sequence[bool], max_rate: float = DEFAULT_MAX_RATE
) -> float:
    """Data-only estimate: bias-reduced estimator for regular visits, MLE otherwise."""
    if len(intervals) != len(changed):
        raise ValueError("intervals and changed must have the same length")
    pairs = [(t, c) for t, c in zip(intervals, changed, strict=True) if t > 0]
    if not pairs:
        return 0.0
    ts = [t for t, _ in pairs]
    if is_regular(ts):
        n, x = len(pairs), sum(1 for _, c in pairs if c)
        return min(regular_estimate(n, x, sum(ts) / n), max_rate)
    return mle_rate(ts, [c for _, c in pairs], max_rate)


def estimate_rate(
    intervals_days: Sequence[float],
    changed: Sequence[bool],
    prior: GammaPrior | None = DEFAULT_PRIOR,
    max_rate: float = DEFAULT_MAX_RATE,
) -> float:
    """Change rate (changes/day) from a visit history, shrunk towards `prior`.

    Picks the regular estimator when all intervals agree within 1 %, the MLE otherwise, and
    blends with the Gamma prior (see GammaPrior) so that a page seen once or twice gets a
    sensible rate instead of 0 or log(3)/I. `prior=None` returns the raw estimate. No
    history at all returns the prior mean.
    """
    if len(intervals_days) != len(changed):
        raise ValueError("intervals_days and changed must have the same length")
    ts = [float(t) for t in intervals_days if t > 0]
    if not ts:
        return prior.mean if prior is not None else 0.0
    lam = raw_rate(intervals_days, changed, max_rate)
    if prior is None:
        return lam
    total = sum(ts)
    alpha, beta = prior.alpha_beta(total / len(ts))
    return (alpha + lam * total) / (beta + total)


def lm_rate(
    changes: float,
    exposure_days: float,
    prior: GammaPrior | None = DEFAULT_PRIOR,
    mean_interval_days: float = 1.0,
    max_rate: float = DEFAULT_MAX_RATE,
    visits: int = 0,
) -> float:
    """Change rate from Last-Modified dates (Cho & Garcia-Molina 2003, sec. 6), same Gamma prior.

    A visit that finds Last-Modified moved says "a change at L, none since": likelihood
    lambda e^(-lambda (visit - L)); a visit that finds it unchanged says "no change for the
    whole interval": e^(-lambda I). The MLE is changes / exposure, with exposure the sum of
    the times known free of changes (crawldb.lm_changes, lm_exposure_d; updatedb accumulates
    them, the first fetch included: its date is a change and its copy's age, which alone
    ranks pages). With the prior the
    posterior mean is (alpha + X) / (beta + E), the prior weighing `strength` visits. A visit
    brings at most its interval of exposure, and a visit that finds a change only the time
    since it: with `visits` (fetches the counts cover) a visit weighs the smaller of
    `mean_interval_days` and exposure / visits. Weighed by the interval alone, the prior
    outweighed the evidence of a page changing several times a day (five visits that each
    found a change of a few hours ago) and held its rate near the prior's mean. Converges in
    a few visits where change/no-change needs weeks: one visit tells a page unchanged for 300
    days from one unchanged for 3.
    """
    x, e = max(0.0, float(changes or 0.0)), max(0.0, float(exposure_days or 0.0))
    if prior is None:
        return min(max_rate, x / e) if e > 0 else 0.0
    per_visit = max(mean_interval_days, 1e-6)
    if visits > 0 and e > 0:
        per_visit = min(per_visit, e / visits)
    alpha, beta = prior.alpha_beta(per_visit)
    return min(max_rate, (alpha + x) / (beta + e)) if beta + e > 0 else prior.mean


def lm_rate_sql(changes: str, exposure_days: str, mean_interval_days: str, visits: str,
                prior: GammaPrior, max_rate: float = DEFAULT_MAX_RATE) -> str:
    """`lm_rate` with a prior in Spark SQL over column expressions (tests check the two agree):
    a pass over millions of rows without a Python worker."""
    x = f"greatest(0.0, coalesce(double({changes}), 0.0))"
    e = f"greatest(0.0, coalesce(double({exposure_days}), 0.0))"
    per_visit = (f"(CASE WHEN {visits} > 0 AND {e} > 0 "
                 f"THEN least(greatest({mean_interval_days}, 1e-6), {e} / {visits}) "
                 f"ELSE greatest({mean_interval_days}, 1e-6) END)")
    beta = f"({float(prior.strength)!r} * {per_visit})"
    alpha = f"({float(prior.mean)!r} * {beta})"
    return (f"(CASE WHEN {beta} + {e} > 0 THEN least({float(max_rate)!r}, "
            f"({alpha} + {x}) / ({beta} + {e})) ELSE {float(prior.mean)!r} END)")


def history_mean_interval_sql(history: str, default_days: float) -> str:
    """The mean interval (days) of a stored history's usable entries (`history_arrays` keeps
    those with both fields), `default_days` when it has none; with `history_visits_sql`, the
    arguments `page_rate` gives `lm_rate`."""
    usable = f"filter({history}, h -> h.interval_d IS NOT NULL AND h.changed IS NOT NULL)"
    return (f"coalesce(aggregate({usable}, 0.0D, (acc, h) -> acc + double(h.interval_d)) "
            f"/ nullif({_size(usable)}, 0), {float(default_days)!r})")


def history_visits_sql(history: str) -> str:
    """Fetches a history's counts cover: its usable entries and the first fetch."""
    usable = f"filter({history}, h -> h.interval_d IS NOT NULL AND h.changed IS NOT NULL)"
    return f"({_size(usable)} + 1)"


def _size(array: str) -> str:
    # size(NULL) is -1 outside ANSI mode: an absent history has no entries
    return f"(CASE WHEN {array} IS NULL THEN 0 ELSE size({array}) END)"


# --- the stored history (crawldb.change_history) --------------------------------------------


def _entry(item: Any) -> tuple[float, bool] | None:
    """(interval_d, changed) from a dict, a pyspark Row or a pair; None when unusable."""
    if item is None:
        return None
    if isinstance(item, Mapping) or hasattr(item, "asDict"):
        t, c = item["interval_d"], item["changed"]
    else:
        t, c = item
    if t is None or c is None:
        return None
    return float(t), bool(c)


def history_arrays(history: Iterable[Any] | None) -> tuple[list[float], list[bool]]:
    """Split a stored history into parallel (intervals, changed) lists, oldest first."""
    ts: list[float] = []
    cs: list[bool] = []
    for item in history or ():
        e = _entry(item)
        if e is not None:
            ts.append(e[0])
            cs.append(e[1])
    return ts, cs


def update_history(
    history: Iterable[Any] | None,
    interval_days: float,
    changed: bool,
    max_len: int = HISTORY_MAX,
) -> list[dict[str, Any]]:
    """Append one visit outcome and keep the last `max_len` (HISTORY_DDL rows, oldest first).

    Bounded so the column stays small; 32 visits are enough for a tight estimate (the
    estimator's standard error shrinks like 1/sqrt(n)) while still following pages whose
    rate drifts. A non-positive interval (two fetches at one logical time) is not recorded.
    """
    if max_len <= 0:
        raise ValueError(f"max_len must be > 0, got {max_len}")
    ts, cs = history_arrays(history)
    if interval_days is not None and interval_days > 0:
        ts.append(float(interval_days))
        cs.append(bool(changed))
    return [
        {"interval_d": t, "changed": c} for t, c in zip(ts[-max_len:], cs[-max_len:], strict=True)
    ]


def estimate_from_history(
    history: Iterable[Any] | None,
    prior: GammaPrior | None = DEFAULT_PRIOR,
    max_rate: float = DEFAULT_MAX_RATE,
) -> float:
    """`estimate_rate` over a stored history (a crawldb.change_history value)."""
    ts, cs = history_arrays(history)
    return estimate_rate(ts, cs, prior, max_rate)
