"""Change signals and how far each host's are trusted: the rules, as Python and as SQL.

Sites say what changed: a sitemap's <lastmod>, a feed entry's date, a page's Last-Modified.
Some say it truthfully; some stamp every URL with today's date, never move a date after the
first publication, publish dates in the future, or say nothing. The crawler acts on a host's
signals only as far as they proved right on that host (docs/freshness.md, "Change signals"):

* A URL is *signalled changed* when its newest signal (`crawldb.signal_time`, the start of the
  interval the published value denotes, `signal_precision_s` wide: a whole day for a date)
  reaches past our copy's fetch time, and is not a date in the future.
* Every successful revisit of a URL on a host that publishes signals is a check: signalled and
  changed (meaningful change, the SimHash rule) is a true positive; signalled and unchanged, or
  a future date, a false positive; changed and not signalled (or not listed) a false negative.
  Per host, precision = tp / (tp + fp) and recall = tp / (tp + fn), as the means of Beta(1, 1)
  posteriors over counts that decay each round (`signals.trust_decay`): old evidence fades, so
  trust is lost and regained.
* Trusted precision (hosts.signal_trusted) serves a host's signalled changes ahead of the
  policy; trusted recall (hosts.signal_defer) lets its unsignalled URLs wait, up to a cap.
* Last-Modified moves with content on a host when, over revisits that can tell, the header
  moved exactly when the content changed (hosts.lm_trusted): the change rate then uses the
  last-modified estimator (recrawl.rules.changerate.lm_rate).

Python functions are what the tests reason with; the *_sql twins are what updatedb, generate
and schedule run (tests/recrawl/test_signal_trust.py checks they agree).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recrawl.rules.units import SECONDS_PER_DAY


@dataclass(frozen=True)
class TrustRule:
    """The [signals] thresholds (recrawl/defaults.toml documents each)."""

    decay: float = 0.9
    min_precision: float = 0.6
    min_recall: float = 0.8
    min_evidence: float = 3.0
    lm_min_agreement: float = 0.8
    future_tolerance_days: float = 1.0
    min_gain: float = 0.3

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"signals.trust_decay must be within (0, 1], got {self.decay!r}")
        for name in ("min_precision", "min_recall", "lm_min_agreement", "min_gain"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"signals.{name} must be within [0, 1], got {v!r}")
        if self.min_evidence < 0 or self.future_tolerance_days < 0:
            raise ValueError("signals.min_evidence and future_tolerance_days must be >= 0")

    @classmethod
    def from_section(cls, s: Mapping[str, Any]) -> TrustRule:
        return cls(float(s["trust_decay"]), float(s["min_precision"]), float(s["min_recall"]),
                   float(s["min_evidence"]), float(s["lm_min_agreement"]),
                   float(s["future_tolerance_days"]), float(s["min_gain"]))


# --- one source -------------------------------------------------------------------------------


def next_read_at(now: dt.datetime, intervals: Mapping[str, Any], kind: str, *, answered: bool,
                 entries: int | None, dated: int | None, distrusted: bool,
                 feed_redundant: bool) -> dt.datetime:
    """When a sitemap or feed just read (or tried) is read again; `intervals` is the [signals]
    section. A source whose answer listed URLs without a date says nothing about change, and a
    host whose signals proved wrong is read only often enough to regain trust: both seldom. A
    feed of a host whose dated sitemap proved its recall adds nothing a day (every change
    showed as a sitemap date): read seldom too, for the new URLs it lists; should the sitemap
    alone miss changes, recall falls, trust for it goes, and the feed is read daily again.
    Everything else: every `read_interval_days` (daily rounds read it every round)."""
    if answered and entries and not dated:
        days = intervals["undated_read_interval_days"]
    elif distrusted:
        days = intervals["untrusted_read_interval_days"]
    elif kind == "feed" and feed_redundant:
        days = intervals["undated_read_interval_days"]
    else:
        days = intervals["read_interval_days"]
    return now + dt.timedelta(days=float(days))


# --- one URL ----------------------------------------------------------------------------------


def choose_reads(due: Sequence[Mapping[str, Any]], per_host: int, round_cap: int,
                 trusted: Collection[str] = ()) -> list:
    """The sources a round reads, of those due (`signal_sources` rows).

    Per host at most `per_host`, sitemaps before feeds, each kind the longest overdue first.
    A `trusted` host's sources are all read: its dates are what the round's chases follow,
    and a day without them is a day of lag. The other hosts' share at most `round_cap`
    (`signals.max_read_share` x generate.top_n, at least 1), the longest overdue first (never
    read, then by `next_read_at`), every host's first source before any host's second, so a
    small cap spreads over hosts. A read is a request the round's fetches lose (generate's
    top_n shrinks by it): at a tenth of the pages a day on small sites the reads took a fifth
    of the round and starved discovery (docs/freshness.md, "A tenth of the budget")."""
    if per_host < 0 or round_cap < 0:
        raise ValueError("per_host and round_cap must be >= 0")
    never = dt.datetime.min

    def overdue(r: Mapping[str, Any]) -> tuple:
        return (r.get("next_read_at") is not None, r.get("next_read_at") or never,
                r["source_url"])

    by_host: dict[str, list] = {}
    for r in sorted(due, key=lambda r: (r["kind"] != "sitemap", overdue(r))):
        by_host.setdefault(r["host"], []).append(r)
    firsts = [rs[:per_host] for rs in by_host.values()]
    sure = [r for rs in firsts for r in rs if r["host"] in trusted]
    ranked = sorted(((i, overdue(r), r) for rs in firsts for i, r in enumerate(rs)
                     if r["host"] not in trusted), key=lambda t: (t[0], t[1]))
    return sure + [r for _, _, r in ranked[:round_cap]]


def is_future(signal_time: dt.datetime | None, as_of: dt.datetime, tolerance_days: float) -> bool:
    """A published date later than the round's time plus the tolerance: a lie, not a signal."""
    return signal_time is not None and signal_time > as_of + dt.timedelta(days=tolerance_days)


def signalled_changed(signal_time: dt.datetime | None, precision_s: float | None,
                      last_fetch: dt.datetime | None, as_of: dt.datetime,
                      tolerance_days: float) -> bool | None:
    """Does the signal say the page changed after our copy was fetched? None: no signal (or a
    future date, which says nothing). A page never fetched has no copy: None too."""
    if signal_time is None or last_fetch is None or is_future(signal_time, as_of, tolerance_days):
        return None
    width = dt.timedelta(seconds=max(1.0, float(precision_s or 1)))
    return signal_time + width > last_fetch


def is_deferred(status: str, signal_defer: bool | None, signals_read_at: dt.datetime | None,
                changed: bool | None, last_fetch: dt.datetime | None, now: dt.datetime,
                read_interval_days: float, defer_max_days: float) -> bool:
    """Is a fetched page left alone by the round though due? Its host's signals are trusted for
    recall (hosts.signal_defer), the host's sources answered within the last read interval, the
    signal says no change since our copy (`changed` is False: `signalled_changed`), and our copy
    is younger than defer_max_days (the cap on trusting "unchanged")."""
    return (status == "fetched" and bool(signal_defer) and changed is False
            and signals_read_at is not None
            and signals_read_at > now - dt.timedelta(days=read_interval_days)
            and last_fetch is not None and last_fetch > now - dt.timedelta(days=defer_max_days))


def deferred_sql(now: str, read_interval_days: float, defer_max_days: float,
                 tolerance_days: float) -> str:
    """`is_deferred` in Spark SQL over crawldb's columns and its host's signal_defer and
    signals_read_at; `now` a timestamp literal (never NULL)."""
    def before(days: float) -> str:
        return f"{now} - make_interval(0, 0, 0, 0, 0, 0, {float(days) * SECONDS_PER_DAY!r})"

    changed = signalled_changed_sql(now, tolerance_days)
    return (f"(status = 'fetched' AND coalesce(signal_defer, false) "
            f"AND coalesce(NOT ({changed}), false) "
            f"AND coalesce(signals_read_at > {before(read_interval_days)}, false) "
            f"AND coalesce(last_fetch_time > {before(defer_max_days)}, false))")


def change_gain(rate: float | None) -> float:
    """Expected share of the next day a copy fetched now stays fresh: (1 - e^-rate) / rate
    (1 for a page that does not change). A signalled change of a page changing 5 times a day
    buys 0.2 of a day; of a page changing weekly, 0.93."""
    r = max(0.0, float(rate or 0.0))
    return 1.0 if r < 1e-9 else -math.expm1(-r) / r


def policy_budget(budget: float, signal_cost: float, followed: int, unfollowed: int) -> float:
    """Revisit fetches per day the policy may plan for the pages no trusted signal follows: the
    revisit budget less the followed pages' expected fetches (`signal_cost`: their chases and
    verification visits), but never less than the unfollowed pages' share of it,
    unfollowed / (followed + unfollowed). The expected chases are an estimate (a page's first
    rates are the prior's, above most pages' true rates); taken whole they left nothing for the
    pages no sitemap lists, which then waited the maximum interval (docs/freshness.md). Chases
    still come first in every round (generate serves signalled changes ahead of the plan); the
    floor only keeps the policy's plan for the others from collapsing."""
    if budget <= 0:
        return 0.0
    total = followed + unfollowed
    floor = budget * unfollowed / total if total > 0 else budget
    return min(budget, max(budget - max(0.0, signal_cost), floor))


def signalled_changed_sql(as_of: str, tolerance_days: float, signal: str = "signal_time",
                          precision: str = "signal_precision_s",
                          last_fetch: str = "last_fetch_time") -> str:
    """`signalled_changed` in Spark SQL (NULL for None); `as_of` a timestamp literal."""
    future = f"{signal} > {as_of} + make_interval(0, 0, 0, 0, 0, 0, {float(tolerance_days) * SECONDS_PER_DAY!r})"
    width = f"greatest(1, coalesce({precision}, 1))"
    return (f"CASE WHEN {signal} IS NULL OR {last_fetch} IS NULL OR {future} THEN NULL "
            f"ELSE {signal} + make_interval(0, 0, 0, 0, 0, 0, {width}) > {last_fetch} END")


def is_future_sql(as_of: str, tolerance_days: float, signal: str = "signal_time") -> str:
    return (f"coalesce({signal} > {as_of} + make_interval(0, 0, 0, 0, 0, 0, "
            f"{float(tolerance_days) * SECONDS_PER_DAY!r}), false)")


def change_gain_sql(rate: str) -> str:
    """`change_gain` in Spark SQL over a rate expression (NULL counts as 0)."""
    r = f"greatest(0.0, coalesce({rate}, 0.0))"
    return f"CASE WHEN {r} < 1e-9 THEN 1.0 ELSE (1.0 - exp(-{r})) / {r} END"


# --- one host ---------------------------------------------------------------------------------


def beta_mean(hits: float, misses: float) -> float:
    """Posterior mean of a Beta(1, 1) prior after `hits` and `misses` (decayed counts)."""
    return (hits + 1.0) / (hits + misses + 2.0)


def check_outcome(signalled: bool | None, changed: bool | None, listed: bool,
                  future: bool) -> str | None:
    """One revisit's verdict on its host's signals: "tp", "fp", "fn", "tn", or None (nothing
    to learn: no previous copy or an unknown change, or the host publishes no signals for it
    and it did not change). A future date counts as a false positive (a lie), whatever the
    page did; a URL not listed that changed, as a false negative (a signal missing)."""
    if changed is None:
        return None
    if future:
        return "fp"
    if signalled is None:
        return ("fn" if changed else "tn") if listed else None
    if signalled:
        return "tp" if changed else "fp"
    return "fn" if changed else "tn"


@dataclass(frozen=True)
class HostTrust:
    """What a host's decayed check counts say."""

    precision: float
    recall: float
    trusted: bool  # serve its signalled changes ahead of the policy
    defer: bool  # let its unsignalled URLs wait (recall proven)


def decayed(old: float | None, new: float, decay: float) -> float:
    """A decayed count after a round that added `new`."""
    return (old or 0.0) * decay + new


def host_trust(tp: float, fp: float, fn: float, rule: TrustRule,
               min_precision_evidence: float = 2.0) -> HostTrust:
    """Trust from decayed counts: precision needs `min_precision_evidence` signalled checks,
    recall `rule.min_evidence` changed ones; until then the host is not trusted."""
    p, r = beta_mean(tp, fp), beta_mean(tp, fn)
    trusted = tp + fp >= min_precision_evidence and p >= rule.min_precision
    defer = trusted and tp + fn >= rule.min_evidence and r >= rule.min_recall
    return HostTrust(p, r, trusted, defer)


def lm_trusted(agree: float, disagree: float, rule: TrustRule) -> bool:
    """Does Last-Modified move with content on the host? Believed until `min_evidence`
    revisits could tell, then by the agreement over them (a server that stamps every answer
    with the time, or never moves the header, disagrees at nearly every revisit; an honest one
    disagrees only where the SimHash rule calls a real edit trivial, a few per cent)."""
    if agree + disagree < rule.min_evidence:
        return True
    return beta_mean(agree, disagree) >= rule.lm_min_agreement


def host_trust_sql(rule: TrustRule, tp: str = "signal_tp", fp: str = "signal_fp",
                   fn: str = "signal_fn", min_precision_evidence: float = 2.0) -> dict[str, str]:
    """`host_trust` as SQL expressions: precision, recall, trusted, defer."""
    p = f"(({tp}) + 1.0) / (({tp}) + ({fp}) + 2.0)"
    r = f"(({tp}) + 1.0) / (({tp}) + ({fn}) + 2.0)"
    trusted = f"(({tp}) + ({fp}) >= {min_precision_evidence!r} AND {p} >= {rule.min_precision!r})"
    defer = (f"({trusted} AND ({tp}) + ({fn}) >= {rule.min_evidence!r} "
             f"AND {r} >= {rule.min_recall!r})")
    return {"precision": p, "recall": r, "trusted": trusted, "defer": defer}


def lm_trusted_sql(rule: TrustRule, agree: str = "lm_agree", disagree: str = "lm_disagree") -> str:
    """`lm_trusted` in SQL."""
    return (f"CASE WHEN ({agree}) + ({disagree}) < {rule.min_evidence!r} THEN true "
            f"ELSE (({agree}) + 1.0) / (({agree}) + ({disagree}) + 2.0) >= "
            f"{rule.lm_min_agreement!r} END")


def check_outcome_sql(signalled: str, changed: str, listed: str, future: str) -> str:
    """`check_outcome` in Spark SQL (NULL for None)."""
    return f"""CASE
      WHEN ({changed}) IS NULL THEN NULL
      WHEN {future} THEN 'fp'
      WHEN ({signalled}) IS NULL THEN CASE WHEN NOT ({listed}) THEN NULL
                                          WHEN {changed} THEN 'fn' ELSE 'tn' END
      WHEN {signalled} THEN CASE WHEN {changed} THEN 'tp' ELSE 'fp' END
      WHEN {changed} THEN 'fn' ELSE 'tn' END"""


def http_date_sql(col: str) -> str:
    """An HTTP-date string column (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") as a UTC
    timestamp; NULL when absent or malformed (RFC 9110 says ignore such a value)."""
    return (f"try_to_timestamp(regexp_extract({col}, "
            r"'^\\s*[A-Za-z]{3},\\s*(\\d{1,2} [A-Za-z]{3} \\d{4} \\d{2}:\\d{2}:\\d{2})\\s*GMT\\s*$', 1), "
            "'d MMM yyyy HH:mm:ss')")
