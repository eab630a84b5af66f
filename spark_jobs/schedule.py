"""schedule: the round's last step — change rate and next fetch time of each URL it fetched.

Nutch's FetchSchedule applied as a job (docs/design.md step 7). Rows it schedules: crawldb rows that
this round's updatedb fetched successfully (`last_round` = the round, `last_fetch_time` = the
round's logical time, status fetched or duplicate) and that this step has not scheduled yet
(`scheduled_round` != the round). For each:
  change_rate      = recrawl.rules.changerate.estimate_from_history(change_history, prior)
  interval         = the `schedule.policy` (recrawl.rules.schedules) within min/max_interval_days
  next_fetch_time  = logical date + interval, fetch_interval_s = interval,
  scheduled_round  = the round
in one MERGE. Every other row is left alone: updatedb already set the retry times of failures,
redirects and gone pages, and the intervals of pages fetched in earlier rounds stand.

The `optimal` policy shares `schedule.daily_budget`, less the discovery reserve while the
frontier holds never-fetched URLs (recrawl.rules.schedules.revisit_budget), over every fetched page,
not only the round's: the driver solves the Lagrange multiplier mu on a (rate x weight) histogram of all
`fetched` pages (a few thousand rows whatever the crawl size), and each scheduled page then gets
its interval from mu in a UDF (mu travels in the UDF's closure: one float, the same as a
broadcast). Duplicates are never generated again (recrawl.rules.crawldb_rules.DUE_STATUSES), so they
take no share of the budget. Rates of pages outside the round are their stored estimates.

Weights are PageRank scores normalized to mean 1 over the scored pages (our PageRank sums to 1,
GraphX's to N: dividing by the mean makes both mean 1), so an unscored page, weight 1.0, counts
as an average page, as recrawl.rules.schedules assumes.

Idempotent: a re-run finds no row left to schedule and commits nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recrawl.config import Config
from recrawl.rules.changerate import (
    GammaPrior,
    estimate_from_history,
    history_arrays,
    history_mean_interval_sql,
    history_visits_sql,
    lm_rate,
    lm_rate_sql,
)
from recrawl.rules.crawldb_rules import SCHEDULED_STATUSES, sql_list
from recrawl.rules.schedules import (
    SECONDS_PER_DAY,
    ChangeRateOptimalSchedule,
    PageState,
    ScheduleContext,
    interval_seconds,
    make_schedule,
    revisit_budget,
)
from recrawl.rules.signal_trust import change_gain_sql, policy_budget, signalled_changed_sql
from recrawl.sparkenv.joblabels import stage
from recrawl.store.crawldb import set_rates, set_schedule
from recrawl.store.tables import read, sql_str, table_exists, ts_lit
from spark_jobs.common import with_trust_oracle

POLICY_CODES = {"fixed": 0, "adaptive": 1, "optimal": 2}
# Only fetched pages are generated again; they are the ones that share the daily budget.
BUDGET_STATUSES = ("fetched",)
# Histogram resolution for mu (recrawl.rules.allocation.rate_weight_bucket): factor 1.33 per step.
PER_DECADE = 8


def build_policy(section: Mapping[str, Any]):
    """The configured FetchSchedule; the optimal policy's default rate is the prior mean."""
    policy = make_schedule(section["policy"], **section)
    if isinstance(policy, ChangeRateOptimalSchedule):
        policy = dataclasses.replace(policy, default_rate=float(section["prior_mean"]))
    return policy


def bucket_sql(rate: str, weight: str, per_decade: int = PER_DECADE) -> str:
    """Spark SQL of recrawl.rules.allocation.rate_weight_bucket over two numeric columns."""

    def step(x: str) -> str:
        return (
            f"CASE WHEN {x} > 0 THEN "
            f"least(4095, greatest(-4095, floor(log10({x}) * {per_decade}))) ELSE -4095 END"
        )

    return f"(({step(rate)}) + 4096) * 8192 + (({step(weight)}) + 4096)"


def _todo_condition(rid_sql: str, now_sql: str) -> str:
    """Rows this round fetched and this step has not scheduled (NULL-safe: never NULL)."""
    statuses = sql_list(SCHEDULED_STATUSES)
    return (
        f"coalesce(last_round = {rid_sql} AND last_fetch_time = {now_sql} "
        f"AND status IN ({statuses}) "
        f"AND (scheduled_round IS NULL OR scheduled_round != {rid_sql}), false)"
    )


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    """Schedule the round's fetched URLs; returns counts (all ints).

    Stages: the followed pages' rates between fetches (`_requote_followed`), the round's
    pages' rates, the optimal policy's allocation of the revisit budget (`_allocate`), each
    page's next fetch (`_next_fetches`) and the write (`_write`).

    Counts: scheduled, changed (of them, how many had a meaningful change), policy (code:
    fixed 0, adaptive 1, optimal 2), mean/min/max interval in seconds and mean_interval_days
    (rounded); optimal adds population (fetched pages sharing the budget), budget_per_day,
    planned_fetches_per_day (what the allocation spends: below the budget when every page
    already sits at the minimum interval) and buckets (histogram rows mu was solved on).
    """
    sch, sig = cfg.section("schedule"), cfg.section("signals")
    policy = build_policy(sch)
    prior = GammaPrior(float(sch["prior_mean"]), float(sch["prior_strength"]))
    now_sql = ts_lit(logical)
    todo_cond = _todo_condition(sql_str(round_id), now_sql)
    oracle = load_oracle_rates(str(sch.get("oracle_rates") or ""))
    default_days = float(sch["default_interval_days"])
    rate_udf = _rate_udf(oracle, prior, default_days)

    db = with_host_signals(spark, cfg, read(spark, cfg, "crawldb"))
    counts: dict[str, int] = {"policy": POLICY_CODES[policy.name]}
    if sig["enabled"]:  # rows this round did not fetch: before the early return below
        rate_sql = lm_rate_sql("lm_changes", "exposure",
                               history_mean_interval_sql("change_history", default_days),
                               history_visits_sql("change_history"), prior)
        counts["requoted"] = _requote_followed(spark, cfg, db, todo_cond, now_sql, rate_sql,
                                               oracle, float(sig["requote_min_change"]))
    if db.where(todo_cond).isEmpty():  # a re-run, or a round that fetched nothing: no commit
        return {**counts, "scheduled": 0, "changed": 0}
    stage(spark, "estimating change rates")
    todo = db.where(todo_cond).withColumn("rate", rate_udf("change_history"))
    ctx, mean_score = ScheduleContext(), None
    if isinstance(policy, ChangeRateOptimalSchedule):
        ctx, mean_score = _allocate(cfg, db, policy, todo_cond, rate_udf, counts)
    result = _next_fetches(todo, policy, ctx, mean_score,
                           policy.clamp(float(sig["defer_max_days"])), now_sql)
    counts.update(_write(spark, cfg, result, round_id))
    return counts


def _rate_udf(oracle: dict[str, float], prior: GammaPrior, default_days: float):
    """history column -> the page's rate (`page_rate`; the benchmarks' oracle where it knows)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    def rate_of(url, h, lm_changes, lm_exposure, lm_ok):
        known = oracle.get(url)
        if known is not None:  # benchmarks only: the true rate where the oracle knows it
            return float(known)
        return float(page_rate(h, lm_changes, lm_exposure, lm_ok, prior, default_days))

    rate_fn = F.udf(rate_of, "double")
    return lambda col: rate_fn("url", col, "lm_changes", "lm_exposure_d", "lm_ok")


def _allocate(cfg: Config, db, policy: ChangeRateOptimalSchedule, todo_cond: str, rate_udf,
              counts: dict[str, int]) -> tuple[ScheduleContext, float | None]:
    """The optimal policy's multiplier mu over the pages sharing the revisit budget, solved on a
    histogram of (rate, weight) buckets; returns (context, mean score) and adds its counts."""
    from pyspark.sql import functions as F  # lazy: pyspark

    sch, sig = cfg.section("schedule"), cfg.section("signals")
    # Discovery takes its share of the budget first while the frontier holds URLs
    # (recrawl.rules.schedules.revisit_budget; generate reserves the same slots).
    pop = db.where(f"status IN ({sql_list(BUDGET_STATUSES)}) AND last_fetch_time IS NOT NULL")
    frontier, held = frontier_and_held(db)
    budget = revisit_budget(
        float(sch["daily_budget"]), float(cfg.get("generate.discovery_share")), frontier,
        held, float(sch["min_revisit_share"]))
    counts["frontier"] = frontier
    # Pages a host with proven signals lists are fetched when their signal moves (and once
    # per signals.defer_max_days to verify), not by the policy: they leave the allocation
    # and take their expected fetches off its budget, down to the others' share of it
    # (recrawl.rules.signal_trust.policy_budget).
    if sig["enabled"]:
        rate = f"coalesce(change_rate, {float(sch['prior_mean'])!r})"
        chase = (f"CASE WHEN signal_followed AND {change_gain_sql(rate)} >= "
                 f"{float(sig['min_gain'])!r} THEN 1.0 - exp(-{rate}) ELSE 0.0 END")
        cost = pop.agg(F.sum(F.expr("CASE WHEN signal_followed THEN 1 ELSE 0 END")).alias("n"),
                       F.count("*").alias("all"), F.sum(F.expr(chase)).alias("chase")).first()
        n_followed, n_all = int(cost["n"] or 0), int(cost["all"] or 0)
        signal_cost = float(cost["chase"] or 0.0) + n_followed / float(sig["defer_max_days"])
        budget = policy_budget(budget, signal_cost, n_followed, n_all - n_followed)
        pop = pop.where("NOT signal_followed")
        counts.update(signal_followed=n_followed, signal_fetches_per_day=int(round(signal_cost)))
    mean_score = pop.agg(F.avg("score")).first()[0]  # avg skips NULLs
    if mean_score is not None and not mean_score > 0:
        mean_score = None  # all scores 0: no information, every page counts as average
    # This round's pages get a fresh estimate; the rest keep the one stored when they were
    # scheduled (a UDF only where none is stored), so a round costs no Python pass over
    # the whole crawldb.
    fresh = pop.where(f"{todo_cond} OR change_rate IS NULL").withColumn(
        "rate", rate_udf("change_history"))
    stored = pop.where(f"NOT ({todo_cond}) AND change_rate IS NOT NULL").withColumn(
        "rate", F.col("change_rate"))
    weight = F.expr(policy.page_weight_sql("score", mean_score))
    hist = (
        fresh.unionByName(stored)
        .select("rate", weight.alias("w"))
        .groupBy(F.expr(bucket_sql("rate", "w")).alias("b"))
        .agg(F.count("*").alias("n"), F.avg("rate").alias("rate"), F.avg("w").alias("w"))
        .collect()
    )
    counts.update(population=int(sum(r["n"] for r in hist)), buckets=len(hist),
                  budget_per_day=int(round(budget)))
    if not hist or budget <= 0:
        # only duplicates fetched (nothing shares the budget, they are not refetched), or
        # no revisit budget at all: the rest wait the maximum interval
        return ScheduleContext(mu=math.inf), mean_score
    # A bucket is represented by its pages' mean rate and weight (not the geometric
    # centre): exact for a bucket of one rate, and within the 1.33 factor otherwise.
    alloc = policy.solve(
        [r["rate"] for r in hist], [r["w"] for r in hist], [r["n"] for r in hist], budget)
    counts["planned_fetches_per_day"] = int(round(alloc.used_budget))
    return ScheduleContext(mu=alloc.mu), mean_score


def _next_fetches(todo, policy, ctx: ScheduleContext, mean_score: float | None,
                  defer_days: float, now_sql: str):
    """The round's pages with their rate, the interval the policy gives them (a page its
    signals follow: the deferral cap, its verification visit) and their next fetch time."""
    from pyspark.sql import functions as F  # lazy: pyspark

    # No annotations: Spark 4 would read them as a pandas UDF signature.
    def interval_s(rate, score, interval_s_now, changed, fetch_count, followed):
        if followed:  # its signal decides; the verification visit comes at the cap
            return interval_seconds(defer_days)
        # only the optimal policy weighs pages (mean_score is set for it alone)
        w = None if mean_score is None else policy.page_weight(score, mean_score)
        page = PageState(
            interval_days=None if interval_s_now is None else interval_s_now / SECONDS_PER_DAY,
            changed=changed,
            change_rate=rate,
            score=w,
            fetch_count=fetch_count or 0,
        )
        return interval_seconds(policy.next_interval(page, ctx))

    interval_udf = F.udf(interval_s, "bigint")
    return (
        todo.withColumn("new_interval_s", interval_udf(
            "rate", "score", "fetch_interval_s", "last_changed", "fetch_count",
            "signal_followed"))
        .select(
            "url",
            F.col("rate").alias("change_rate"),
            F.col("new_interval_s").alias("fetch_interval_s"),
            F.expr(f"{now_sql} + make_interval(0, 0, 0, 0, 0, 0, new_interval_s)").alias(
                "next_fetch_time"),
            "last_changed",
        )
    )


def _write(spark, cfg: Config, result, round_id: str) -> dict[str, int]:
    """Write the next fetch times into crawldb (crawldb.set_schedule); the interval counts."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    result = result.persist(StorageLevel.MEMORY_AND_DISK)
    stats = result.agg(
        F.count("*").alias("n"),
        F.avg("fetch_interval_s").alias("mean"),
        F.min("fetch_interval_s").alias("lo"),
        F.max("fetch_interval_s").alias("hi"),
        F.sum(F.when(F.col("last_changed"), 1).otherwise(0)).alias("changed"),
    ).first()
    n = int(stats["n"])
    counts = {"scheduled": n, "changed": int(stats["changed"] or 0)}
    if n:
        counts.update(
            mean_interval_s=int(round(stats["mean"])),
            mean_interval_days=int(round(stats["mean"] / SECONDS_PER_DAY)),
            min_interval_s=int(stats["lo"]),
            max_interval_s=int(stats["hi"]),
        )
        stage(spark, "writing next fetch times")
        set_schedule(spark, cfg, result, round_id, rows=n)
    result.unpersist()
    return counts


def _requote_followed(spark, cfg: Config, db, todo_cond: str, now_sql: str, rate_sql: str,
                      oracle: dict[str, float], min_change: float) -> int:
    """Re-estimate the rates of pages their host's trusted signals follow and this round did not
    fetch: the host's last read listed them no newer than our copy, so the days from our fetch
    to that read were free of changes (signals are trusted for recall: a change would have
    moved the date). That span joins the last-modified exposure for the estimate only; it is
    not stored (the next fetch adds its own interval), so it is never counted twice. Without
    it a deferred page's rate stands still at its first estimate for up to defer_max_days, and
    one copy's age cannot tell a page changing every few months from one changing monthly.
    Only rates that moved by more than `min_change` (relative) are written. Returns how many.

    `rate_sql` is `page_rate`'s last-modified branch in SQL over an `exposure` column
    (recrawl.rules.changerate.lm_rate_sql): this pass covers every followed page every round, too
    many rows for a Python worker at scale. The benchmarks' `oracle` rates win where given."""
    from pyspark.sql import functions as F  # lazy: pyspark

    tol = float(cfg.get("signals.future_tolerance_days"))
    quiet_d = (f"(unix_timestamp(host_signals_read_at) - unix_timestamp(last_fetch_time)) "
               f"/ {float(SECONDS_PER_DAY)}")
    changed = signalled_changed_sql(now_sql, tol)
    quiet = (
        db.where(f"signal_followed AND lm_ok AND NOT ({todo_cond}) AND status = 'fetched' "
                 "AND lm_exposure_d IS NOT NULL AND last_fetch_time IS NOT NULL "
                 f"AND host_signals_read_at > last_fetch_time AND NOT coalesce({changed}, true)")
        .withColumn("exposure", F.col("lm_exposure_d") + F.expr(quiet_d))
    )
    rate = F.expr(rate_sql)
    if oracle:  # benchmarks only: a small table of true rates
        known = spark.createDataFrame(list(oracle.items()), "url string, oracle_rate double")
        quiet = quiet.join(F.broadcast(known), "url", "left")
        rate = F.coalesce("oracle_rate", rate)
    moved = (
        quiet.withColumn("new_rate", rate)
        .where(F.col("change_rate").isNull() | (F.abs(F.col("new_rate") - F.col("change_rate"))
                                                > F.lit(min_change) * F.col("change_rate")))
        .select("url", F.col("new_rate").alias("change_rate"))
        .cache()
    )
    n = moved.count()
    if n:
        set_rates(spark, cfg, moved)
    moved.unpersist()
    return n


def frontier_and_held(db) -> tuple[int, int]:
    """(never-fetched URLs, held pages) of a crawldb DataFrame: the sizes the revisit budget
    (recrawl.rules.schedules.revisit_budget) splits the day's fetches by, in schedule and generate."""
    from pyspark.sql import functions as F  # lazy: pyspark

    statuses = sql_list(BUDGET_STATUSES)
    sizes = db.agg(
        F.sum(F.when(F.col("status") == "unfetched", 1).otherwise(0)).alias("frontier"),
        F.sum(F.expr(f"CASE WHEN status IN ({statuses}) AND last_fetch_time IS NOT NULL "
                     "THEN 1 ELSE 0 END")).alias("held")).first()
    return int(sizes["frontier"] or 0), int(sizes["held"] or 0)


def page_rate(history, lm_changes, lm_exposure, lm_ok, prior: GammaPrior,
              default_days: float) -> float:
    """A page's change rate: the last-modified estimator where its host's Last-Modified moves
    with content and the page has its counts, else change/no-change over the history."""
    if lm_ok and lm_exposure is not None:
        ts, _ = history_arrays(history)
        mean_interval = sum(ts) / len(ts) if ts else default_days
        # the counts cover the first fetch and every revisit since
        return lm_rate(lm_changes or 0.0, lm_exposure, prior, mean_interval, visits=len(ts) + 1)
    return estimate_from_history(history, prior)


def with_host_signals(spark, cfg: Config, db):
    """crawldb with its hosts' verdicts: `lm_ok` (Last-Modified moves with content) and
    `signal_followed` (a host whose signals are trusted for recall lists the page with a date:
    its signal decides when it is fetched)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    no_read = F.lit(None).cast("timestamp")
    if not cfg.get("signals.enabled"):
        return (db.withColumn("lm_ok", F.lit(False)).withColumn("signal_followed", F.lit(False))
                .withColumn("host_signals_read_at", no_read))
    if not table_exists(spark, cfg.table_path("hosts")):  # a crawldb alone: no verdicts yet
        return (db.withColumn("lm_ok", F.lit(True)).withColumn("signal_followed", F.lit(False))
                .withColumn("host_signals_read_at", no_read))
    hosts = with_trust_oracle(spark, cfg, read(spark, cfg, "hosts").select(
        "host", F.coalesce("lm_trusted", F.lit(True)).alias("lm_ok"),
        F.coalesce("signal_trusted", F.lit(False)).alias("signal_trusted"),
        F.coalesce("signal_defer", F.lit(False)).alias("signal_defer"),
        F.col("signals_read_at").alias("host_signals_read_at")))
    return (db.join(F.broadcast(hosts.select("host", "lm_ok", "signal_defer",
                                             "host_signals_read_at")), "host", "left")
            .withColumn("lm_ok", F.coalesce("lm_ok", F.lit(True)))
            .withColumn("signal_followed",
                        F.coalesce("signal_defer", F.lit(False)) & F.col("signal_time").isNotNull())
            .drop("signal_defer"))


def load_oracle_rates(path: str) -> dict[str, float]:
    """{url: rate per day} from `schedule.oracle_rates` (a JSON object); {} when unset.

    Benchmarks only: it lets benchmarks/pipeline_freshness.py run the optimal policy with
    simweb's true rates. The dict travels in the rate UDF's closure, fine for benchmark webs.
    """
    if not path:
        return {}

    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"schedule.oracle_rates: {path} must hold a JSON object url -> rate")
    return {str(k): float(v) for k, v in data.items()}
