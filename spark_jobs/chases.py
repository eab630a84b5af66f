"""Which signalled changes a round chases: generate's part of the change signals
(docs/freshness.md, "Change signals"; the rules: recrawl/rules/signal_trust.py).

The signals step has read the hosts' sitemaps and feeds into crawldb (`signal_time`); here a
round's candidates get the URLs whose signal says they changed since our copy and that are
worth a fetch ahead of the policy (`signal_marks`), and the SQL of the URLs a host with proven
recall lets wait. `signal_requests` is what the signals step already spent of the round's
budget.
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.rules.signal_trust import (
    TrustRule,
    change_gain_sql,
    deferred_sql,
    signalled_changed_sql,
)

__all__ = ["signal_marks", "signal_requests"]


def signal_requests(spark, cfg: Config, round_id: str) -> int:
    """Requests the round's signals step made (they count in the round's budget)."""
    from recrawl.store.tables import read, sql_str  # lazy: pyspark (via recrawl.store.tables)

    if not cfg.get("signals.enabled"):
        return 0
    return read(spark, cfg, "signal_sources").where(
        f"round_id = {sql_str(round_id)} AND fetch_status IS NOT NULL "
        "AND fetch_status NOT IN ('robots_denied', 'skipped_budget')").count()


def signal_marks(cfg: Config, known, now: dt.datetime, importance, blocked, is_due,
                  signal_requests: int):
    """(known, first, deferred, counts) for the round's change signals.

    `first`: fetched pages whose signal says they changed since our copy, worth chasing
    (change_gain >= signals.min_gain), of hosts whose precision is trusted, plus up to
    signals.probe_per_host of every other host's (the verification fetches trust is learned
    from), with priority = importance x gain. `deferred`: SQL, true for pages that a host with
    proven recall lists as not changed since our copy, read this round, fetched within
    signals.defer_max_days (recrawl.rules.signal_trust.is_deferred): not due, and not used to fill
    the round.
    """
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import ts_lit  # lazy: pyspark (via recrawl.store.tables)

    sig = cfg.section("signals")
    if not sig["enabled"]:
        return known, None, "false", {"signal_requests": 0}
    rule = TrustRule.from_section(sig)
    changed = F.expr(signalled_changed_sql(ts_lit(now), rule.future_tolerance_days))
    gain = F.expr(change_gain_sql("change_rate"))
    fetched = F.col("status") == "fetched"
    deferred = deferred_sql(ts_lit(now), float(sig["read_interval_days"]),
                            float(sig["defer_max_days"]), rule.future_tolerance_days)
    w = Window.partitionBy("host").orderBy(F.col("priority").desc(), F.col("url"))
    cands = (
        known.where(fetched & F.coalesce(changed, F.lit(False)) & ~blocked)
        .where(gain >= F.lit(rule.min_gain))
        .withColumn("priority", importance * gain)
        .withColumn("_probe", F.row_number().over(w))
        .cache()
    )
    first = cands.where(F.col("signal_trusted") | (F.col("_probe") <= int(sig["probe_per_host"])))
    first = first.drop("_probe").cache()
    stats = cands.agg(
        F.count("*").alias("n"),
        F.sum(F.when(F.col("signal_trusted"), 0).otherwise(1)).alias("untrusted"),
    ).first()
    counts = {
        "signal_requests": int(signal_requests),
        "signal_changed": int(stats["n"] or 0),
        "signal_changed_untrusted": int(stats["untrusted"] or 0),
        "signal_deferred": known.where(is_due & F.expr(deferred)).count(),
    }
    cands.unpersist()
    return known, first, deferred, counts
