"""dedup: exact and near-duplicate detection of the round's pages against everything stored.

Candidates are this round's parsed pages plus the latest fingerprint of every other fetched URL
in crawldb, so a new page is compared with the whole store, not only with its own round.
  * exact: same main-text hash; one survivor per group by the configured order
    (recrawl.rules.survivor, Nutch's compareOrder), the others are duplicates (distance 0);
  * near: 64-bit SimHash within `dedup.max_distance`, found with the pigeonhole block join
    (recrawl.content.nearjoin); one page per exact group (its survivor) takes part, so an exact
    duplicate is never also reported as a near one ("exact beats near").
A page is a near duplicate of the best-ranked page it is close to, if that page outranks it.
Chains are not collapsed (as in Nutch): if A is close to B and B to C but A not to C, A points
at B. A stored page outranked by a new copy is reported too (it is "found duplicate" in this
round), though updatedb only marks the round's own fetches.
A host whose new pages are mostly duplicates is flagged as a trap.
Output: the round's partition of `duplicates` (replaced on re-run); updatedb marks them.

Cost: when the round is small (`dedup.broadcast_new_pages`), every join against the crawldb is
a broadcast of the round's side, so the store is scanned but never shuffled; only buckets that
hold a new page reach the self-join.
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.content.nearjoin import near_duplicate_pairs_df
from recrawl.rules.survivor import rank_key_column
from recrawl.rules.traps import NEAR_DUP_FLOOD, near_dup_flood_sql
from recrawl.sparkenv.joblabels import stage
from recrawl.store.hostdb import flag_traps
from recrawl.store.tables import read, replace_round, sql_str, ts_lit


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    """Find the round's duplicates and replace its partition of `duplicates`, in stages: the
    candidates (`_candidates`), the exact groups (`_exact`), the near pairs (`_near`), the
    write, and the near-duplicate floods flagged as traps (`_flag_floods`).

    Counts: new_pages, exact, near, near_pairs (pairs within distance), capped_buckets (over
    `dedup.max_bucket`, not joined in their table), capped_pages (new pages in at least one
    of them), trap_hosts.
    """
    from pyspark.sql import functions as F  # lazy: pyspark

    d = cfg.section("dedup")
    new, new_pages, new_c, cands, small = _candidates(spark, cfg, round_id, logical)
    exact = _exact(new, cands, small)
    near, nd = _near(spark, cands, exact, small, d)
    # Materialized: the write and the counts below then plan over a small scan, not the joins.
    dups = exact.unionByName(near).withColumn("round_id", F.lit(round_id)).localCheckpoint()
    stage(spark, "writing duplicates")
    replace_round(dups, cfg, "duplicates", round_id)
    counts = {r["kind"]: r["n"] for r in dups.groupBy("kind").agg(F.count("*").alias("n")).collect()}
    near_pairs = nd.pairs.count()
    capped = nd.rows.where("capped").agg(
        F.count_distinct("tbl", "key").alias("buckets"),
        F.count_distinct(F.when(F.col("is_new"), F.col("url"))).alias("pages"),
    ).first()
    trap_hosts = _flag_floods(spark, cfg, new_c, dups, float(d["trap_near_dup_fraction"]))
    for df in (new, exact, nd.rows, nd.pairs):
        df.unpersist()
    return {
        "new_pages": new_pages,
        "exact": counts.get("exact", 0),
        "near": counts.get("near", 0),
        "near_pairs": near_pairs,
        "capped_buckets": int(capped["buckets"]),
        "capped_pages": int(capped["pages"]),
        "trap_hosts": trap_hosts,
    }


def _candidates(spark, cfg: Config, round_id: str, logical: dt.datetime):
    """(the round's new pages (persisted), how many, their side with the survivor-order metadata
    (materialized), every candidate with its rank key, whether the round is small enough to
    broadcast its side of every join with the store)."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    d = cfg.section("dedup")
    db = read(spark, cfg, "crawldb")
    new = (
        read(spark, cfg, "pages").where(f"round_id = {sql_str(round_id)} AND parse_error IS NULL")
        .where("content_hash IS NOT NULL AND text_len > 0")
        .select("url", "content_hash", "simhash").dropDuplicates(["url"])
        .withColumn("is_new", F.lit(True))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    new_pages = new.count()
    small = new_pages <= int(d["broadcast_new_pages"])
    side = _side(small)

    # Meta for the survivor order. fetch_time: the logical date for this round's pages (what
    # updatedb writes), so a re-run after updatedb ranks the same; first_seen falls back to it.
    def with_meta(df, fetch_ts):
        t = F.coalesce(F.col("discovered_at"), fetch_ts)
        return df.select(
            "url", "host", "content_hash", "simhash", "is_new",
            F.coalesce("score", "inlink_score", F.lit(0.0)).alias("score"),
            F.unix_micros(t).alias("first_seen"),
            F.unix_micros(fetch_ts).alias("fetch_time"),
        )

    meta_cols = ["url", "host", "score", "inlink_score", "discovered_at"]
    new_meta = db.select(*meta_cols).join(side(new.select("url")), "url", "left_semi")
    # The round's side, materialized (small): later plans start from it, not from its lineage.
    new_c = with_meta(new.join(new_meta, "url", "left"), F.expr(ts_lit(logical))).localCheckpoint()
    stored = (
        db.where("status = 'fetched' AND content_hash IS NOT NULL")
        .join(side(new.select("url")), "url", "left_anti")
        .withColumn("is_new", F.lit(False))
    )
    stored_c = with_meta(stored, F.col("last_fetch_time"))
    rank_key = rank_key_column(d["survivor_order"])
    return new, new_pages, new_c, new_c.unionByName(stored_c).withColumn("rank_key", rank_key), small


def _side(small: bool):
    """The round's side of a join with the whole store: broadcast when the round is small."""
    from pyspark.sql import functions as F  # lazy: pyspark

    return F.broadcast if small else (lambda df: df)


def _exact(new, cands, small: bool):
    """Exact duplicates (persisted): groups by text hash that contain at least one page of this
    round; every page but the group's survivor (the least rank key) points at it."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    touched = new.select("content_hash").distinct()
    grouped = cands.join(_side(small)(touched), "content_hash", "left_semi")
    survivors = grouped.groupBy("content_hash").agg(F.min("rank_key").alias("best"))
    return (
        grouped.join(survivors, "content_hash")
        .where(F.col("url") != F.col("best.url"))
        .select("url", F.col("best.url").alias("canonical_url"),
                F.lit("exact").alias("kind"), F.lit(0).alias("distance"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


def _near(spark, cands, exact, small: bool, d):
    """(near duplicates, the block join's rows and pairs, persisted): everything but the exact
    duplicates takes part (each exact group by its survivor); of a close pair the page with the
    larger key loses, and keeps its best-ranked neighbour."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    near_in = cands.join(_side(small)(exact.select("url")), "url", "left_anti").select(
        "url", "simhash", "is_new", "rank_key"
    )
    nd = near_duplicate_pairs_df(near_in, int(d["max_distance"]), d["layout"],
                                 int(d["max_bucket"]), carry=("rank_key",), prune=small)
    stage(spark, "near-duplicate block join")
    nd.rows.persist(StorageLevel.MEMORY_AND_DISK)
    pairs = nd.pairs.persist(StorageLevel.MEMORY_AND_DISK)
    oriented = pairs.select(
        F.when(F.col("rank_key_1") < F.col("rank_key_2"), F.col("u2")).otherwise(F.col("u1"))
        .alias("url"),
        F.struct(
            F.least("rank_key_1", "rank_key_2").alias("key"),
            F.when(F.col("rank_key_1") < F.col("rank_key_2"), F.col("u1"))
            .otherwise(F.col("u2")).alias("canonical_url"),
            F.col("distance"),
        ).alias("c"),
    )
    near = oriented.groupBy("url").agg(F.min("c").alias("c")).select(
        "url", "c.canonical_url", F.lit("near").alias("kind"),
        F.col("c.distance").cast("int").alias("distance"),
    )
    return near, nd


def _flag_floods(spark, cfg: Config, new_c, dups, frac: float) -> int:
    """Flag as traps the hosts whose new pages are mostly duplicates (a near-duplicate flood,
    recrawl.rules.traps); a re-run commits nothing. Returns the flood hosts of this round."""
    from pyspark.sql import functions as F  # lazy: pyspark

    per_host = (
        new_c.select("url", "host")
        .join(dups.select("url", F.lit(1).alias("dup")), "url", "left")
        .groupBy("host").agg(F.count("*").alias("n"), F.sum(F.coalesce("dup", F.lit(0))).alias("d"))
        .where(F.expr(near_dup_flood_sql("n", "d", frac)))
        .select("host", F.lit(True).alias("trap"), F.lit(NEAR_DUP_FLOOD).alias("trap_reason"))
    )
    trap_rows = per_host.collect()
    flagged = {r["host"] for r in read(spark, cfg, "hosts").where("trap").select("host").collect()}
    to_flag = [r for r in trap_rows if r["host"] not in flagged]
    if to_flag:
        flag_traps(spark, cfg, spark.createDataFrame(to_flag, per_host.schema))
    return len(trap_rows)
