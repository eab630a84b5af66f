"""updatedb: MERGE the round's fetch results and newly found links into crawldb.

This job builds the MERGE's source (the round's fetches with their parse and dedup verdicts,
and the URLs its links, redirects and sitemaps point to); recrawl/store/crawldb.py, crawldb's owner,
writes it (`apply_round`), with the transitions of recrawl/rules/crawldb_rules.next_status:
  fetched                  -> fetched (or duplicate when dedup marked it), retries reset
  not_modified             -> fetched (no change recorded)
  redirect                 -> redirect_perm (301/308) / redirect_temp; the target is added
  gone (404/410)           -> gone, retried after retry_gone_interval_days
  robots_denied            -> robots_denied, re-checked after retry_denied_interval_days
  http_error, timeout, dns_error, connect_error
                           -> retries + 1, `failed` once retries reach max_retries
  too_large, filtered_type -> failed
  retry_later, skipped_budget -> unchanged, due again at once
Change detection happens in that MERGE because only it sees the old and new fingerprints side by
side; the rule itself (a 304, the same payload, or a SimHash within
`updatedb.trivial_change_distance` of the old one is no change) and the history window live in
recrawl/rules/crawldb_rules.py.
Idempotency: each row remembers the last round applied to it (`last_round`); re-running the
step for a round skips rows that already carry it, and inserts only URLs that are absent.
Depth is the shortest known path from a seed (min over in-links + 1).
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.content.linkfilter import keep
from recrawl.content.urlnorm import host_key_or_none, try_normalize
from recrawl.rules.crawldb_rules import ChangeColumns, meaningful_change_sql
from recrawl.rules.signal_trust import (
    TrustRule,
    check_outcome_sql,
    http_date_sql,
    is_future_sql,
    signalled_changed_sql,
)
from recrawl.rules.traps import host_trap_reason_sql, url_shape_sql
from recrawl.sparkenv.joblabels import stage
from recrawl.store.crawldb import apply_round, mark_traps, park_poison
from recrawl.store.hostdb import record_counts, record_signal_checks
from recrawl.store.tables import naive_utc, read, sql_str, ts_lit
from spark_jobs.common import filter_rules, norm_rules


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    """Apply the round to crawldb in stages: the round's fetches with their parse and dedup
    outcome (`_round_rows`), the URLs it found (`_targets`), the signals checked against the
    copies they replace, one MERGE (crawldb.apply_round), then the hosts' verdicts."""
    from pyspark.sql import functions as F  # lazy: pyspark

    now = naive_utc(logical)
    rid = sql_str(round_id)
    fetches, dups, src = _round_rows(spark, cfg, rid)
    targets = _targets(spark, cfg, rid, fetches)
    # A stored page that lost to a new copy in this round's dedup is a duplicate too.
    stored_dups = (
        dups.select("url").join(fetches.select("url"), "url", "left_anti")
        .withColumn("stored_dup", F.lit(True))
    )
    # One source row per URL (full outer joins): crawldb.apply_round makes one MERGE of it.
    merged = (
        src.join(targets.select("url", F.col("depth").alias("link_depth"),
                                F.col("host").alias("link_host"), "inlink_est"), "url", "full")
        .join(stored_dups, "url", "full")
    )
    before = read(spark, cfg, "crawldb").count()
    checked = _check_signals(spark, cfg, src, now)  # reads the copies the MERGE replaces
    applied = {
        r["fetch_status"]: r["n"]
        for r in src.groupBy("fetch_status").agg(F.count("*").alias("n")).collect()
    }
    stage(spark, "merging the round into crawldb")
    apply_round(spark, cfg, merged, round_id, now, rows=sum(applied.values()))
    park_poison(spark, cfg, now)
    after = read(spark, cfg, "crawldb").count()
    traps = _update_hosts(spark, cfg, now)
    counts = {f"applied_{k}": v for k, v in applied.items()}
    counts.update(new_urls=after - before, crawldb_urls=after, trap_hosts=traps, **checked)
    return counts

def _round_rows(spark, cfg: Config, rid: str):
    """(the round's fetches, its duplicates, one row per fetched URL with its parse and dedup
    outcome and the reason generate listed it)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    fetches = read(spark, cfg, "fetches").where(f"round_id = {rid}")
    pages = read(spark, cfg, "pages").where(f"round_id = {rid}").select(
        "url", "content_hash", "simhash", "text_extractor", "parse_error",
        F.lit(True).alias("parsed"),
    )
    dups = read(spark, cfg, "duplicates").where(f"round_id = {rid}").select(
        "url", F.lit(True).alias("is_dup")
    ).dropDuplicates(["url"])
    reasons = read(spark, cfg, "fetch_list").where(f"round_id = {rid}").select("url", "reason")
    src = (
        fetches.join(pages, "url", "left").join(dups, "url", "left")
        .join(reasons.dropDuplicates(["url"]), "url", "left")
        .withColumn("is_dup", F.coalesce("is_dup", F.lit(False)))
        .dropDuplicates(["url"])
    )
    return fetches, dups, src


def _targets(spark, cfg: Config, rid: str, fetches):
    """The URLs the round found (outlinks, redirect targets, the sitemaps robots.txt names),
    one row per URL: the shortest depth, its host, the PageRank its ranked in-links pass on;
    filtered by the link filter and crawl.max_depth."""
    from pyspark.sql import functions as F  # lazy: pyspark

    rules = norm_rules(cfg)
    norm_udf = F.udf(lambda u: try_normalize(u, rules=rules)[0] if u else None, "string")
    # New URLs: outlinks, redirect targets and sitemaps, at depth = shortest path from a seed.
    db = read(spark, cfg, "crawldb").select("url", "depth", "score")
    links = read(spark, cfg, "links").where(f"round_id = {rid}")
    # A URL found after the last PageRank run gets the estimate generate ranks it by until the
    # next run: sum over its ranked in-links of rank / out-degree. A link's dst_host is
    # host_key(dst_url), computed by parse: carried, not recomputed by a Python UDF per target
    # (the few redirect and sitemap targets still are).
    outdeg = links.groupBy("src_url").agg(F.count("*").alias("deg"))
    link_targets = (
        links.join(db.withColumnRenamed("url", "src_url"), "src_url").join(outdeg, "src_url")
        .select(F.col("dst_url").alias("url"), (F.col("depth") + 1).alias("depth"),
                (F.col("score") / F.col("deg")).alias("inlink_est"), F.col("dst_host").alias("host"))
    )
    redirect_targets = (
        fetches.where("fetch_status = 'redirect' AND final_url IS NOT NULL "
                      "AND final_url != url")
        .join(db, "url")
        .select(F.col("final_url").alias("url"), F.col("depth"), F.col("score").alias("inlink_est"))
    )
    # Sitemaps named in robots.txt of hosts fetched this round feed discovery (depth 0 like a
    # seed: a sitemap is the site's own list of its pages).
    # The round's hosts come from its fetch list (generate stored host_key there): no Python
    # call per fetched URL (at 10M that UDF pass was most of the step's Python worker memory).
    round_hosts = read(spark, cfg, "fetch_list").where(f"round_id = {rid}").select("host").distinct()
    sitemap_targets = (
        read(spark, cfg, "robots")
        .join(round_hosts, "host")
        .select(F.explode("sitemaps").alias("url"))
        .select(norm_udf("url").alias("url"), F.lit(0).alias("depth"),
                F.lit(None).cast("double").alias("inlink_est"))
        .where("url IS NOT NULL")
    )
    max_depth = int(cfg.get("crawl.max_depth"))
    frules = filter_rules(cfg)
    # the link filter parse applies to outlinks, applied to redirect and sitemap targets too
    host_udf = F.udf(lambda u: host_key_or_none(u) if u and keep(u, frules) else None, "string")
    # Rows without a carried host (redirects, sitemaps, links written without dst_host) get
    # it from the UDF: only they pay a Python round trip.
    other_targets = (
        link_targets.where("host IS NULL").drop("host")
        .unionByName(redirect_targets).unionByName(sitemap_targets)
    )
    targets = (
        link_targets.where("host IS NOT NULL")
        .unionByName(other_targets.withColumn("host", host_udf("url")))
        # host is a function of url: every row of one url carries the same (or NULL)
        .groupBy("url").agg(F.min("depth").alias("depth"), F.max("host").alias("host"),
                            F.sum("inlink_est").alias("inlink_est"))
        .where(F.col("depth") <= max_depth)
        .where("host IS NOT NULL")
    )
    return targets



def _check_signals(spark, cfg: Config, src, now: dt.datetime) -> dict[str, int]:
    """Each successful revisit checks its host's change signals against what the crawler saw
    (recrawl/rules/signal_trust.py): per host, this round's true / false positives and negatives and
    whether Last-Modified moved with the content, folded into the decayed counts and trust
    verdicts of `hosts` (recrawl.store.hostdb.record_signal_checks). Returns the round's totals."""
    from pyspark.sql import functions as F  # lazy: pyspark


    if not cfg.get("signals.enabled"):
        return {}
    rule = TrustRule.from_section(cfg.section("signals"))
    now_sql = ts_lit(now)
    old = read(spark, cfg, "crawldb").select(
        "url", "host", F.col("last_fetch_time").alias("prev_fetch"), "signal_time",
        "signal_precision_s", F.col("payload_digest").alias("old_digest"),
        F.col("content_hash").alias("old_hash"), F.col("simhash").alias("old_simhash"),
        F.col("text_extractor").alias("old_extractor"), F.col("last_modified").alias("old_lm"))
    publishes = read(spark, cfg, "hosts").select(
        "host", F.col("signals_read_at").isNotNull().alias("publishes"))
    changed = meaningful_change_sql(ChangeColumns(
        status="fetch_status", new_digest="new_digest", old_digest="old_digest",
        new_hash="new_hash", old_hash="old_hash", new_simhash="new_simhash",
        old_simhash="old_simhash", has_previous="old_digest IS NOT NULL OR old_hash IS NOT NULL",
        new_extractor="new_extractor", old_extractor="old_extractor",
    ), int(cfg.get("updatedb.trivial_change_distance")))
    signalled = signalled_changed_sql(now_sql, rule.future_tolerance_days, last_fetch="prev_fetch")
    outcome = check_outcome_sql(signalled, changed, "coalesce(publishes, false)",
                                is_future_sql(now_sql, rule.future_tolerance_days))
    new_lm, old_lm = http_date_sql("new_lm"), http_date_sql("old_lm")
    lm_agree = (f"CASE WHEN fetch_status = 'fetched' AND {new_lm} IS NOT NULL AND {old_lm} IS NOT "
                f"NULL AND ({changed}) IS NOT NULL THEN ({new_lm} > {old_lm}) = ({changed}) END")
    rows = (
        src.where("fetch_status IN ('fetched', 'not_modified')")
        .select("url", "fetch_status", F.col("payload_digest").alias("new_digest"),
                F.col("content_hash").alias("new_hash"), F.col("simhash").alias("new_simhash"),
                F.col("text_extractor").alias("new_extractor"), F.col("last_modified").alias("new_lm"))
        .join(old.where("prev_fetch IS NOT NULL"), "url")
        .join(publishes, "host", "left")
        .select("host", F.expr(outcome).alias("o"), F.expr(lm_agree).alias("lm"))
    )

    def n(cond):
        return F.sum(F.when(F.expr(cond), 1.0).otherwise(0.0))

    checks = rows.groupBy("host").agg(
        n("o = 'tp'").alias("tp"), n("o = 'fp'").alias("fp"), n("o = 'fn'").alias("fn"),
        n("o = 'tn'").alias("tn"), n("lm = true").alias("lm_agree"),
        n("lm = false").alias("lm_disagree"),
    ).where("tp + fp + fn + tn + lm_agree + lm_disagree > 0").cache()
    totals = checks.agg(*[F.sum(c).alias(c) for c in
                          ("tp", "fp", "fn", "tn", "lm_agree", "lm_disagree")]).first()
    if totals["tp"] is not None:
        record_signal_checks(spark, cfg, checks, rule)
    checks.unpersist()
    return {f"signal_{k}": int(totals[k] or 0) for k in ("tp", "fp", "fn", "tn")} | {
        k: int(totals[k] or 0) for k in ("lm_agree", "lm_disagree")}


def _update_hosts(spark, cfg: Config, now: dt.datetime) -> int:
    """Per-host counters and the trap flag; unfetched URLs of trap hosts become `trap`."""
    from pyspark.sql import functions as F  # lazy: pyspark

    u = cfg.section("updatedb")
    db = read(spark, cfg, "crawldb")
    # SQL, not a Python UDF: this runs over every URL of crawldb each round (measured in
    # docs/scale.md: the UDF was most of updatedb's time at 1M URLs).
    shapes = (
        db.withColumn("shape", F.expr(url_shape_sql("url"))).groupBy("host", "shape").count()
        .groupBy("host").agg(F.max("count").alias("max_shape"))
    )
    stats = (
        db.groupBy("host").agg(
            F.count("*").alias("pages_known"),
            F.sum(F.when(F.col("fetch_count") > 0, 1).otherwise(0)).alias("pages_fetched"),
        )
        .join(shapes, "host")
        .withColumn("trap_reason", F.expr(host_trap_reason_sql(
            "pages_known", "max_shape", int(u["host_page_cap"]), int(u["trap_pattern_cap"]))))
        .withColumn("trap", F.col("trap_reason").isNotNull())
        .withColumn("updated_at", F.lit(now))
    )
    stage(spark, "updating hosts")
    record_counts(spark, cfg, stats)
    trap_hosts = read(spark, cfg, "hosts").where("trap").select("host")
    n = trap_hosts.count()
    if n:
        mark_traps(spark, cfg, trap_hosts)
    return n
