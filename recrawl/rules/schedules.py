"""Revisit policies: when to fetch a URL again (Nutch's FetchSchedule, chosen by config).

The schedule job (docs/design.md step 7) builds a PageState per fetched URL and asks the policy
named by `schedule.policy` for the next interval; `next_fetch_time = fetch time + interval`.
All intervals are in days, the unit of change rates (changes/day); crawldb stores seconds
(`fetch_interval_s = round(days * SECONDS_PER_DAY)`).

Policies:
  fixed     - one interval for every page (Nutch DefaultFetchSchedule).
  adaptive  - Nutch AdaptiveFetchSchedule: shrink the interval after a change, grow it after
              none. Needs no estimates, but ignores the fetch budget and importance.
  optimal   - Cho & Garcia-Molina's freshness-optimal allocation of a fixed daily budget
              over pages with Poisson change rates and importance weights (the solver:
              recrawl/rules/allocation.py).

benchmarks/freshness.py compares them at equal budget. What to expect: with importance
weights the optimal policy raises importance-weighted freshness by ~20-30 % over fixed; on
plain (unweighted) freshness even the true-rate optimum is only ~4-5 % above fixed for
realistic rate spreads (Cho & Garcia-Molina: uniform is already close to optimal there), and
weighting by PageRank trades some of it away for the pages that matter.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol

import numpy as np  # a dependency of simhash, hence always installed

from recrawl.rules.allocation import (
    Allocation,
    find_root_log,
    h_inverse_vec,
    h_vec,
    optimal_frequency,
)
from recrawl.rules.crawldb_rules import SUCCESS, TRANSIENT, UNFETCHABLE, sql_list
from recrawl.rules.units import SECONDS_PER_DAY


@dataclass(frozen=True, slots=True)
class PageState:
    """What a policy may look at for one URL after a fetch."""

    interval_days: float | None = None  # current interval (crawldb.fetch_interval_s / 86400)
    changed: bool | None = None  # did this fetch see a meaningful change? None = unknown
    change_rate: float | None = None  # estimated changes/day (recrawl.rules.changerate)
    score: float | None = None  # importance: PageRank (GraphFrames: mean 1 over the graph)
    fetch_count: int = 0


@dataclass(frozen=True, slots=True)
class ScheduleContext:
    """Round-level inputs computed once on the driver and shared by every page."""

    mu: float | None = None  # Lagrange multiplier of the optimal policy (see solve_multiplier)


class FetchSchedule(Protocol):
    """A revisit policy: the next interval, in days, for a page just fetched."""

    name: ClassVar[str]

    def next_interval(self, page: PageState, ctx: ScheduleContext | None = None) -> float:
        """Days until the page should be fetched again."""
        ...


@dataclass(frozen=True)
class _Bounds:
    """Interval bounds shared by all policies (config schedule.*_interval_days)."""

    default_interval_days: float = 1.0
    min_interval_days: float = 0.25
    max_interval_days: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.min_interval_days <= self.max_interval_days:
            raise ValueError(
                "need 0 < min_interval_days <= max_interval_days, got "
                f"{self.min_interval_days}, {self.max_interval_days}"
            )
        if self.default_interval_days <= 0:
            raise ValueError("default_interval_days must be > 0")

    def clamp(self, days: float) -> float:
        """Interval limited to [min_interval_days, max_interval_days]."""
        return min(self.max_interval_days, max(self.min_interval_days, days))


@dataclass(frozen=True)
class FixedSchedule(_Bounds):
    """Same interval for every page (Nutch DefaultFetchSchedule)."""

    name: ClassVar[str] = "fixed"
    interval_days: float | None = None  # None: default_interval_days

    def next_interval(self, page: PageState, ctx: ScheduleContext | None = None) -> float:
        """The fixed interval, within bounds."""
        days = self.interval_days if self.interval_days is not None else self.default_interval_days
        return self.clamp(days)


@dataclass(frozen=True)
class AdaptiveSchedule(_Bounds):
    """Nutch AdaptiveFetchSchedule: interval *= (1 - dec_rate) on change, (1 + inc_rate) if not.

    Defaults are nutch-default.xml's (inc 0.4, dec 0.2); Nutch warns that larger factors make
    the interval oscillate. Nutch's optional sync_delta (pull the next fetch towards the
    Last-Modified time) is left out: it needs a trustworthy Last-Modified, which dynamic
    pages rarely send, and our change-rate estimate already uses the observed history.
    An unknown outcome (first fetch, error) keeps the interval, as Nutch's STATUS_UNKNOWN.
    """

    name: ClassVar[str] = "adaptive"
    inc_rate: float = 0.4
    dec_rate: float = 0.2

    def __post_init__(self) -> None:
        _Bounds.__post_init__(self)
        if self.inc_rate < 0 or not 0 <= self.dec_rate < 1:
            raise ValueError("need inc_rate >= 0 and 0 <= dec_rate < 1")

    def next_interval(self, page: PageState, ctx: ScheduleContext | None = None) -> float:
        """Shrink or grow the current interval by the last outcome."""
        days = page.interval_days or self.default_interval_days  # 0/None: NUTCH-1430
        if page.changed is True:
            days *= 1.0 - self.dec_rate
        elif page.changed is False:
            days *= 1.0 + self.inc_rate
        return self.clamp(days)


@dataclass(frozen=True)
class ChangeRateOptimalSchedule(_Bounds):
    """Freshness-optimal revisit frequencies for a daily fetch budget (Cho & Garcia-Molina).

    Batch use (the driver): `allocate` / `allocate_buckets` return intervals directly;
    `solve_multiplier` returns mu only. Per-URL use (a Spark UDF): pass that mu in a
    ScheduleContext (or construct with `mu=`) and call `next_interval` - every page then gets
    the same interval the batch solve would have given it. The scalable path is to solve mu
    on a few thousand (rate, weight) buckets (`rate_weight_bucket`) on the driver, broadcast
    it, and compute intervals per URL.

    Weights are PageRank scores; a page without one counts as an average page (`default_weight`
    1.0, GraphFrames' mean PageRank), and tiny scores are floored so that no page has zero
    value. A page without a rate estimate gets `default_rate` (the change-rate prior mean).

    `min_change_probability` p caps every page's frequency at rate / -ln(1 - p): a revisit is
    planned no sooner than the page has a chance p of having changed (within the interval
    bounds: the maximum interval still wins for pages slower than that). Cho's optimum counts
    only freshness, so it revisits slow pages at a 5-20 % chance of change when the budget
    allows; each of those fetches costs the site a full response for nothing. The cap is one
    more box constraint of the same concave problem, so `solve` spends the budget the slow
    pages leave on the others (docs/freshness.md, "A floor on the chance of change").
    """

    name: ClassVar[str] = "optimal"
    daily_budget: float | None = None
    mu: float | None = None
    default_rate: float = 0.1
    default_weight: float = 1.0
    weight_floor: float = 1e-6
    min_change_probability: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.min_change_probability < 1.0:
            raise ValueError("schedule.min_change_probability must be in [0, 1), got "
                             f"{self.min_change_probability}")

    @property
    def _min_ratio(self) -> float:
        """rate / frequency at which a revisit has min_change_probability of a change."""
        return -math.log1p(-self.min_change_probability)

    # -- per page --

    def _rate(self, rate: float | None) -> float:
        return self.default_rate if rate is None or rate != rate else max(0.0, float(rate))

    def _weight(self, w: float | None) -> float:
        return self.default_weight if w is None or w != w else max(self.weight_floor, float(w))

    def page_weight(self, score: float | None, mean_score: float | None) -> float:
        """A page's weight from its stored PageRank score: score / the mean score over the
        budget's pages (our PageRank sums to 1, so raw scores shrink as the crawl grows),
        floored; `default_weight` when the page or the crawl has no scores."""
        if score is None or mean_score is None or not mean_score > 0:
            return self.default_weight
        return self._weight(score / mean_score)

    def page_weight_sql(self, score: str, mean_score: float | None) -> str:
        """`page_weight` over a score column, in Spark SQL."""
        if mean_score is None or not mean_score > 0:
            return f"CAST({float(self.default_weight)!r} AS DOUBLE)"
        # CASE, not coalesce(greatest(...)): greatest skips NULLs (Spark and DuckDB), which gave
        # an unscored page the floor instead of an average page's weight
        return (f"CASE WHEN {score} IS NULL THEN {float(self.default_weight)!r} "
                f"ELSE greatest(CAST({score} AS DOUBLE) / {float(mean_score)!r}, "
                f"{float(self.weight_floor)!r}) END")

    def _clip_freq(self, f: float) -> float:
        return min(1.0 / self.min_interval_days, max(1.0 / self.max_interval_days, f))

    def next_interval(self, page: PageState, ctx: ScheduleContext | None = None) -> float:
        """1 / optimal frequency at the round's mu, within the interval bounds."""
        mu = ctx.mu if ctx is not None and ctx.mu is not None else self.mu
        if mu is None:
            raise ValueError(
                "ChangeRateOptimalSchedule needs mu: solve it with solve_multiplier() / "
                "allocate() for the round and pass ScheduleContext(mu=...)"
            )
        rate = self._rate(page.change_rate)
        f = optimal_frequency(rate, self._weight(page.score), mu)
        if self.min_change_probability > 0:
            f = min(f, rate / self._min_ratio)
        return 1.0 / self._clip_freq(f)

    # -- batch --

    def solve(
        self,
        rates: Sequence[float] | np.ndarray,
        weights: Sequence[float] | np.ndarray,
        counts: Sequence[float] | np.ndarray | None = None,
        budget_per_day: float | None = None,
    ) -> Allocation:
        """Clipped optimal frequencies with sum(count * freq) == budget (when feasible).

        If the budget cannot pay for every page at the maximum interval, every page gets the
        maximum interval and mu is inf (generate's top_n then rations the due pages); if it
        pays for every changing page at its upper bound (the minimum interval, or the
        change-chance floor), they all get it and mu is 0.
        """
        budget = self.daily_budget if budget_per_day is None else budget_per_day
        if budget is None or budget <= 0:
            raise ValueError("a positive budget (fetches/day) is required")
        lam = np.array([self._rate(x) for x in rates], dtype=float)
        w = np.array([self._weight(x) for x in weights], dtype=float)
        c = np.ones_like(lam) if counts is None else np.asarray(counts, dtype=float)
        if not (lam.shape == w.shape == c.shape):
            raise ValueError("rates, weights and counts must have the same length")
        fmin, fmax = 1.0 / self.max_interval_days, 1.0 / self.min_interval_days
        if lam.size == 0:
            return Allocation(0.0, lam, 0.0)
        pos = lam > 0
        lam_p, w_p = lam[pos], w[pos]
        # each changing page's upper bound: the minimum interval, or the change-chance floor
        top = np.full(lam_p.shape, fmax)
        if self.min_change_probability > 0:
            top = np.maximum(fmin, np.minimum(fmax, lam_p / self._min_ratio))

        def freqs(mu: float, polish: int) -> np.ndarray:
            f = np.full(lam.shape, fmin)
            if mu <= 0:
                f[pos] = top
                return f
            y = mu * lam_p / w_p
            fp = np.zeros_like(lam_p)
            live = y < 1.0
            fp[live] = lam_p[live] / h_inverse_vec(y[live], polish)
            f[pos] = np.clip(fp, fmin, top)
            return f

        def used(mu: float, polish: int = 0) -> float:
            return float(np.dot(c, freqs(mu, polish)))

        # used(mu) falls from used(0) (all at fmax) to c.sum()*fmin once mu >= max(w/lam).
        if lam_p.size == 0 or budget >= used(0.0):
            f = freqs(0.0, 0)
            return Allocation(0.0, f, float(np.dot(c, f)))
        mu_hi = float(np.max(w_p / lam_p))
        if budget <= float(c.sum()) * fmin:
            f = freqs(mu_hi, 0)
            return Allocation(math.inf, f, float(np.dot(c, f)))
        # Lower end: mu small enough that every changing page sits at its upper bound,
        # i.e. mu lam / w <= h(lam / top) for all of them.
        mu_lo = max(float(np.min(h_vec(lam_p / top) * w_p / lam_p)), 1e-300)
        mu = find_root_log(lambda m: used(m) - budget, mu_lo, mu_hi, abs_tol=budget * 1e-9)
        f = freqs(mu, 2)
        return Allocation(mu, f, float(np.dot(c, f)))

    def solve_multiplier(
        self,
        buckets: Iterable[tuple[Hashable, float, float, float]],
        budget_per_day: float | None = None,
    ) -> float:
        """mu for (bucket_id, rate, weight, count) rows - broadcast it for `next_interval`."""
        rows = list(buckets)
        return self.solve(
            [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows], budget_per_day
        ).mu

    def allocate(
        self,
        pages: Iterable[tuple[Hashable, float | None, float | None]],
        budget_per_day: float | None = None,
    ) -> dict[Hashable, float]:
        """{key: interval_days} for (key, rate, weight) pages sharing `budget_per_day`."""
        rows = list(pages)
        a = self.solve([r[1] for r in rows], [r[2] for r in rows], None, budget_per_day)
        return {r[0]: float(1.0 / f) for r, f in zip(rows, a.freqs, strict=True)}

    def allocate_buckets(
        self,
        buckets: Iterable[tuple[Hashable, float, float, float]],
        budget_per_day: float | None = None,
    ) -> dict[Hashable, float]:
        """{bucket_id: interval_days} for (bucket_id, rate, weight, count) histogram rows.

        The budget is shared by all pages: a bucket of `count` pages uses count * freq.
        """
        rows = list(buckets)
        a = self.solve(
            [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows], budget_per_day
        )
        return {r[0]: float(1.0 / f) for r, f in zip(rows, a.freqs, strict=True)}


# --- discovery vs revisits ---------------------------------------------------------------------
#
# A round's fetch budget is shared by two kinds of work: revisits of pages already held (the
# policies above) and discovery of URLs never fetched (the frontier). Allocated over held pages
# alone, a binding budget is spent on revisits at ~1/day and no new URL is ever fetched: on a
# 5,246-page web with 1,000 fetches/day the optimal policy refetched the same 873 pages every
# day while 4,544 known URLs waited (issue #16). Nutch and Common Crawl split the fetch list
# between new and known URLs; so does this rule: a share of every round (and of every host's
# slots in it) is reserved for never-fetched URLs while there are any, and the revisit
# policies plan with what is left. Reserved slots the frontier cannot fill go back to revisits,
# so an exhausted frontier costs the revisits nothing.


def discovery_slots(slots: int, share: float, frontier: int) -> int:
    """Slots out of `slots` reserved for never-fetched URLs: ceil(share x slots), at most the
    frontier's size (a reserve nobody can use is given back)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"discovery share must be within [0, 1], got {share!r}")
    if slots <= 0 or frontier <= 0:
        return 0
    return min(int(frontier), math.ceil(share * slots - 1e-9))


def revisit_budget(daily_budget: float, share: float, frontier: int, held: int | None = None,
                   min_revisit_share: float = 0.0) -> float:
    """Fetches per day the revisit policy may plan: the daily budget minus the discovery
    reserve (`discovery_slots`) while the frontier holds URLs, the whole budget once it is
    empty.

    With `held` (pages fetched), no more than the held pages' share of all known pages,
    held / (held + frontier), and no less than `min_revisit_share` of the budget
    (schedule.min_revisit_share): while most known pages are unfetched, a fetch that brings
    a page in for the first time is worth more than a revisit the allocation would plan
    (an allocation that knows which held pages barely change, the last-modified estimator's,
    otherwise spends everything it may on the rest at the minimum interval)."""
    reserve = discovery_slots(int(math.ceil(daily_budget)), share, frontier)
    budget = max(0.0, float(daily_budget) - reserve)
    if held is None or frontier <= 0:
        return budget
    if not 0.0 <= min_revisit_share <= 1.0:
        raise ValueError(f"min_revisit_share must be within [0, 1], got {min_revisit_share!r}")
    fair = float(daily_budget) * held / max(1, held + frontier)
    return min(budget, max(fair, float(daily_budget) * min_revisit_share))


# --- filling the round -------------------------------------------------------------------------
#
# What is due seldom matches the budget exactly: intervals are planned in continuous time but
# served by daily rounds, and pages fetched together come due together, so some rounds have
# fewer due URLs than fetches to spend (the optimal policy spent 3 of 10 on a day of the
# pipeline benchmark). Generate fills such a round with pages not due yet, best first by the
# expected gain of a refetch now: importance x the probability that the page changed since it
# was fetched, 1 - exp(-rate x age) under the Poisson model (recrawl.rules.changerate). Pages below
# `generate.fill_min_change_probability` are left alone: a refetch that almost surely finds the
# same page costs the server a request for nothing.


def change_probability(rate: float | None, age_days: float, prior_rate: float) -> float:
    """P(a page changed within `age_days` of its last fetch), Poisson with `rate` changes/day
    (the prior's mean when the page has no estimate)."""
    r = prior_rate if rate is None else rate
    return 1.0 - math.exp(-max(0.0, r) * max(0.0, age_days))


def change_probability_sql(rate: str, last_fetch: str, as_of: str, prior_rate: float) -> str:
    """`change_probability` in Spark SQL over a rate column, a last-fetch timestamp column and
    a timestamp literal (tests/recrawl/test_schedules.py checks the two agree)."""
    age = f"greatest(0.0, (unix_timestamp({as_of}) - unix_timestamp({last_fetch})) / {float(SECONDS_PER_DAY)})"
    return f"(1.0 - exp(-greatest(0.0, coalesce({rate}, {float(prior_rate)!r})) * {age}))"


# --- factory ------------------------------------------------------------------------------------

SCHEDULES: dict[str, type] = {
    "fixed": FixedSchedule,
    "adaptive": AdaptiveSchedule,
    "optimal": ChangeRateOptimalSchedule,
}
_ALIASES = {"default": "fixed", "change_rate": "optimal", "changerate": "optimal"}
# Keys of the [schedule] config section that are not parameters of every policy;
# make_schedule passes each to the policies that have it and ignores it for the others, so
# that `make_schedule(cfg.policy, **cfg)` works for every policy (prior_* keys
# configure recrawl.rules.changerate, inc_rate / dec_rate only the adaptive policy).
_SECTION_KEYS = frozenset(
    {
        "policy",
        "daily_budget",
        "prior_mean",
        "prior_strength",
        "inc_rate",
        "dec_rate",
        "oracle_rates",
        "min_revisit_share",
        "min_change_probability",
    }
)


def make_schedule(name: str, **params: Any) -> FetchSchedule:
    """Build the policy called `name` (fixed | adaptive | optimal) from keyword parameters.

    Parameters of the shared [schedule] config section that a policy does not use are
    ignored; any other unknown parameter is an error naming the accepted ones.
    """
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    cls = SCHEDULES.get(key)
    if cls is None:
        valid = ", ".join(sorted(SCHEDULES))
        raise ValueError(f"unknown schedule policy {name!r}; valid: {valid}")
    accepted = {f.name for f in fields(cls)}
    unknown = set(params) - accepted - _SECTION_KEYS
    if unknown:
        raise ValueError(
            f"schedule {key!r} got unknown parameter(s) {sorted(unknown)}; "
            f"accepted: {sorted(accepted)}"
        )
    return cls(**{k: v for k, v in params.items() if k in accepted})


def interval_seconds(days: float) -> int:
    """Days -> crawldb.fetch_interval_s."""
    return int(round(days * SECONDS_PER_DAY))


# --- the next fetch after a fetch ------------------------------------------------------------
#
# Nutch's FetchSchedule owns every next-fetch decision (set, gone, retry, shouldFetch); here
# `is_due` (recrawl.rules.crawldb_rules) decides whether a URL is fetched, this rule when a fetch's
# outcome brings it back, and the policies above the interval a success earns. updatedb writes
# this time with the fetch; the schedule step then refines it for the pages it reschedules.


@dataclass(frozen=True)
class RetryIntervals:
    """How long (days) a fetch's outcome keeps a URL away: the `updatedb.retry_*` keys."""

    gone_days: float = 30.0  # gone, and fetched but unusable (too large, filtered type)
    transient_days: float = 1.0  # an error worth retrying soon (timeouts, 5xx, DNS, connect)
    denied_days: float = 30.0  # robots.txt denied it

    @classmethod
    def from_section(cls, section: Any) -> RetryIntervals:
        return cls(float(section["retry_gone_interval_days"]),
                   float(section["retry_interval_days"]),
                   float(section["retry_denied_interval_days"]))


def next_fetch_after(status: str, interval_s: int | None, retry: RetryIntervals,
                     default_interval_days: float) -> float:
    """Seconds from a fetch to the URL's next fetch, by the fetch's status: a success (or a
    redirect) waits its interval (the policy's, `default_interval_days` before it has one),
    unfetchable and gone URLs `gone_days`, transient errors `transient_days`, robots-denied
    URLs `denied_days`; any other outcome (deferred, skipped) is due again at once."""
    if status in SUCCESS or status == "redirect":
        return float(interval_s if interval_s is not None
                     else int(default_interval_days * SECONDS_PER_DAY))
    if status == "gone" or status in UNFETCHABLE:
        return retry.gone_days * SECONDS_PER_DAY
    if status in TRANSIENT:
        return retry.transient_days * SECONDS_PER_DAY
    if status == "robots_denied":
        return retry.denied_days * SECONDS_PER_DAY
    return 0.0


def next_fetch_after_sql(status: str, interval_s: str, retry: RetryIntervals,
                         default_interval_days: float) -> str:
    """`next_fetch_after` in Spark SQL: seconds, over a status and an interval column."""
    default_s = int(default_interval_days * SECONDS_PER_DAY)
    return f"""CASE
      WHEN {status} IN ({sql_list(SUCCESS)}) OR {status} = 'redirect'
        THEN coalesce({interval_s}, {default_s})
      WHEN {status} IN ('gone', {sql_list(UNFETCHABLE)})
        THEN {int(retry.gone_days * SECONDS_PER_DAY)}
      WHEN {status} IN ({sql_list(TRANSIENT)}) THEN {int(retry.transient_days * SECONDS_PER_DAY)}
      WHEN {status} = 'robots_denied' THEN {int(retry.denied_days * SECONDS_PER_DAY)}
      ELSE 0 END"""
