"""updatedb: MERGE the round's fetch results and newly found links into crawldb.

Status transitions follow Nutch's CrawlDbReducer in spirit:
  fetched                  -> fetched (or duplicate when dedup marked it), retries reset
  not_modified             -> fetched (no change recorded)
  redirect                 -> redirect_perm (301/308) / redirect_temp; the target is added
  gone (404/410)           -> gone, retried after retry_gone_interval_days
  robots_denied            -> robots_denied, re-checked after the robots TTL
  http_error, timeout, dns_error, connect_error
                           -> retries + 1, `failed` once retries reach max_retries
  too_large, filtered_type -> failed
  retry_later, skipped_budget -> unchanged, due again at once
Change detection happens here because only this MERGE sees the old and new fingerprints side by
side; the rule itself (a 304, the same payload, or a SimHash within
`schedule.trivial_change_distance` of the old one is no change) and the history window live in
recrawl/crawldb_rules.py.
Idempotency: each row remembers the last round applied to it (`last_round`); re-running the
step for a round skips rows that already carry it, and inserts only URLs that are absent.
Depth is the shortest known path from a seed (min over in-links + 1).
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.crawldb_rules import (
    HISTORY_MAX,
    TRANSIENT,
    ChangeColumns,
    meaningful_change_sql,
    new_url_values_sql,
)


def _status_expr(max_retries: int) -> str:
    transient = ", ".join(f"'{s}'" for s in TRANSIENT)
    return f"""CASE
      WHEN s.fetch_status = 'fetched' THEN CASE WHEN s.is_dup THEN 'duplicate' ELSE 'fetched' END
      WHEN s.fetch_status = 'not_modified' THEN
        CASE WHEN t.status = 'duplicate' THEN 'duplicate' ELSE 'fetched' END
      WHEN s.fetch_status = 'redirect' THEN
        CASE WHEN s.http_status IN (301, 308) THEN 'redirect_perm' ELSE 'redirect_temp' END
      WHEN s.fetch_status = 'gone' THEN 'gone'
      WHEN s.fetch_status = 'robots_denied' THEN 'robots_denied'
      WHEN s.fetch_status IN ({transient}) THEN
        CASE WHEN coalesce(t.retries, 0) + 1 >= {max_retries} THEN 'failed' ELSE t.status END
      WHEN s.fetch_status IN ('too_large', 'filtered_type') THEN 'failed'
      ELSE t.status END"""


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from recrawl.tables import read, sql_str
    from recrawl.urlnorm import try_normalize
    from spark_jobs.common import naive_utc, norm_rules, session_conf

    u, sch = cfg.section("updatedb"), cfg.section("schedule")
    now = naive_utc(logical)
    now_sql = f"timestamp'{now.isoformat(sep=' ')}'"
    rid = sql_str(round_id)
    day = 86400
    trivial = int(sch["trivial_change_distance"])
    transient = ", ".join(f"'{s}'" for s in TRANSIENT)

    fetches = read(spark, cfg, "fetches").where(f"round_id = {rid}")
    pages = read(spark, cfg, "pages").where(f"round_id = {rid}").select(
        "url", "content_hash", "simhash", "parse_error", F.lit(True).alias("parsed")
    )
    dups = read(spark, cfg, "duplicates").where(f"round_id = {rid}").select(
        "url", F.lit(True).alias("is_dup")
    ).dropDuplicates(["url"])
    src = (
        fetches.join(pages, "url", "left").join(dups, "url", "left")
        .withColumn("is_dup", F.coalesce("is_dup", F.lit(False)))
        .dropDuplicates(["url"])
    )
    success = "s.fetch_status IN ('fetched', 'not_modified')"
    # A meaningful change: new text differs beyond the trivial SimHash distance and the payload
    # differs. NULL when the URL was not successfully fetched or had no previous capture.
    changed = meaningful_change_sql(ChangeColumns(
        status="s.fetch_status", new_digest="s.payload_digest", old_digest="t.payload_digest",
        new_hash="s.content_hash", old_hash="t.content_hash", new_simhash="s.simhash",
        old_simhash="t.simhash",
        # a previous capture: crawldb holds its payload digest or text hash
        has_previous="t.payload_digest IS NOT NULL OR t.content_hash IS NOT NULL",
    ), trivial)
    interval_d = (
        f"(unix_timestamp({now_sql}) - unix_timestamp(t.last_fetch_time)) / {float(day)}"
    )
    history = f"""CASE WHEN ({changed}) IS NOT NULL AND t.last_fetch_time IS NOT NULL
      THEN slice(concat(coalesce(t.change_history, array()),
                        array(named_struct('interval_d', {interval_d}, 'changed', ({changed})))),
                 -{HISTORY_MAX}, {HISTORY_MAX})
      ELSE t.change_history END"""
    interval_s = f"coalesce(t.fetch_interval_s, {int(sch['default_interval_days'] * day)})"
    next_fetch = f"""CASE
      WHEN {success} OR s.fetch_status = 'redirect'
        THEN {now_sql} + make_interval(0, 0, 0, 0, 0, 0, {interval_s})
      WHEN s.fetch_status IN ('gone', 'too_large', 'filtered_type')
        THEN {now_sql} + make_interval(0, 0, 0, 0, 0, 0, {int(u['retry_gone_interval_days'] * day)})
      WHEN s.fetch_status IN ({transient})
        THEN {now_sql} + make_interval(0, 0, 0, 0, 0, 0, {int(u['retry_interval_days'] * day)})
      WHEN s.fetch_status = 'robots_denied'
        THEN {now_sql} + make_interval(0, 0, 0, 0, 0, 0,
                                       {int(cfg.get('fetcher.robots_ttl_s'))})
      ELSE {now_sql} END"""
    fetched = "s.fetch_status = 'fetched'"
    new_payload = f"{fetched} AND s.warc_type = 'response'"
    updates = {
        "status": _status_expr(int(u["max_retries"])),
        "retries": f"CASE WHEN {success} THEN 0 WHEN s.fetch_status IN ({transient}) "
                   "THEN coalesce(t.retries, 0) + 1 ELSE t.retries END",
        "fetch_count": f"coalesce(t.fetch_count, 0) + CASE WHEN {success} THEN 1 ELSE 0 END",
        "last_fetch_time": f"CASE WHEN {success} THEN {now_sql} ELSE t.last_fetch_time END",
        "http_status": "coalesce(s.http_status, t.http_status)",
        "etag": f"CASE WHEN {fetched} THEN s.etag ELSE coalesce(s.etag, t.etag) END",
        "last_modified": f"CASE WHEN {fetched} THEN s.last_modified "
                         "ELSE coalesce(s.last_modified, t.last_modified) END",
        "payload_digest": f"CASE WHEN {fetched} THEN s.payload_digest ELSE t.payload_digest END",
        # The record holding the payload, which later revisits refer to: a new `response`;
        # after a revisit (or a fetch that stored nothing new) the original stays.
        "payload_record_id": f"CASE WHEN {new_payload} THEN s.warc_record_id "
                             "ELSE t.payload_record_id END",
        "payload_warc_date": f"CASE WHEN {new_payload} THEN s.warc_date "
                             "ELSE t.payload_warc_date END",
        "payload_target_uri": f"CASE WHEN {new_payload} THEN s.warc_target_uri "
                              "ELSE t.payload_target_uri END",
        "content_hash": f"CASE WHEN {fetched} AND s.content_hash IS NOT NULL "
                        "THEN s.content_hash ELSE t.content_hash END",
        "simhash": f"CASE WHEN {fetched} AND s.simhash IS NOT NULL THEN s.simhash "
                   "ELSE t.simhash END",
        "last_changed": changed,
        "change_count": f"coalesce(t.change_count, 0) + "
                        f"CASE WHEN coalesce(({changed}), false) THEN 1 ELSE 0 END",
        "change_history": history,
        "last_change_time": f"CASE WHEN coalesce(({changed}), false) OR "
                            f"({fetched} AND t.last_change_time IS NULL) THEN {now_sql} "
                            "ELSE t.last_change_time END",
        "redirect_to": "CASE WHEN s.fetch_status = 'redirect' THEN s.final_url "
                       "ELSE t.redirect_to END",
        "next_fetch_time": next_fetch,
        # An identical payload (a `revisit`, not parsed again) would break the parser again:
        # it counts as one more failure, or a static poison page would never be parked.
        "parse_failures": f"CASE WHEN {fetched} AND s.parse_error IS NOT NULL "
                          "THEN coalesce(t.parse_failures, 0) + 1 "
                          f"WHEN {fetched} AND s.parsed IS NULL "
                          "AND coalesce(t.parse_failures, 0) > 0 THEN t.parse_failures + 1 "
                          f"WHEN {fetched} THEN 0 ELSE t.parse_failures END",
        "generated_round": "NULL",
        "generated_at": "NULL",
        "last_round": rid,
    }
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
    host_udf = F.udf(lambda u: _host_or_none(u), "string")  # noqa: PLW0108 - no hint inference
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
    # A stored page that lost to a new copy in this round's dedup is a duplicate too.
    stored_dups = (
        dups.select("url").join(fetches.select("url"), "url", "left_anti")
        .withColumn("stored_dup", F.lit(True))
    )
    # One MERGE for the whole step. The fetched URLs are spread over every crawldb file, so any
    # MERGE they take part in rewrites the whole table (copy-on-write): fetch results, stored
    # duplicates, depth updates and new URLs share that one rewrite instead of paying three
    # (docs/scale.md, "fewer rewrites per round"). One source row per URL: full outer joins.
    merged = (
        src.join(targets.select("url", F.col("depth").alias("link_depth"),
                                F.col("host").alias("link_host"), "inlink_est"), "url", "full")
        .join(stored_dups, "url", "full")
    )
    better_depth = "s.link_depth IS NOT NULL AND (t.depth IS NULL OR s.link_depth < t.depth)"
    depth = f"CASE WHEN {better_depth} THEN s.link_depth ELSE t.depth END"
    crawldb = DeltaTable.forPath(spark, cfg.table_path("crawldb"))
    before = spark.read.format("delta").load(cfg.table_path("crawldb")).count()
    # The MERGE's update projection (the joined crawldb and source rows, ~60 fields, the change
    # rule inlined several times) is more than one Java method can hold: whole-stage code
    # generation spent seconds compiling it, failed with "Code grows beyond 64 KB", logged the
    # stack trace and fell back, every round. Operators this wide now skip whole-stage codegen
    # (each expression is still compiled, in split methods); the narrower stages that build
    # the source keep it.
    with session_conf(spark, {"spark.sql.codegen.maxFields": "40"}):
        (
            crawldb.alias("t")
            .merge(merged.alias("s"), "t.url = s.url")
            .whenMatchedUpdate(
                condition=f"s.fetch_status IS NOT NULL AND (t.last_round IS NULL OR t.last_round != {rid})",
                set={**updates, "depth": depth},
            )
            .whenMatchedUpdate(
                condition="s.fetch_status IS NULL AND "
                          f"((coalesce(s.stored_dup, false) AND t.status = 'fetched') OR ({better_depth}))",
                set={"status": "CASE WHEN coalesce(s.stored_dup, false) AND t.status = 'fetched' "
                               "THEN 'duplicate' ELSE t.status END",
                     "depth": depth},
            )
            .whenNotMatchedInsert(condition="s.link_depth IS NOT NULL", values={
                "url": "s.url", "host": "s.link_host", "depth": "s.link_depth",
                "discovered_at": now_sql, "next_fetch_time": now_sql,
                "inlink_score": "s.inlink_est",
                **new_url_values_sql(float(sch["default_interval_days"])),
            })
            .execute()
        )
    # Pages that keep breaking the parser are parked (a poison page must not fail every round).
    # Few rows match: only the files holding them are rewritten.
    max_pf = int(cfg.get("parse.max_parse_failures"))
    crawldb.update(
        f"parse_failures >= {max_pf} AND status = 'fetched'",
        {"status": "'failed'", "next_fetch_time":
         f"{now_sql} + make_interval(0, 0, 0, 0, 0, 0, {int(u['retry_gone_interval_days'] * day)})"},
    )
    after = spark.read.format("delta").load(cfg.table_path("crawldb")).count()
    traps = _update_hosts(spark, cfg, now)
    counts = {
        r["fetch_status"]: r["n"]
        for r in src.groupBy("fetch_status").agg(F.count("*").alias("n")).collect()
    }
    counts = {f"applied_{k}": v for k, v in counts.items()}
    counts.update(new_urls=after - before, crawldb_urls=after, trap_hosts=traps)
    return counts


def _host_or_none(url: str) -> str | None:
    from recrawl.urlnorm import host_key

    try:
        return host_key(url)
    except Exception:
        return None


def url_shape(url: str) -> str:
    """A URL with digit runs and query values masked: calendars and id-driven traps collapse."""
    import re

    path, _, query = url.partition("?")
    shape = re.sub(r"\d+", "N", path)
    if query:
        keys = sorted(p.split("=", 1)[0] for p in query.split("&"))
        shape += "?" + "&".join(keys)
    return shape


def url_shape_sql(col: str = "url") -> str:
    """`url_shape` as a SQL expression: the same string, without a Python round trip per URL.

    `\\p{Nd}` (Java) is Python's `\\d` for str (Unicode decimal digits); keys are sorted in
    code point order by both (UTF-8 byte order is code point order).
    """
    query = f"substr({col}, instr({col}, '?') + 1)"
    return (
        f"regexp_replace(substring_index({col}, '?', 1), '\\\\p{{Nd}}+', 'N') || "
        f"CASE WHEN instr({col}, '?') > 0 AND {query} != '' THEN '?' || array_join("
        f"array_sort(transform(split({query}, '&'), p -> substring_index(p, '=', 1))), '&') "
        "ELSE '' END"
    )


def _update_hosts(spark, cfg: Config, now: dt.datetime) -> int:
    """Per-host counters and the trap flag; unfetched URLs of trap hosts become `trap`."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from recrawl.tables import read

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
        .withColumn(
            "trap_reason",
            F.when(F.col("pages_known") > int(u["host_page_cap"]), F.lit("page cap"))
            .when(F.col("max_shape") > int(u["trap_pattern_cap"]), F.lit("repeated url pattern")),
        )
        .withColumn("trap", F.col("trap_reason").isNotNull())
        .withColumn("updated_at", F.lit(now))
    )
    (
        DeltaTable.forPath(spark, cfg.table_path("hosts")).alias("t")
        .merge(stats.alias("s"), "t.host = s.host")
        .whenMatchedUpdate(set={
            "pages_known": "s.pages_known", "pages_fetched": "s.pages_fetched",
            # a trap flag from dedup (near-duplicate flood) is kept
            "trap": "s.trap OR coalesce(t.trap, false)",
            "trap_reason": "coalesce(s.trap_reason, t.trap_reason)",
            "updated_at": "s.updated_at",
        })
        .whenNotMatchedInsert(values={
            "host": "s.host", "pages_known": "s.pages_known", "pages_fetched": "s.pages_fetched",
            "trap": "s.trap", "trap_reason": "s.trap_reason", "consecutive_failures": "0",
            "updated_at": "s.updated_at",
        })
        .execute()
    )
    trap_hosts = read(spark, cfg, "hosts").where("trap").select("host")
    n = trap_hosts.count()
    if n:
        (
            DeltaTable.forPath(spark, cfg.table_path("crawldb")).alias("t")
            .merge(trap_hosts.alias("s"), "t.host = s.host AND t.status = 'unfetched'")
            .whenMatchedUpdate(set={"status": "'trap'"})
            .execute()
        )
    return n
