"""Pipeline freshness benchmark: revisit policies through the real round steps over simweb.

    .venv/bin/python benchmarks/pipeline_freshness.py [--days 60 --sites 4 --pages 25
        --budget-share 0.2 --policies fixed,adaptive,optimal,oracle --seed 7 --warmup D]

Where benchmarks/freshness.py simulates the policies in pure Python, this one runs the real
steps (recrawl.rules.rounds.STEPS: generate, fetch over HTTP, parse, dedup, updatedb, schedule; one
Spark session, as `crawler round` does) one round per simulated day, and scores the result
against simweb's truth. Per policy: a fresh crawl home and a fresh SimWeb with the same seed and
`rates="web"` (normal pages' change rates from Cho & Garcia-Molina 2000's measured mix,
simweb.changes.WEB_RATE_CLASSES), every page of every normal site injected on day 0, and the
same binding budget: generate.top_n = schedule.daily_budget = ceil(budget-share x pages).
`schedule.default_interval_days` = 1 / budget-share for every policy, so that fixed (and
adaptive's starting interval) spends exactly the budget once everything is known, and
`schedule.min_interval_days` = --min-interval (1 day: the rounds' period) for every policy.
Rounds with fewer due URLs than the budget are filled with not-yet-due pages by importance x
P(changed) for every policy (generate.fill_budget), with the probability floor at --fill-floor
(0 by default), so the policies compare at equal fetches.

Policies: fixed and adaptive (Nutch), optimal (the change-rate policy, rates estimated from
change histories) and oracle (the optimal policy given simweb's true rates through the
benchmarks-only key schedule.oracle_rates) run without the signals step; signals (optimal with
the change signals: sitemap dates, feeds, Last-Modified, trusted per host as learned) and
trust-oracle (the same, told which hosts' signals are honest: signals.trust_oracle) with it.
`--web` picks the sites' signal behaviours (simweb.signals: accurate, none, mixed, lying, lag)
and `--feeds` the share with a feed. simweb's clock runs on the crawl's logical dates (its day
for logical date D is D - simweb's EPOCH), so pages have ~300 days of history on day 0.

Measured over the pages robots.txt lets us fetch ("pages" below; unheld pages count as stale),
per simulated day [d, d+1) after round d, exactly from simweb's change times:
  fresh    - share of pages whose held copy equals the live page (time average over the day)
  wfresh   - the same weighted by importance = PageRank (networkx, damping 0.85) of simweb's
             true link graph
  age      - mean days since the live page diverged from the held copy, over held copies
  cover    - share of pages held (fetched at least once)
  fetch/d  - requests the round made (fetches rows other than robots_denied / skipped_budget)
  unchg    - share of those requests that revisited a page unchanged since the held copy
  unchg/d  - those requests a day
  sig/d    - sitemap / feed reads of the signals step a day (in the budget too)
  spearman - rank correlation of crawldb.change_rate with the true rate, over held pages, at
             the end (the oracle's stored rates are the truth it was given); rho@14 after
             14 days
Averages are over days >= warmup (default: a third of the days).
At the end, per true-rate class of simweb's mix: the held pages' median true rate, median
estimate (crawldb.change_rate) and median revisit interval chosen (crawldb.fetch_interval_s).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import sys
import tempfile
import time
from pathlib import Path

POLICIES = ("fixed", "adaptive", "optimal", "signals", "trust-oracle", "oracle")
# Policies that read change signals (the signals step on); the others run with it off, as the
# crawler did before signals existed.
SIGNAL_POLICIES = ("signals", "trust-oracle")
# simweb signal kinds whose sitemap dates lie (simweb.signals); `none` publishes no dates.
LYING_KINDS = ("today", "frozen", "future")
# fetches rows that made no request to the site
NO_REQUEST = ("robots_denied", "skipped_budget")
HELD = ("fetched", "not_modified")


@dataclasses.dataclass
class Page:
    """One measured page of the simulated web."""

    key: tuple[str, str]  # (host, path): URLs differ by port between SimWeb instances
    rate: float
    weight: float  # PageRank, normalized to sum 1 over the measured pages


@dataclasses.dataclass
class Day:
    """One simulated day's measurements."""

    day: int
    fresh: float
    wfresh: float
    age: float
    coverage: float
    requests: int
    unchanged: int
    wall_s: float
    signal_reads: int = 0  # sitemap / feed requests of the signals step
    signal_fetches: int = 0  # fetch-list URLs chosen for a change signal
    liar_signal_fetches: int = 0  # ... of them on hosts whose signals lie
    trusted_liars: int = 0  # lying hosts trusted (precision) after the round
    trusted_honest: int = 0  # honest (accurate) hosts trusted after the round
    fresh_honest: float = math.nan  # fresh over the pages of hosts with honest signals
    fresh_other: float = math.nan  # ... over the other hosts' pages
    by_reason: dict = dataclasses.field(default_factory=dict)  # reason -> [requests, unchanged]
    # true-rate class (str) -> fresh share of the day over the class's pages
    fresh_by_class: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class PolicyRun:
    """A policy's days and its end-of-run rate correlation."""

    policy: str
    days: list[Day]
    spearman: float
    rated: int  # held pages with an estimate (the Spearman sample)
    wall_s: float
    by_class: list[dict] = dataclasses.field(default_factory=list)  # by_rate_class at the end
    spearman14: float = math.nan  # after 14 days (the issue's target), nan for shorter runs
    liars: int = 0  # hosts whose signals lie on this web

    def averages(self, warmup: int) -> dict[str, float]:
        """Time averages over days >= warmup (the last day if warmup leaves none)."""
        window = [d for d in self.days if d.day >= warmup] or self.days[-1:]
        n = len(window)
        requests = sum(d.requests for d in window)
        return {
            "fresh": sum(d.fresh for d in window) / n,
            "wfresh": sum(d.wfresh for d in window) / n,
            "age": sum(d.age for d in window) / n,
            "coverage": sum(d.coverage for d in window) / n,
            "final_coverage": self.days[-1].coverage,
            "fetches_per_day": requests / n,
            "unchanged_share": sum(d.unchanged for d in window) / requests if requests else 0.0,
            "unchanged_per_day": sum(d.unchanged for d in window) / n,
            "signal_reads_per_day": sum(d.signal_reads for d in window) / n,
            "signal_fetches_per_day": sum(d.signal_fetches for d in window) / n,
            "fresh_honest": sum(d.fresh_honest for d in window) / n,
            "fresh_other": sum(d.fresh_other for d in window) / n,
            "by_reason": {
                reason: [sum(d.by_reason.get(reason, [0, 0])[i] for d in window) / n
                         for i in (0, 1)]
                for reason in sorted({k for d in window for k in d.by_reason})
            },
            "fresh_by_class": {
                c: sum(d.fresh_by_class.get(c, 0.0) for d in window) / n
                for c in sorted({k for d in window for k in d.fresh_by_class}, key=float)
            },
            "spearman": self.spearman,
            "round_s": sum(d.wall_s for d in self.days) / len(self.days),
        }


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation (ties get their mean rank); nan below 3 pairs."""
    from scipy.stats import spearmanr

    if len(x) < 3:
        return math.nan
    return float(spearmanr(x, y).statistic)


def rate_class(rate: float) -> float:
    """The typical rate of simweb's rate class nearest `rate` in log space
    (simweb.changes.WEB_RATE_CLASSES: each page's rate is its class's, log-normally spread)."""
    from simweb.changes import WEB_RATE_CLASSES

    return min((typical for _, typical in WEB_RATE_CLASSES),
               key=lambda t: abs(math.log(max(rate, 1e-9) / t)))


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def by_rate_class(rows: list[tuple[float, float | None, float | None]]) -> list[dict]:
    """Per true-rate class, over held pages given as (true rate, estimated rate or None, revisit
    interval in days or None): pages, median true rate, median estimate, median interval."""
    groups: dict[float, list[tuple[float, float | None, float | None]]] = {}
    for row in rows:
        groups.setdefault(rate_class(row[0]), []).append(row)
    return [{
        "class": c, "pages": len(g), "true": _median([r[0] for r in g]),
        "estimated": _median([r[1] for r in g if r[1] is not None]),
        "interval_d": _median([r[2] for r in g if r[2] is not None]),
    } for c, g in sorted(groups.items())]


def class_lines(run: PolicyRun) -> list[str]:
    """The schedule's view of each true-rate class at the end of a run."""
    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    return [f"  {run.policy:8s} class {c['class']:6.3f}/d: {c['pages']:4d} pages, true "
            f"{f(c['true'], '.3f')}, estimated {f(c['estimated'], '.3f')}, revisit every "
            f"{f(c['interval_d'], '.1f')} d" for c in run.by_class]


def split_key(url: str) -> tuple[str, str]:
    from simweb.truth import split

    return split(url)


def measured_pages(web) -> dict[tuple[str, str], Page]:
    """Every fetchable page of the normal sites with its true rate and PageRank weight."""
    import networkx as nx

    truth = web.truth
    urls = [u for site in web.world.sites for u in truth.pages(site.name)]
    keys = {split_key(u): u for u in urls}
    graph = nx.DiGraph()
    graph.add_nodes_from(keys)
    for key, url in keys.items():
        graph.add_edges_from((key, t) for t in map(split_key, truth.links(url)) if t in keys)
    rank = nx.pagerank(graph, alpha=0.85)
    allowed = {k: u for k, u in keys.items() if not truth.disallowed(u)}
    total = sum(rank[k] for k in allowed)
    return {k: Page(k, truth.change_rate(u), rank[k] / total) for k, u in allowed.items()}


def day_metrics(
    web, pages: dict[tuple[str, str], Page], held: dict[tuple[str, str], int], d: int,
    fresh_by_page: dict[tuple[str, str], float] | None = None,
) -> tuple[float, float, float]:
    """(fresh, wfresh, age over held copies) averaged over [d, d+1) from the change times;
    `d` and the held copies' days are simweb days. `fresh_by_page` collects each held page's
    fresh share of the day."""
    fresh = wfresh = age_sum = 0.0
    for key, page in pages.items():
        f = held.get(key)
        if f is None:
            continue  # never fetched: stale
        e = web.truth.next_change(web.truth.url(*key), float(f))  # first change after copy
        share = min(1.0, max(0.0, e - d))
        if fresh_by_page is not None:
            fresh_by_page[key] = share
        fresh += share
        wfresh += page.weight * share
        if e <= d:
            age_sum += d + 0.5 - e  # stale all day: mean of (t - e) over [d, d+1)
        elif e < d + 1:
            age_sum += (d + 1 - e) ** 2 / 2
    return fresh / len(pages), wfresh, age_sum / len(held) if held else 0.0


def theory(pages: dict[tuple[str, str], Page], budget: int, args: argparse.Namespace,
           max_interval: float) -> str:
    """Steady-state freshness with the true rates: fixed at the budget's interval, and the
    optimum any policy can reach at this budget (the allocation solved on the truth), plain
    and importance-weighted. The ceiling the measured policies are read against."""
    from recrawl.rules.allocation import freshness
    from recrawl.rules.schedules import ChangeRateOptimalSchedule

    rates = [p.rate for p in pages.values()]
    weights = [p.weight for p in pages.values()]
    n = len(rates)
    fix_f = 1.0 / max(args.min_interval, min(max_interval, 1.0 / args.budget_share))
    fixed = sum(freshness(lam, fix_f) for lam in rates) / n
    wfixed = sum(w * freshness(lam, fix_f) for lam, w in zip(rates, weights, strict=True))
    sched = ChangeRateOptimalSchedule(daily_budget=float(budget),
                                      min_interval_days=args.min_interval,
                                      max_interval_days=max_interval)
    opt_u = sched.solve(rates, [1.0] * n).freqs
    opt_w = sched.solve(rates, weights).freqs
    opt = sum(freshness(lam, f) for lam, f in zip(rates, opt_u, strict=True)) / n
    wopt = sum(w * freshness(lam, f) for lam, f, w in zip(rates, opt_w, weights, strict=True))
    return (f"theory (true rates, steady state, all pages held): fixed fresh {fixed:.3f} "
            f"wfresh {wfixed:.3f}; optimum fresh {opt:.3f} ({opt / fixed - 1:+.1%}), "
            f"wfresh {wopt:.3f} ({wopt / wfixed - 1:+.1%})")


def budget_for(n_pages: int, share: float) -> int:
    return max(1, math.ceil(share * n_pages - 1e-9))


def run_policy(spark, policy: str, args: argparse.Namespace, workdir: str) -> PolicyRun:
    """Run `args.days` rounds of `policy` on a fresh SimWeb and crawl home; measure each day."""
    from app.cli import run_step
    from app.demo import demo_config
    from recrawl.config import parse_value
    from recrawl.rules.rounds import STEPS, parse_date, round_id_for
    from recrawl.store.tables import init_tables
    from simweb.response import EPOCH
    from spark_jobs import inject

    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(POLICIES)}")
    home = Path(workdir) / policy
    home.mkdir(parents=True)
    t_start = time.perf_counter()
    start = parse_date(args.start)
    # simweb's day 0 is EPOCH; its day for logical date D is (D - EPOCH): server dates (sitemap
    # lastmod, Last-Modified) and the crawl's logical times are one clock, and the pages have
    # the history they would have on a real web (a copy's age says something on day 0).
    offset = (start - EPOCH).days
    with make_web(args) as web:
        pages = measured_pages(web)
        budget = budget_for(len(pages), args.budget_share)
        kinds = web.truth.signal_kinds()
        liars = {web.base(h) for h, k in kinds.items() if k in LYING_KINDS}
        honest = {web.base(h) for h, k in kinds.items() if k == "accurate"}
        honest_keys = {k for k in pages if kinds.get(k[0]) == "accurate"}
        overrides = {
            "generate.top_n": budget,
            "schedule.daily_budget": budget,
            "generate.max_per_host": max(40, budget),
            "schedule.policy": "optimal" if policy in ("oracle", *SIGNAL_POLICIES) else policy,
            "schedule.default_interval_days": 1.0 / args.budget_share,
            "schedule.min_interval_days": args.min_interval,
            # every policy fills rounds short of due URLs the same way (docs/design-choices.md);
            # floor 0 by default so that all of them spend the whole budget (equal fetches)
            "generate.fill_min_change_probability": args.fill_floor,
            "signals.enabled": policy in SIGNAL_POLICIES,
            # the demo's trap cap (25 URLs of one shape) would flag a site of more /p/N pages
            "updatedb.trap_pattern_cap": max(200, 2 * args.pages),
        }
        if policy == "trust-oracle":  # told which hosts' signals are honest
            told = home / "trust_oracle.json"
            told.write_text(json.dumps({web.base(h): k == "accurate" for h, k in kinds.items()}))
            overrides["signals.trust_oracle"] = str(told)
        if policy == "oracle":
            oracle = home / "oracle_rates.json"
            oracle.write_text(json.dumps({web.truth.url(*k): p.rate for k, p in pages.items()}))
            overrides["schedule.oracle_rates"] = str(oracle)
        cfg = demo_config(home, **overrides)
        if args.set:
            # values read as the CLI's --set reads them (TOML: 0.3 a float, true a bool)
            cfg = cfg.with_overrides(
                {k.strip(): parse_value(v.strip()) for k, v in (kv.split("=", 1) for kv in args.set)},
                "--set")
        init_tables(spark, cfg)
        seeds = home / "seeds.txt"
        every = [u for site in web.world.sites for u in web.truth.pages(site.name)]
        seeds.write_text("\n".join(every) + "\n")
        inject.run(spark, cfg, str(seeds), start)

        held: dict[tuple[str, str], int] = {}
        days: list[Day] = []
        spearman14 = math.nan
        for d in range(args.days):
            r0 = time.perf_counter()
            sd = offset + d  # simweb's day
            web.set_day(sd)
            logical = start + dt.timedelta(days=d)
            rid = round_id_for(cfg, logical)
            for step in STEPS:
                run_step(spark, cfg, step, rid, logical)
            rows = (
                spark.read.format("delta").load(cfg.table_path("fetches"))
                .where(f"round_id = '{rid}'").select("url", "fetch_status").collect()
            )
            reasons = {r["url"]: r["reason"] for r in spark.read.format("delta").load(
                cfg.table_path("fetch_list")).where(f"round_id = '{rid}'").select(
                "url", "reason").collect()}
            requests = unchanged = 0
            by_reason: dict[str, list[int]] = {}
            for r in rows:
                if r["fetch_status"] in NO_REQUEST:
                    continue
                requests += 1
                counts = by_reason.setdefault(reasons.get(r["url"]) or "other", [0, 0])
                counts[0] += 1
                key = split_key(r["url"])
                f = held.get(key)
                if f is not None and web.truth.next_change(web.truth.url(*key), f) > sd:
                    unchanged += 1  # the request brought nothing new
                    counts[1] += 1
                if key in pages and r["fetch_status"] in HELD:
                    held[key] = sd
            shares: dict[tuple[str, str], float] = {}
            fresh, wfresh, age = day_metrics(web, pages, held, sd, shares)
            n_honest = len(honest_keys)
            fresh_h = (sum(shares.get(k, 0.0) for k in honest_keys) / n_honest
                       if n_honest else math.nan)
            n_other = len(pages) - n_honest
            fresh_o = ((sum(shares.values()) - fresh_h * n_honest if n_honest
                        else sum(shares.values())) / n_other if n_other else math.nan)
            by_class: dict[str, list[float]] = {}
            for k, p in pages.items():
                by_class.setdefault(f"{rate_class(p.rate):.3g}", []).append(shares.get(k, 0.0))
            sig = signal_day(spark, cfg, rid, liars, honest) if policy in SIGNAL_POLICIES else {}
            day = Day(d, fresh, wfresh, age, len(held) / len(pages), requests, unchanged,
                      time.perf_counter() - r0, **sig, fresh_honest=fresh_h,
                      fresh_other=fresh_o, by_reason=by_reason,
                      fresh_by_class={c: sum(v) / len(v) for c, v in by_class.items()})
            days.append(day)
            print(f"  {policy:8s} day {d:3d}: fresh {fresh:.3f} wfresh {wfresh:.3f} "
                  f"age {age:5.2f} cover {day.coverage:.2f} requests {requests:4d} "
                  f"unchanged {unchanged:4d} "
                  + " ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(by_reason.items()))
                  + (f" signal reads {day.signal_reads} fetches {day.signal_fetches} (liars "
                     f"{day.liar_signal_fetches}) trusted honest {day.trusted_honest}/"
                     f"{len(honest)} liars {day.trusted_liars}/{len(liars)}" if sig else "")
                  + f" ({day.wall_s:.0f} s)", flush=True)
            if d == 13:
                spearman14 = rate_correlation(spark, cfg, pages, held)[0]
        rho, rated, classes = rate_correlation(spark, cfg, pages, held)
    return PolicyRun(policy, days, rho, rated, time.perf_counter() - t_start,
                     by_rate_class(classes), spearman14, len(liars))


def make_web(args: argparse.Namespace):
    """The benchmark's SimWeb: `--web` names the sites' signal mix (simweb.signals), with
    feeds on `--feeds` of the sites."""
    from simweb import SimWeb

    return SimWeb(seed=args.seed, n_sites=args.sites, pages_per_site=args.pages, rates="web",
                  signals=args.web, feeds=args.feeds)


def rate_correlation(spark, cfg, pages, held) -> tuple[float, int, list]:
    """(Spearman of crawldb.change_rate with the true rate over held pages, how many, the
    (true rate, estimate, interval days) rows for by_rate_class)."""
    est, true, classes = [], [], []
    crawldb = spark.read.format("delta").load(cfg.table_path("crawldb"))
    for r in crawldb.select("url", "change_rate", "fetch_interval_s").collect():
        key = split_key(r["url"])
        if key not in pages or key not in held:
            continue
        rate = None if r["change_rate"] is None else float(r["change_rate"])
        interval = None if r["fetch_interval_s"] is None else r["fetch_interval_s"] / 86400.0
        classes.append((pages[key].rate, rate, interval))
        if rate is not None:
            est.append(rate)
            true.append(pages[key].rate)
    return spearman(est, true), len(est), classes


def signal_day(spark, cfg, rid: str, liars: set[str], honest: set[str]) -> dict[str, int]:
    """The round's change-signal figures: source reads, URLs fetched for a signal (and of them
    on lying hosts), and how many lying / honest hosts are trusted after it."""
    from pyspark.sql import functions as F  # lazy: pyspark

    def load(name):
        return spark.read.format("delta").load(cfg.table_path(name))

    reads = load("signal_sources").where(
        f"round_id = '{rid}' AND fetch_status IS NOT NULL "
        "AND fetch_status NOT IN ('robots_denied', 'skipped_budget')").count()
    chosen = [r["host"] for r in load("fetch_list").where(
        f"round_id = '{rid}' AND reason = 'signal'").select("host").collect()]
    trusted = {r["host"] for r in load("hosts").where(F.col("signal_trusted")).select(
        "host").collect()}
    return {"signal_reads": reads, "signal_fetches": len(chosen),
            "liar_signal_fetches": sum(h in liars for h in chosen),
            "trusted_liars": len(trusted & liars), "trusted_honest": len(trusted & honest)}


def trust_lines(runs: list[PolicyRun], after: int = 7) -> list[str]:
    """Per signal-reading run: lying hosts still trusted from day `after` on, and the URLs
    fetched for their signals a day (the verification fetches liars cost once untrusted)."""
    out = []
    for r in runs:
        late = [d for d in r.days if d.day >= after]
        if r.policy.split("@")[0] not in SIGNAL_POLICIES or not late:
            continue
        out.append(
            f"  {r.policy:12s} from day {after}: lying hosts trusted at most "
            f"{max(d.trusted_liars for d in late)} of {r.liars}, their signal fetches "
            f"{sum(d.liar_signal_fetches for d in late) / len(late) / max(1, r.liars):.2f} a day "
            f"per lying host; honest hosts trusted (last day) {late[-1].trusted_honest}")
    return out


def class_fresh_lines(runs: list[PolicyRun], warmup: int) -> list[str]:
    """Per run, each true-rate class's freshness against what fetching every change in the
    round after it buys: a page fresh at each round's start stays so for (1 - e^-r) / r of the
    day (the bound of the issue's back-of-envelope, pages changing more than ~3 times a day
    aside)."""
    out = []
    for r in runs:
        got = r.averages(warmup)["fresh_by_class"]
        if not got:
            continue
        parts = [f"{c}/d {v:.3f} (chase {(1 - math.exp(-float(c))) / float(c):.3f})"
                 for c, v in got.items()]
        out.append(f"  {r.policy:12s} fresh by class: " + "  ".join(parts))
    return out


def budget_lines(runs: list[PolicyRun], warmup: int) -> list[str]:
    """Per run: freshness on the hosts with honest signals and on the others, and where the
    requests went a day by fetch_list.reason (requests / of them unchanged)."""
    out = []
    for r in runs:
        a = r.averages(warmup)
        spent = "  ".join(f"{k} {v[0]:.1f}/{v[1]:.1f}" for k, v in a["by_reason"].items())
        out.append(f"  {r.policy:12s} fresh honest hosts {a['fresh_honest']:.3f} other "
                   f"{a['fresh_other']:.3f}; a day by reason (requests/unchanged): {spent}")
    return out


def table(runs: list[PolicyRun], warmup: int) -> list[str]:
    """The comparison table, fixed (or the first policy) as the reference."""
    avg = {r.policy: r.averages(warmup) for r in runs}
    ref = avg.get("fixed") or next(iter(avg.values()))
    head = (f"{'policy':9s} {'fresh':>6s} {'vs fix':>7s} {'wfresh':>6s} {'vs fix':>7s} "
            f"{'age(d)':>6s} {'cover':>5s} {'end':>5s} {'fetch/d':>7s} {'unchg':>6s} "
            f"{'unchg/d':>7s} {'sig/d':>5s} {'spearman':>8s} {'rho@14':>6s} {'s/round':>7s}")
    lines = [head, "-" * len(head)]
    for r in runs:
        a = avg[r.policy]
        rho = f"{a['spearman']:.3f}" + ("*" if r.policy == "oracle" else "")

        def rel(x: float, base: float) -> str:
            return f"{x / base - 1:+7.1%}" if base > 0 else f"{'n/a':>7s}"

        lines.append(
            f"{r.policy:9s} {a['fresh']:6.3f} {rel(a['fresh'], ref['fresh'])} "
            f"{a['wfresh']:6.3f} {rel(a['wfresh'], ref['wfresh'])} {a['age']:6.2f} "
            f"{a['coverage']:5.2f} {a['final_coverage']:5.2f} {a['fetches_per_day']:7.1f} "
            f"{a['unchanged_share']:6.1%} {a['unchanged_per_day']:7.1f} "
            f"{a['signal_reads_per_day']:5.1f} {rho:>8s} {r.spearman14:6.3f} {a['round_s']:7.1f}"
        )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=60, help="rounds, one per simulated day")
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--pages", type=int, default=25, help="pages per site")
    ap.add_argument("--budget-share", type=float, default=0.2,
                    help="fetches per day as a share of the pages (top_n = daily_budget)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=None,
                    help="days left out of the averages (default: a third of --days)")
    ap.add_argument("--min-interval", type=float, default=1.0,
                    help="schedule.min_interval_days; one round a day cannot fetch a page more "
                         "often, and with 0.25 (the default config) the optimal policy plans "
                         "fetches the rounds cannot make and leaves budget unspent")
    ap.add_argument("--fill-floor", type=float, default=0.0,
                    help="generate.fill_min_change_probability for every policy (0: rounds "
                         "short of due URLs are always filled, so every policy spends the budget)")
    ap.add_argument("--start", default="2026-11-01", help="logical date of day 0")
    ap.add_argument("--json", help="also write the per-day measurements here")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="print one table of runs saved by --json (e.g. policies run in two "
                         "processes side by side, the same --seed and web) and exit")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="configuration override for every policy")
    ap.add_argument("--web", default="accurate",
                    help="the sites' change-signal mix (simweb.signals): accurate (every "
                         "sitemap date honest), none (no dates), mixed (40%% accurate, 20%% none, "
                         "20%% always today, 20%% never updated), lying, lag, or kind=share,...")
    ap.add_argument("--feeds", type=float, default=0.0,
                    help="share of the sites that publish an RSS / Atom feed")
    args = ap.parse_args(argv)
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bad = [p for p in args.policies if p not in POLICIES]
    if bad:
        ap.error(f"unknown policies {bad}; valid: {', '.join(POLICIES)}")
    if not 0 < args.budget_share <= 1:
        ap.error("--budget-share must be within (0, 1]")
    if args.warmup is None and not args.merge:
        args.warmup = args.days // 3
    return args


def load_runs(paths: list[str]) -> list[PolicyRun]:
    """PolicyRuns saved by --json, in the order given; runs of one policy on different webs
    (`--web`) are named policy@web, and runs of one policy on one web (two versions of the
    code, say) policy@file (the file's name without .json)."""
    saved = [(Path(path).stem, r) for path in paths for r in json.loads(Path(path).read_text())]
    names = [r["policy"] for _, r in saved]
    webs = [(r["policy"], r.get("web")) for _, r in saved]
    runs = []
    for stem, r in saved:
        days = [Day(**d) for d in r["days"]]
        name = r["policy"]
        if webs.count((name, r.get("web"))) > 1:
            name = f"{name}@{stem}"
        elif names.count(name) > 1:
            name = f"{name}@{r.get('web', stem)}"
        runs.append(PolicyRun(name, days, r["spearman"], r["rated"],
                              r.get("wall_s", sum(d.wall_s for d in days)), r["by_class"],
                              r.get("spearman14", math.nan), r.get("liars", 0)))
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        runs = load_runs(args.merge)
        warmup = args.warmup if args.warmup is not None else len(runs[0].days) // 3
        for line in table(runs, warmup):
            print(line)
        print("\nper true-rate class at the end (held pages; medians):")
        for r in runs:
            for line in class_lines(r):
                print(line)
        for line in trust_lines(runs):
            print(line)
        print("\nwhere the budget went (days >= warmup):")
        for line in budget_lines(runs, warmup):
            print(line)
        for line in class_fresh_lines(runs, warmup):
            print(line)
        return 0
    from app.demo import demo_config
    from recrawl.sparkenv.spark import get_spark

    t0 = time.perf_counter()
    with make_web(args) as web:
        pages = measured_pages(web)
        print(f"web {args.web!r}: {web.truth.signal_kinds()}")
    rates = sorted(p.rate for p in pages.values())
    budget = budget_for(len(pages), args.budget_share)
    print(f"pages={len(pages)} (fetchable, of {args.sites} sites x {args.pages}) "
          f"budget={budget}/day days={args.days} warmup={args.warmup} seed={args.seed}; "
          f"true rates/day: min {rates[0]:.4f} median {rates[len(rates) // 2]:.3f} "
          f"max {rates[-1]:.2f}, daily or faster {sum(r >= 1 for r in rates) / len(rates):.0%}")
    print(theory(pages, budget, args, float(demo_config("/nonexistent").get(
        "schedule.max_interval_days"))), flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        spark = get_spark(demo_config(tmp), "pipeline-freshness")
        for policy in args.policies:
            runs.append(run_policy(spark, policy, args, tmp))
            print()  # the table so far: a long run shows its results as policies finish
            for line in table(runs, args.warmup):
                print(line, flush=True)
        spark.stop()
    print("\nper true-rate class at the end (held pages; medians):")
    for r in runs:
        for line in class_lines(r):
            print(line)
    for line in trust_lines(runs):
        print(line)
    print("\nwhere the budget went (days >= warmup):")
    for line in budget_lines(runs, args.warmup):
        print(line)
    for line in class_fresh_lines(runs, args.warmup):
        print(line)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"policy": r.policy, "web": args.web, "spearman": r.spearman, "rated": r.rated, "wall_s": r.wall_s,
              "spearman14": r.spearman14, "liars": r.liars,
              "days": [dataclasses.asdict(d) for d in r.days], "by_class": r.by_class}
             for r in runs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
