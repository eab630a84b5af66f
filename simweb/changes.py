"""Poisson change model for page content.

Each changing page has a rate λ (changes per simulated day). Its change events are a Poisson
process: exponential gaps drawn from a per-page RNG, so the event times are a pure function of
(seed, url). The page's *version* on day d is the number of events in [0, d]; its Last-Modified is
the time of the last such event. This is exactly the model the scheduler's Cho & Garcia-Molina
estimator assumes, so benchmarks can compare the estimated λ with the true one.
"""

from __future__ import annotations

import bisect
import math
import random
import threading
from datetime import datetime

from simweb.response import sim_datetime
from simweb.text import rng_for, stable_hash, unit


class PoissonPage:
    """Change events of one page, generated lazily as far as queried."""

    def __init__(self, seed: object, key: str, rate: float) -> None:
        self.rate = rate
        self.key = key
        self._seed = seed
        self._rng: random.Random | None = None  # created on first use: worlds are big
        self._times: list[float] = []
        self._horizon = 0.0  # events are generated up to at least this time
        self._lock = threading.Lock()

    def _extend(self, day: float) -> None:
        """Draw events until the process has passed ``day``."""
        if self.rate <= 0:
            return
        with self._lock:
            if self._rng is None:
                self._rng = rng_for("poisson", self._seed, self.key)
            t = self._times[-1] if self._times else 0.0
            while self._horizon <= day:
                t += self._rng.expovariate(self.rate)
                self._times.append(t)
                self._horizon = t

    def version(self, day: float) -> int:
        """Number of change events in [0, day]."""
        if self.rate <= 0 or day < 0:
            return 0
        self._extend(day)
        return bisect.bisect_right(self._times, day)

    def next_change(self, after: float) -> float:
        """Simulated time (days) of the first change strictly after ``after``; inf if none."""
        if self.rate <= 0:
            return math.inf
        v = self.version(after)  # also extends the process past ``after``
        return self._times[v]

    def last_change(self, day: float) -> float:
        """Simulated time (days) of the last change at or before ``day``; 0 if none."""
        v = self.version(day)
        return self._times[v - 1] if v else 0.0

    def last_modified(self, day: float) -> datetime:
        """Last-Modified for the page as served on ``day``."""
        return sim_datetime(self.last_change(day))

    def etag(self, day: float) -> str:
        """A strong, version-based entity tag."""
        return f'"{stable_hash(self.key)[:10]}-{self.version(day)}"'


def log_uniform_rate(seed: object, key: str, lo: float, hi: float) -> float:
    """A rate spread log-uniformly in [lo, hi], deterministic per key."""
    u = unit("rate", seed, key)
    return round(math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))), 6)


#: Change-rate classes of normal pages, (share, typical rate per day), after Cho & Garcia-Molina,
#: "The Evolution of the Web and Implications for an Incremental Crawler" (VLDB 2000): of 720k
#: pages visited daily for four months, about 23 % changed at every visit (daily or faster),
#: about 30 % did not change at all in the four months, and the rest spread between a week and
#: four months. The same mixture as benchmarks/freshness.py --rates web.
WEB_RATE_CLASSES = ((0.30, 0.003), (0.25, 1 / 30), (0.25, 1 / 7), (0.15, 1.0), (0.05, 5.0))


def web_mix_rate(seed: object, key: str) -> float:
    """A rate drawn from WEB_RATE_CLASSES (deterministic per key): a class by its share, then
    a log-normal spread (sigma 0.3) around its typical rate, so rates span about three orders
    of magnitude (~0.002 to ~10 changes/day), most pages rarely changing."""
    u = unit("rate-class", seed, key)
    acc = 0.0
    typical = WEB_RATE_CLASSES[-1][1]
    for share, rate in WEB_RATE_CLASSES:
        acc += share
        if u < acc:
            typical = rate
            break
    jitter = rng_for("rate-jitter", seed, key).gauss(0.0, 0.3)
    return round(typical * math.exp(jitter), 6)


#: Rate draws for normal sites (SimWeb(rates=...)).
RATE_MIXES = ("loguniform", "web")
